/**
 * The jobs table in the main area: its columns' sort order, which jobs a bulk action applies to,
 * and what a bulk action did, job by job.
 */

import { errorText } from './api';
import { STATE_LABELS } from './format';
import { inQueueOrder } from './jobs';
import { IJob, isCancellable, isFinal } from './types';

export type SortKey = 'name' | 'state' | 'position' | 'gpus' | 'time' | 'meter' | 'cost';

export type SortDirection = 'ascending' | 'descending';

/** How the table is sorted; null: in the queue's order (running, queued in line, ended). */
export type TableSort = { key: SortKey; direction: SortDirection } | null;

/** A click on a column's header: sort by it ascending, or turn its direction round. */
export function nextSort(sort: TableSort, key: SortKey): TableSort {
  if (sort?.key === key) {
    return { key, direction: sort.direction === 'ascending' ? 'descending' : 'ascending' };
  }
  return { key, direction: 'ascending' };
}

/** A column's `aria-sort`. */
export function ariaSort(sort: TableSort, key: SortKey): 'ascending' | 'descending' | 'none' {
  return sort?.key === key ? sort.direction : 'none';
}

/** GPUs a job holds (once granted) or asks for. */
export function jobGpus(job: IJob): number {
  return job.gpus.length || job.request.gpus;
}

type SortValue = string | number | null;

/** What each column sorts by; null (no value) sorts last either way. `meter` gives the live GPU-hours. */
function sortValue(job: IJob, key: SortKey, meter: (job: IJob) => number): SortValue {
  switch (key) {
    case 'name':
      return job.name.toLowerCase();
    case 'state':
      return STATE_LABELS[job.state];
    case 'position':
      return job.queue_position;
    case 'gpus':
      return jobGpus(job);
    case 'time':
      return job.started_at ? Date.parse(job.started_at) : null;
    case 'meter':
      return meter(job);
    case 'cost':
      return job.meter.cost;
  }
}

function compareValues(a: SortValue, b: SortValue): number {
  if (typeof a === 'string' && typeof b === 'string') {
    return a.localeCompare(b);
  }
  return (a as number) - (b as number);
}

/** The jobs in the table's order; ties keep the queue's order. */
export function sortJobs(jobs: IJob[], sort: TableSort, meter: (job: IJob) => number = j => j.meter.gpu_hours): IJob[] {
  const ordered = inQueueOrder(jobs);
  if (!sort) {
    return ordered;
  }
  const sign = sort.direction === 'ascending' ? 1 : -1;
  const rank = new Map(ordered.map((job, i) => [job.id, i]));
  const value = new Map(ordered.map(job => [job.id, sortValue(job, sort.key, meter)]));
  return ordered.sort((x, y) => {
    const a = value.get(x.id) ?? null;
    const b = value.get(y.id) ?? null;
    if (a === null || b === null) {
      return a === b ? rank.get(x.id)! - rank.get(y.id)! : a === null ? 1 : -1;
    }
    return sign * compareValues(a, b) || rank.get(x.id)! - rank.get(y.id)!;
  });
}

export type BulkAction = 'cancel' | 'deleteFiles' | 'collect';

export const BULK_LABELS: Record<BulkAction, string> = {
  cancel: 'Cancel',
  deleteFiles: 'Delete files',
  collect: 'Collect'
};

/** Why the action does not apply to the job; null when it does. */
export function whyNot(action: BulkAction, job: IJob): string | null {
  switch (action) {
    case 'cancel':
      return isCancellable(job) ? null : `already ${STATE_LABELS[job.state].toLowerCase()}`;
    case 'deleteFiles':
      return !isFinal(job)
        ? `still ${STATE_LABELS[job.state].toLowerCase()}`
        : job.files_deleted
          ? 'files already deleted'
          : null;
    case 'collect':
      return job.state !== 'succeeded'
        ? `${STATE_LABELS[job.state].toLowerCase()}, not succeeded`
        : job.files_deleted
          ? 'its files were deleted'
          : null;
  }
}

/** The selected jobs the action applies to. */
export function applicable(action: BulkAction, jobs: IJob[]): IJob[] {
  return jobs.filter(job => whyNot(action, job) === null);
}

/** What a bulk action did to one job: done, or not, with why. */
export interface IBulkOutcome {
  job: IJob;
  done: boolean;
  /** Why not (not applicable, or the server's answer); empty when done. */
  why: string;
}

export interface IBulkReport {
  action: BulkAction;
  outcomes: IBulkOutcome[];
}

/**
 * Run the action on each selected job it applies to (all at once), and say job by job what came
 * of it; the others are reported with why they were left alone.
 */
export async function runBulk(
  action: BulkAction,
  jobs: IJob[],
  act: (job: IJob) => Promise<unknown>
): Promise<IBulkReport> {
  const outcomes = await Promise.all(jobs.map(job => outcomeOf(action, job, act)));
  return { action, outcomes };
}

async function outcomeOf(action: BulkAction, job: IJob, act: (job: IJob) => Promise<unknown>): Promise<IBulkOutcome> {
  const why = whyNot(action, job);
  if (why !== null) {
    return { job, done: false, why };
  }
  try {
    await act(job);
    return { job, done: true, why: '' };
  } catch (error) {
    return { job, done: false, why: errorText(error) };
  }
}

const DONE_WORDS: Record<BulkAction, string> = {
  cancel: 'Cancelled',
  deleteFiles: 'Deleted the files of',
  collect: 'Opened the results of'
};

const NOT_DONE_WORDS: Record<BulkAction, string> = {
  cancel: 'Not cancelled',
  deleteFiles: 'Files not deleted',
  collect: 'Not collected'
};

/** The report in a sentence or two: "Cancelled 2 jobs. Not cancelled: “a” (already succeeded)." */
export function bulkSummary(report: IBulkReport): string {
  const done = report.outcomes.filter(o => o.done);
  const notDone = report.outcomes.filter(o => !o.done);
  const parts: string[] = [];
  if (done.length) {
    parts.push(`${DONE_WORDS[report.action]} ${jobCount(done.length)}.`);
  }
  if (notDone.length) {
    const list = notDone.map(o => `“${o.job.name}” (${o.why})`).join(', ');
    parts.push(`${NOT_DONE_WORDS[report.action]}: ${list}.`);
  }
  return parts.join(' ') || 'No job selected.';
}

function jobCount(n: number): string {
  return `${n} job${n === 1 ? '' : 's'}`;
}
