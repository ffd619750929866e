/** The submit commands: from the palette or panel, and from the file browser's context menu. */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { FileDialog, IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { Contents } from '@jupyterlab/services';
import { IScore } from '@jupyterlab/ui-components';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { DRIVE_NAME } from '../drive';
import { submitJobIcon } from '../icons';
import { CommandIDs } from './commandids';
import { IPluginContext } from './context';
import { submitPanel, submitPath } from './submit';

export function addSubmitCommands(
  ctx: IPluginContext,
  notebooks: INotebookTracker | null,
  fileBrowser: IDefaultFileBrowser | null
): void {
  addSubmitNotebookCommand(ctx, notebooks, fileBrowser);
  addSubmitSelectedCommand(ctx, fileBrowser);
}

/**
 * Submit the notebook given by path, else the current one, else the one selected in the file
 * browser, else one picked in a file dialog.
 */
function addSubmitNotebookCommand(
  ctx: IPluginContext,
  notebooks: INotebookTracker | null,
  fileBrowser: IDefaultFileBrowser | null
): void {
  ctx.app.commands.addCommand(CommandIDs.submitNotebook, {
    label: 'Submit Notebook as GPU Job…',
    caption: 'Run a notebook unattended in the GPU queue',
    icon: submitJobIcon,
    execute: async args => {
      const path = args.path as string | undefined;
      if (path) {
        return submitPath(ctx, path);
      }
      const current = notebooks?.currentWidget;
      if (submittable(current)) {
        return submitPanel(ctx, current);
      }
      const picked = selectedNotebook(fileBrowser) ?? (await pickNotebook(fileBrowser));
      if (picked) {
        return submitPath(ctx, picked);
      }
    }
  });
}

function addSubmitSelectedCommand(ctx: IPluginContext, fileBrowser: IDefaultFileBrowser | null): void {
  ctx.app.commands.addCommand(CommandIDs.submitSelected, {
    label: 'Submit as GPU Job…',
    caption: 'Run this notebook unattended in the GPU queue',
    icon: submitJobIcon,
    isVisible: () => selectedNotebook(fileBrowser) !== null,
    execute: () => {
      const path = selectedNotebook(fileBrowser);
      return path ? submitPath(ctx, path) : undefined;
    }
  });
  ctx.app.contextMenu.addItem({
    command: CommandIDs.submitSelected,
    selector: '.jp-DirListing-item[data-file-type="notebook"]',
    rank: 3
  });
}

/** A notebook panel that can be submitted: not a job's executed notebook. */
function submittable(p: NotebookPanel | null | undefined): p is NotebookPanel {
  return !!p && !p.context.path.startsWith(`${DRIVE_NAME}:`);
}

function selectedNotebook(fileBrowser: IDefaultFileBrowser | null): string | null {
  if (!fileBrowser) {
    return null;
  }
  for (const item of fileBrowser.selectedItems()) {
    if (item.type === 'notebook') {
      return item.path;
    }
  }
  return null;
}

/** A notebook picked in JupyterLab's file dialog (only notebooks are offered); null when cancelled. */
async function pickNotebook(fileBrowser: IDefaultFileBrowser | null): Promise<string | null> {
  if (!fileBrowser) {
    askForNotebook(); // no file browser to pick from
    return null;
  }
  const result = await FileDialog.getOpenFiles({
    manager: fileBrowser.model.manager,
    title: 'Submit which notebook as a GPU job?',
    label: 'No notebook is open or selected: pick one to submit.',
    defaultPath: fileBrowser.model.path,
    filter: isNotebookOrFolder
  });
  const notebook = result.button.accept ? result.value?.find(item => item.type === 'notebook') : undefined;
  return notebook?.path ?? null;
}

/** Notebooks to pick, and folders to look in; every other file hidden. */
function isNotebookOrFolder(item: Contents.IModel): Partial<IScore> | null {
  return item.type === 'notebook' || item.type === 'directory' || item.name.endsWith('.ipynb') ? {} : null;
}

function askForNotebook(): void {
  void showDialog({
    title: 'Which notebook?',
    body: 'Open a notebook, or select one in the file browser, then submit it as a GPU job.',
    buttons: [Dialog.okButton()]
  });
}
