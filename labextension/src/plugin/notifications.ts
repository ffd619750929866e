/** Notifications: a job of the user's ended, or was just submitted. */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';

import { endingNotice } from '../model/format';
import { IJob } from '../model/types';
import { CommandIDs } from './commandids';
import { IE31Context } from './context';

type Commands = JupyterFrontEnd['commands'];

export function notifyEndings({ app, model }: IE31Context): void {
  model.ended.connect((_, jobs) => jobs.forEach(job => notifyEnded(app.commands, job)));
}

function notifyEnded(commands: Commands, job: IJob): void {
  const notice = endingNotice(job);
  if (notice) {
    Notification.emit(notice.message, notice.type, { autoClose: false, actions: endedActions(commands, job) });
  }
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
