/**
 * Notifications: a job of the user's ended, or was just submitted.
 *
 * Several endings found at once (the page opened, or its tab came back, the morning after) make
 * one summary, not a pile; a single ending keeps its own notice. Successes close on their own,
 * failures stay (src/model/summary.ts decides).
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';

import { AwayTracker, IEndingNotice, planEndingNotices } from '../model/summary';
import { IJob } from '../model/types';
import { CommandIDs } from './commandids';
import { IE31Context } from './context';

type Commands = JupyterFrontEnd['commands'];

export function notifyEndings({ app, model }: IE31Context): void {
  const away = new AwayTracker();
  document.addEventListener('visibilitychange', () => document.visibilityState === 'hidden' && away.left());
  model.changed.connect(() => away.looked(model.fetchedAt));
  model.ended.connect((_, jobs) => {
    for (const notice of planEndingNotices(jobs, away.away)) {
      notify(app.commands, notice);
    }
  });
}

function notify(commands: Commands, notice: IEndingNotice): void {
  const actions = notice.kind === 'summary' ? summaryActions(commands, notice) : endedActions(commands, notice.jobs[0]);
  Notification.emit(notice.message, notice.type, { autoClose: notice.autoClose, actions });
}

function summaryActions(commands: Commands, notice: IEndingNotice): Notification.IAction[] {
  const actions: Notification.IAction[] = [
    {
      label: 'Show jobs',
      caption: 'Open the GPU jobs panel',
      displayType: 'accent',
      callback: () => void commands.execute(CommandIDs.showJobs)
    }
  ];
  const failed = notice.openJob;
  if (failed) {
    actions.push({
      label: `Open “${failed.name}”`,
      caption: 'Show the failed job: request, timeline, log and files',
      callback: () => void commands.execute(CommandIDs.openJob, { id: failed.id })
    });
  }
  return actions;
}

function endedActions(commands: Commands, job: IJob): Notification.IAction[] {
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
  return actions;
}

export function notifySubmitted(job: IJob & { warnings?: string[] }): void {
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
