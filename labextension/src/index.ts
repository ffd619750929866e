/**
 * e31-jupyter's JupyterLab face: wires the model (src/model) to JupyterLab's shell, commands,
 * toolbar, file browser, status bar and notifications. The widgets live in src/widgets.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  IFrame,
  MainAreaWidget,
  Notification,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { PathExt, URLExt } from '@jupyterlab/coreutils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { DocumentRegistry, IDocumentWidget } from '@jupyterlab/docregistry';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ToolbarButton } from '@jupyterlab/ui-components';
import { IDisposable } from '@lumino/disposable';

import { DRIVE_NAME, ExecutedNotebooksDrive, executedNotebookPath } from './drive';
import { gpuJobsIcon, submitJobIcon } from './icons';
import { API_ROOT, E31Api, errorText } from './model/api';
import { JobDetailModel } from './model/detail';
import { EndingsTracker, endingsKey } from './model/endings';
import { NotebookSource, jobParameters } from './model/form';
import { formatDuration, formatGpuHours, secondsBetween } from './model/format';
import { JobsModel, jobEventOwnerKey } from './model/jobs';
import { IParameter, notebookParameters } from './model/parameters';
import { IJob } from './model/types';
import { JobDetailView } from './widgets/detail';
import { JobsPanel } from './widgets/panel';
import { JobsStatus } from './widgets/statusbar';
import { showChangeDialog } from './widgets/change';
import { showSubmitDialog } from './widgets/submit';

namespace CommandIDs {
  export const submitNotebook = 'e31:submit-notebook';
  export const submitSelected = 'e31:submit-selected-notebook';
  export const showJobs = 'e31:show-jobs';
  export const showMeter = 'e31:show-meter';
  export const openJob = 'e31:open-job';
  export const openResults = 'e31:open-executed-notebook';
  export const openReport = 'e31:open-report';
}

const CATEGORY = 'GPU Jobs';
const REMEMBERED_KEY = 'e31-jupyter:last-request';

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
  const { commands, shell } = app;
  const settings = app.serviceManager.serverSettings;
  const api = new E31Api(
    (path, init) => ServerConnection.makeRequest(apiUrl(settings, path), init ?? {}, settings),
    path => apiUrl(settings, path)
  );
  const model = new JobsModel({
    api,
    endings: user => new EndingsTracker(window.localStorage, endingsKey(settings.baseUrl, user))
  });
  app.serviceManager.contents.addDrive(new ExecutedNotebooksDrive(api, settings));

  // --- the panel -------------------------------------------------------------------------
  const panel = new JobsPanel(model, {
    submit: () => void commands.execute(CommandIDs.submitNotebook),
    openJob: id => void commands.execute(CommandIDs.openJob, { id }),
    cancel: job => void cancelJob(job)
  });
  panel.title.icon = gpuJobsIcon;
  shell.add(panel, 'left', { rank: 350 });
  restorer?.add(panel, panel.id);
  const showPanel = () => shell.activateById(panel.id);

  // --- polling follows what the user can see -----------------------------------------------
  document.addEventListener('visibilitychange', () =>
    model.setPageVisible(document.visibilityState === 'visible')
  );
  model.setPageVisible(document.visibilityState === 'visible');
  // One look at start: the status bar, and the endings that happened while the browser was closed.
  model.refresh();
  // Jobs submitted anywhere (a notebook's %%e31, a terminal's e31, a console, another server),
  // started, changed or ended are announced on the server's event bus: look again then.
  app.serviceManager.events.stream.connect((_, event) => {
    const ownerKey = jobEventOwnerKey(event);
    if (ownerKey !== null) {
      model.jobChanged(ownerKey);
    }
  });

  // --- notifications ------------------------------------------------------------------------
  model.ended.connect((_, jobs) => jobs.forEach(notifyEnded));

  function notifyEnded(job: IJob): void {
    if (job.state === 'cancelled') {
      return; // the user (or an admin) did it; nothing to announce
    }
    const ran = secondsBetween(job.started_at, job.finished_at);
    const type = job.state === 'succeeded' ? 'success' : job.state === 'failed' ? 'error' : 'warning';
    const message =
      job.state === 'succeeded'
        ? `Job “${job.name}” succeeded after ${formatDuration(ran)}` +
          (job.gpus.length ? ` (${formatGpuHours(job.meter.gpu_hours)}).` : '.')
        : job.state === 'failed'
          ? `Job “${job.name}” failed${job.reason ? `: ${job.reason}` : '.'}`
          : `Job “${job.name}” expired${job.reason ? `: ${job.reason}` : ' before it could start.'}`;
    const actions: Notification.IAction[] = [];
    if (job.started_at) {
      actions.push({
        label: 'Open results',
        caption: 'Open the executed notebook, read-only',
        displayType: 'accent',
        callback: () => void commands.execute(CommandIDs.openResults, { id: job.id })
      });
    }
    actions.push({
      label: 'Details',
      caption: 'Show the job: request, timeline, log and files',
      callback: () => void commands.execute(CommandIDs.openJob, { id: job.id })
    });
    Notification.emit(message, type, { autoClose: false, actions });
  }

  // --- status bar ------------------------------------------------------------------------------
  if (statusBar) {
    statusBar.registerStatusItem('e31-jupyter:status', {
      item: new JobsStatus(model, showPanel),
      align: 'left',
      rank: 5
    });
  }

  // --- submitting -----------------------------------------------------------------------------
  async function submit(source: NotebookSource, content: unknown): Promise<void> {
    let parameters: IParameter[];
    try {
      parameters = notebookParameters(content as any);
    } catch {
      parameters = [];
    }
    const job = await showSubmitDialog({ api, source, parameters, remembered: remembered(), jobs: model.jobs });
    if (job) {
      afterSubmit(job);
    }
  }

  function afterSubmit(job: IJob & { warnings?: string[] }): void {
    remember({ team: job.team ?? '', gpus: String(job.request.gpus) });
    model.refresh();
    panel.showTab('jobs');
    showPanel();
    Notification.info(
      job.state === 'queued'
        ? `“${job.name}” is in the queue${job.queue_position ? ` (#${job.queue_position})` : ''}.`
        : `“${job.name}” is ${job.state}.`,
      { autoClose: 4000 }
    );
    for (const warning of job.warnings ?? []) {
      Notification.warning(warning, { autoClose: 10000 });
    }
  }

  async function submitPath(path: string): Promise<void> {
    try {
      const file = await app.serviceManager.contents.get(path, { content: true, type: 'notebook' });
      await submit({ kind: 'path', path }, file.content);
    } catch (error) {
      void showErrorMessage('Cannot submit the notebook', errorText(error));
    }
  }

  async function submitPanel(nbPanel: NotebookPanel): Promise<void> {
    await nbPanel.context.ready;
    const content = nbPanel.context.model.toJSON();
    const name = PathExt.basename(nbPanel.context.path);
    const folder = PathExt.dirname(nbPanel.context.path);
    await submit({ kind: 'content', name, content, folder }, content);
  }

  function selectedNotebook(): string | null {
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

  const submittable = (p: NotebookPanel | null | undefined): p is NotebookPanel =>
    !!p && !p.context.path.startsWith(`${DRIVE_NAME}:`);

  commands.addCommand(CommandIDs.submitNotebook, {
    label: 'Submit Notebook as GPU Job…',
    caption: 'Run a notebook unattended in the GPU queue',
    icon: submitJobIcon,
    execute: async args => {
      const path = args.path as string | undefined;
      if (path) {
        return submitPath(path);
      }
      const current = notebooks?.currentWidget;
      if (submittable(current)) {
        return submitPanel(current);
      }
      const selected = selectedNotebook();
      if (selected) {
        return submitPath(selected);
      }
      void showDialog({
        title: 'Which notebook?',
        body: 'Open a notebook, or select one in the file browser, then submit it as a GPU job.',
        buttons: [Dialog.okButton()]
      });
    }
  });

  commands.addCommand(CommandIDs.submitSelected, {
    label: 'Submit as GPU Job…',
    caption: 'Run this notebook unattended in the GPU queue',
    icon: submitJobIcon,
    isVisible: () => selectedNotebook() !== null,
    execute: () => {
      const path = selectedNotebook();
      return path ? submitPath(path) : undefined;
    }
  });
  app.contextMenu.addItem({
    command: CommandIDs.submitSelected,
    selector: '.jp-DirListing-item[data-file-type="notebook"]',
    rank: 3
  });

  app.docRegistry.addWidgetExtension('Notebook', {
    createNew(nbPanel: NotebookPanel, context: DocumentRegistry.IContext<any>): IDisposable {
      const button = new ToolbarButton({
        className: 'e31-SubmitButton',
        icon: submitJobIcon,
        label: 'Submit job',
        tooltip: 'Submit this notebook as a GPU job',
        onClick: () => void submitPanel(nbPanel)
      });
      if (context.path.startsWith(`${DRIVE_NAME}:`)) {
        return button; // a job's executed notebook: resubmit the job from its detail view instead
      }
      if (!nbPanel.toolbar.insertAfter('cellType', 'e31-submit', button)) {
        nbPanel.toolbar.addItem('e31-submit', button);
      }
      return button;
    }
  });

  // --- panel, meter, job detail -----------------------------------------------------------
  commands.addCommand(CommandIDs.showJobs, {
    label: 'Show GPU Jobs',
    icon: gpuJobsIcon,
    execute: () => {
      panel.showTab('jobs');
      showPanel();
    }
  });

  commands.addCommand(CommandIDs.showMeter, {
    label: 'Show GPU Meter',
    caption: 'GPU-hours of the last days, by team',
    execute: () => {
      panel.showTab('meter');
      showPanel();
    }
  });

  const details = new Map<string, MainAreaWidget<JobDetailView>>();

  commands.addCommand(CommandIDs.openJob, {
    label: 'Show GPU Job',
    execute: args => {
      const id = String(args.id);
      let widget = details.get(id);
      if (!widget || widget.isDisposed) {
        const known = model.find(id);
        const content = new JobDetailView(new JobDetailModel(api, id), {
          cancel: job => void cancelJob(job),
          deleteFiles: job => void deleteFiles(job),
          change: job => void changeJob(job),
          resubmit: job => void resubmit(job),
          openNotebook: job => void commands.execute(CommandIDs.openResults, { id: job.id }),
          openReport: job => void commands.execute(CommandIDs.openReport, { id: job.id })
        });
        widget = new MainAreaWidget({ content });
        widget.id = `e31-job-${id}`;
        widget.title.label = `Job: ${known?.name ?? id}`;
        widget.title.icon = gpuJobsIcon;
        widget.title.closable = true;
        widget.disposed.connect(() => details.delete(id));
        details.set(id, widget);
        shell.add(widget, 'main');
      }
      shell.activateById(widget.id);
    }
  });

  commands.addCommand(CommandIDs.openResults, {
    label: 'Open Executed Notebook of GPU Job',
    execute: async args => {
      const id = String(args.id);
      try {
        const job = model.find(id) ?? (await api.job(id));
        const path = executedNotebookPath(id, job.work?.notebook ?? '');
        const already = docManager.findWidget(path);
        const widget = docManager.openOrReveal(path, 'Notebook') as IDocumentWidget | undefined;
        if (widget && !already) {
          // A result to read: no kernel, which could only run it again here.
          widget.context.sessionContext.kernelPreference = {
            shouldStart: false,
            canStart: false,
            shouldReuse: false,
            autoStartDefault: false
          };
          await widget.context.ready;
          widget.title.label = `${job.name} (job result)`;
          widget.title.caption = `The executed notebook of job ${job.name} (${id}), read-only`;
          widget.addClass('e31-ExecutedNotebook');
        }
      } catch (error) {
        void showErrorMessage('Cannot open the executed notebook', errorText(error));
      }
    }
  });

  commands.addCommand(CommandIDs.openReport, {
    label: 'Open HTML Report of GPU Job',
    execute: async args => {
      const id = String(args.id);
      const widgetId = `e31-report-${id}`;
      const existing = Array.from(shell.widgets('main')).find(w => w.id === widgetId);
      if (existing) {
        shell.activateById(widgetId);
        return;
      }
      const job = model.find(id) ?? (await api.job(id));
      // The report is the job's own content: a sandboxed frame, with no access to JupyterLab.
      const content = new IFrame({ sandbox: ['allow-scripts', 'allow-popups'] });
      content.url = api.reportUrl(id);
      const widget = new MainAreaWidget({ content });
      widget.id = widgetId;
      widget.title.label = `Report: ${job.name}`;
      widget.title.icon = gpuJobsIcon;
      widget.title.closable = true;
      widget.addClass('e31-Report');
      shell.add(widget, 'main');
      shell.activateById(widgetId);
    }
  });

  function cancelJob(job: IJob): Promise<void> {
    return afterYes(job, () => api.cancel(job.id), {
      title: `Cancel “${job.name}”?`,
      body:
        job.state === 'running'
          ? 'Its processes are stopped, its GPUs go back to the pool and its meter stops.'
          : 'It leaves the queue. Waiting cost nothing.',
      no: 'Keep it',
      yes: 'Cancel job',
      failed: 'Cannot cancel the job'
    });
  }

  function deleteFiles(job: IJob): Promise<void> {
    return afterYes(job, () => api.deleteFiles(job.id), {
      title: `Delete the files of “${job.name}”?`,
      body:
        'Its executed notebook, report, data, captured values, files and log are deleted for good, ' +
        'and it can no longer be collected or resubmitted. Its record and GPU-hours stay.',
      no: 'Keep them',
      yes: 'Delete files',
      failed: 'Cannot delete the files'
    });
  }

  /** Ask first; on yes, act on the job, say why if the server refused, and look again. */
  async function afterYes(
    job: IJob,
    act: () => Promise<unknown>,
    words: { title: string; body: string; no: string; yes: string; failed: string }
  ): Promise<void> {
    const result = await showDialog({
      title: words.title,
      body: words.body,
      buttons: [Dialog.cancelButton({ label: words.no }), Dialog.warnButton({ label: words.yes })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      await act();
    } catch (error) {
      void showErrorMessage(words.failed, errorText(error));
    }
    model.refresh();
    details.get(job.id)?.content.model.refresh();
  }

  async function changeJob(job: IJob): Promise<void> {
    if (await showChangeDialog(api, job, model.jobs)) {
      model.refresh();
      details.get(job.id)?.content.model.refresh();
    }
  }

  async function resubmit(job: IJob): Promise<void> {
    const submitted = await showSubmitDialog({
      api,
      source: { kind: 'job', job },
      parameters: jobParameters(job),
      jobs: model.jobs
    });
    if (submitted) {
      afterSubmit(submitted);
    }
  }

  if (palette) {
    for (const command of [CommandIDs.submitNotebook, CommandIDs.showJobs, CommandIDs.showMeter]) {
      palette.addItem({ command, category: CATEGORY });
    }
  }
}

/** The absolute URL of a path (with its query) under the e31 API root. */
function apiUrl(settings: ServerConnection.ISettings, path: string): string {
  const [route, query] = path.split('?', 2);
  return URLExt.join(settings.baseUrl, API_ROOT, route) + (query ? `?${query}` : '');
}

function remembered(): { team?: string; gpus?: string } {
  try {
    return JSON.parse(window.localStorage.getItem(REMEMBERED_KEY) ?? '{}');
  } catch {
    return {};
  }
}

function remember(value: { team: string; gpus: string }): void {
  try {
    window.localStorage.setItem(REMEMBERED_KEY, JSON.stringify(value));
  } catch {
    // no storage: the dialog starts from defaults next time
  }
}

export default plugin;
