/** What the panel and a job's detail view can do to a job: cancel, suspend, delete files, change, resubmit, resume. */

import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';

import { errorText } from '../model/api';
import { jobParameters } from '../model/form';
import { IJob, isResumable } from '../model/types';
import { showChangeDialog } from '../widgets/change';
import { showSubmitDialog } from '../widgets/submitform';
import { IE31Context, IPluginContext } from './context';
import { afterSubmit } from './submit';

export function cancelJob(ctx: IE31Context, job: IJob): Promise<void> {
  return afterYes(ctx, job, () => ctx.api.cancel(job.id), {
    title: `Cancel “${job.name}”?`,
    body:
      job.state === 'running'
        ? 'Its processes are stopped, its GPUs go back to the pool and its meter stops.'
        : job.state === 'suspended'
          ? 'It will not be resumed. It holds no GPUs; its files stay.'
          : 'It leaves the queue. Waiting cost nothing.',
    no: 'Keep it',
    yes: 'Cancel job',
    failed: 'Cannot cancel the job'
  });
}

/** Stop a running job at its cell's end, with a checkpoint, its GPUs given back; resumed later. */
export function suspendJob(ctx: IE31Context, job: IJob): Promise<void> {
  return afterYes(ctx, job, () => ctx.api.suspend(job.id), {
    title: `Suspend “${job.name}”?`,
    body: 'The job finishes its running cell, saves a checkpoint and gives its GPUs back; resume it later.',
    no: 'Keep it running',
    yes: 'Suspend job',
    failed: 'Cannot suspend the job'
  });
}

export function deleteFiles(ctx: IE31Context, job: IJob): Promise<void> {
  return afterYes(ctx, job, () => ctx.api.deleteFiles(job.id), {
    title: `Delete the files of “${job.name}”?`,
    body:
      'Its executed notebook, report, data, captured values, files and log are deleted for good, ' +
      `and it can no longer be collected${isResumable(job) ? ', resumed' : ''} or resubmitted. ` +
      'Its record and GPU-hours stay.',
    no: 'Keep them',
    yes: 'Delete files',
    failed: 'Cannot delete the files'
  });
}

/** Ask first; on yes, act on the job, say why if the server refused, and look again. */
async function afterYes(
  ctx: IE31Context,
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
  await actThenRefresh(ctx, job, act, words.failed);
}

/** Act on the job, say why if the server refused (`failed`: the title), and look again. */
async function actThenRefresh(ctx: IE31Context, job: IJob, act: () => Promise<unknown>, failed: string): Promise<void> {
  try {
    await act();
  } catch (error) {
    void showErrorMessage(failed, errorText(error));
  }
  refreshJob(ctx, job);
}

/** The jobs whose resume is on its way. */
const resuming = new Set<string>();

/**
 * Put a failed or suspended job back in line from its last checkpoint, with its request as it was; nothing
 * to confirm: it only continues what it was doing. A second press while the first is on its way
 * sends nothing.
 */
export async function resumeJob(ctx: IE31Context, job: IJob): Promise<void> {
  if (resuming.has(job.id)) {
    return;
  }
  resuming.add(job.id);
  try {
    await actThenRefresh(ctx, job, () => ctx.api.resume(job.id), 'Cannot resume the job');
  } finally {
    resuming.delete(job.id);
  }
}

export async function changeJob(ctx: IE31Context, job: IJob): Promise<void> {
  if (await showChangeDialog(ctx.api, job, ctx.model.jobs)) {
    refreshJob(ctx, job);
  }
}

export async function resubmit(ctx: IPluginContext, job: IJob): Promise<void> {
  const submitted = await showSubmitDialog({
    api: ctx.api,
    source: { kind: 'job', job },
    parameters: jobParameters(job),
    jobs: ctx.model.jobs
  });
  if (submitted) {
    afterSubmit(ctx, submitted);
  }
}

/** Look again at the jobs, and at the job's detail view if it is open. */
function refreshJob({ model, details }: IE31Context, job: IJob): void {
  model.refresh();
  details.get(job.id)?.content.model.refresh();
}
