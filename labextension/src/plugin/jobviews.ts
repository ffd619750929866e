/** The commands that open a job in the main area: its detail view, executed notebook and HTML report. */

import { IFrame, MainAreaWidget, showErrorMessage } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IDocumentWidget } from '@jupyterlab/docregistry';

import { executedNotebookPath } from '../drive';
import { gpuJobsIcon } from '../icons';
import { errorText } from '../model/api';
import { JobDetailModel } from '../model/detail';
import { IJob } from '../model/types';
import { JobDetailView } from '../widgets/detail';
import { CommandIDs } from './commandids';
import { IPluginContext } from './context';
import { cancelJob, changeJob, deleteFiles, resubmit, resumeJob, suspendJob } from './jobactions';

export function addJobCommands(ctx: IPluginContext, docManager: IDocumentManager): void {
  addOpenJobCommand(ctx);
  addOpenResultsCommand(ctx, docManager);
  addOpenReportCommand(ctx);
}

function addOpenJobCommand(ctx: IPluginContext): void {
  const { shell } = ctx.app;
  ctx.app.commands.addCommand(CommandIDs.openJob, {
    label: 'Show GPU Job',
    execute: args => {
      const id = String(args.id);
      let widget = ctx.details.get(id);
      if (!widget || widget.isDisposed) {
        widget = jobDetailWidget(ctx, id);
        shell.add(widget, 'main');
      }
      shell.activateById(widget.id);
    }
  });
}

/** A new detail view of the job, listed in ctx.details while it is open. */
function jobDetailWidget(ctx: IPluginContext, id: string): MainAreaWidget<JobDetailView> {
  const { commands } = ctx.app;
  const known = ctx.model.find(id);
  const content = new JobDetailView(new JobDetailModel(ctx.api, id), {
    cancel: job => void cancelJob(ctx, job),
    suspend: job => void suspendJob(ctx, job),
    deleteFiles: job => void deleteFiles(ctx, job),
    change: job => void changeJob(ctx, job),
    resubmit: job => void resubmit(ctx, job),
    resume: job => void resumeJob(ctx, job),
    openNotebook: job => void commands.execute(CommandIDs.openResults, { id: job.id }),
    openReport: job => void commands.execute(CommandIDs.openReport, { id: job.id })
  });
  const widget = new MainAreaWidget({ content });
  widget.id = `e31-job-${id}`;
  widget.title.label = `Job: ${known?.name ?? id}`;
  widget.title.icon = gpuJobsIcon;
  widget.title.closable = true;
  widget.disposed.connect(() => ctx.details.delete(id));
  ctx.details.set(id, widget);
  followJobsList(ctx, widget);
  return widget;
}

/**
 * A job the view saw end can go back in line (resumed elsewhere: a terminal, another tab): when
 * the jobs list shows it in another state than the view does, the view looks again.
 */
function followJobsList({ model }: IPluginContext, widget: MainAreaWidget<JobDetailView>): void {
  const detail = widget.content.model;
  const follow = () => {
    const listed = model.find(detail.id);
    if (listed && detail.job && listed.state !== detail.job.state) {
      detail.refresh();
    }
  };
  model.changed.connect(follow);
  widget.disposed.connect(() => model.changed.disconnect(follow));
}

function addOpenResultsCommand(ctx: IPluginContext, docManager: IDocumentManager): void {
  ctx.app.commands.addCommand(CommandIDs.openResults, {
    label: 'Open Executed Notebook of GPU Job',
    execute: async args => {
      const id = String(args.id);
      try {
        const job = ctx.model.find(id) ?? (await ctx.api.job(id));
        await openResults(docManager, job, id);
      } catch (error) {
        void showErrorMessage('Cannot open the executed notebook', errorText(error));
      }
    }
  });
}

/** Open (or reveal) the job's executed notebook, as a result to read: no kernel, which could only run it again here. */
async function openResults(docManager: IDocumentManager, job: IJob, id: string): Promise<void> {
  const path = executedNotebookPath(id, job.work?.notebook ?? '');
  const already = docManager.findWidget(path);
  const widget = docManager.openOrReveal(path, 'Notebook') as IDocumentWidget | undefined;
  if (!widget || already) {
    return;
  }
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

function addOpenReportCommand(ctx: IPluginContext): void {
  const { shell } = ctx.app;
  ctx.app.commands.addCommand(CommandIDs.openReport, {
    label: 'Open HTML Report of GPU Job',
    execute: async args => {
      const id = String(args.id);
      const widgetId = `e31-report-${id}`;
      const existing = Array.from(shell.widgets('main')).find(w => w.id === widgetId);
      if (!existing) {
        const job = ctx.model.find(id) ?? (await ctx.api.job(id));
        shell.add(reportWidget(ctx, id, job.name), 'main');
      }
      shell.activateById(widgetId);
    }
  });
}

/** The job's HTML report is the job's own content: a sandboxed frame, with no access to JupyterLab. */
function reportWidget(ctx: IPluginContext, id: string, name: string): MainAreaWidget<IFrame> {
  const content = new IFrame({ sandbox: ['allow-scripts', 'allow-popups'] });
  content.url = ctx.api.reportUrl(id);
  const widget = new MainAreaWidget({ content });
  widget.id = `e31-report-${id}`;
  widget.title.label = `Report: ${name}`;
  widget.title.icon = gpuJobsIcon;
  widget.title.closable = true;
  widget.addClass('e31-Report');
  return widget;
}
