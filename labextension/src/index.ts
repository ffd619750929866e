/**
 * e31-jupyter's JupyterLab face: wires the model (src/model) to JupyterLab's shell, commands,
 * toolbar, file browser, status bar and notifications. The widgets live in src/widgets; each part
 * of the wiring lives in src/plugin.
 */

import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';

import { CATEGORY, CommandIDs } from './plugin/commandids';
import { IPluginContext, addExecutedNotebooksDrive, createContext } from './plugin/context';
import { addJobCommands } from './plugin/jobviews';
import { addJobsPanel } from './plugin/jobspanel';
import { addJobsTable } from './plugin/jobstable';
import { addPanelCommands } from './plugin/panelcommands';
import { notifyEndings } from './plugin/notifications';
import { followJobs } from './plugin/polling';
import { addStatusItem } from './plugin/statusbar';
import { addSubmitButton } from './plugin/submitbutton';
import { addSubmitCommands } from './plugin/submitcommands';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'e31-jupyter:plugin',
  description: 'Jobs panel, submit-notebook dialog, status bar and notifications for the e31 GPU queue.',
  autoStart: true,
  requires: [IDocumentManager],
  optional: [ILayoutRestorer, ICommandPalette, IStatusBar, INotebookTracker, IDefaultFileBrowser],
  activate
};

function activate(
  app: JupyterFrontEnd,
  docManager: IDocumentManager,
  restorer: ILayoutRestorer | null,
  palette: ICommandPalette | null,
  statusBar: IStatusBar | null,
  notebooks: INotebookTracker | null,
  fileBrowser: IDefaultFileBrowser | null
): void {
  const shared = createContext(app);
  addExecutedNotebooksDrive(shared);
  const ctx: IPluginContext = { ...shared, panel: addJobsPanel(shared, restorer) };
  followJobs(app, ctx.model);
  notifyEndings(ctx);
  addStatusItem(ctx, statusBar);
  addSubmitCommands(ctx, notebooks, fileBrowser);
  addSubmitButton(ctx);
  addPanelCommands(ctx);
  addJobCommands(ctx, docManager);
  addJobsTable(ctx, palette);
  addToPalette(palette);
}

function addToPalette(palette: ICommandPalette | null): void {
  for (const command of [CommandIDs.submitNotebook, CommandIDs.showJobs, CommandIDs.showMeter]) {
    palette?.addItem({ command, category: CATEGORY });
  }
}

export default plugin;
