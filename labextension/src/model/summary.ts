/**
 * What the user is told when jobs end: one notice for a single ending, one summary for several
 * ("While you were away, 6 jobs ended: 5 succeeded, 1 failed."), so that notifications never
 * pile up over a notebook. Successes close on their own; what needs the user stays.
 */

import { endingNotice } from './format';
import { IJob, JobState } from './types';

export type NoticeType = 'success' | 'error' | 'warning' | 'info';

/** How long a notice that needs nothing from the user stays on screen. */
export const SUCCESS_CLOSE_MS = 8000;

/** At most this many failed jobs are named in a summary. */
export const NAMED_FAILURES = 3;

/** The states an ending is counted under, in the order a summary names them. */
const SUMMARY_ORDER: JobState[] = ['succeeded', 'failed', 'expired', 'suspended', 'cancelled'];

/** Endings that ask something of the user: a look at why, or a resume. */
const NEEDS_USER: ReadonlySet<JobState> = new Set<JobState>(['failed', 'expired', 'suspended']);

export interface IEndingNotice {
  kind: 'single' | 'summary';
  message: string;
  type: NoticeType;
  /** Milliseconds before it closes by itself, or false when it stays until dismissed. */
  autoClose: number | false;
  /** The endings it tells of. */
  jobs: IJob[];
  /** The job a summary's action opens: its only failure, if it has exactly one. */
  openJob: IJob | null;
}

/**
 * The notices for a batch of endings: nothing for cancellations alone (the user did it), one
 * notice for one ending, one summary for several. `away`: the batch is what happened while the
 * page was closed or hidden.
 */
export function planEndingNotices(jobs: IJob[], away: boolean): IEndingNotice[] {
  const told = jobs.filter(job => endingNotice(job) !== null);
  if (told.length === 0) {
    return [];
  }
  if (told.length === 1) {
    return [singleNotice(told[0])];
  }
  return [summaryNotice(jobs, away)];
}

function singleNotice(job: IJob): IEndingNotice {
  const { message, type } = endingNotice(job)!;
  return { kind: 'single', message, type, autoClose: autoCloseFor([job]), jobs: [job], openJob: null };
}

function summaryNotice(jobs: IJob[], away: boolean): IEndingNotice {
  const failed = jobs.filter(job => job.state === 'failed');
  return {
    kind: 'summary',
    message: summaryText(jobs, away),
    type: summaryType(jobs),
    autoClose: autoCloseFor(jobs),
    jobs,
    openJob: failed.length === 1 ? failed[0] : null
  };
}

/** "While you were away, 6 jobs ended: 5 succeeded, 1 failed (“train”)." */
export function summaryText(jobs: IJob[], away: boolean): string {
  const counts = countEndings(jobs);
  const parts = SUMMARY_ORDER.filter(state => counts[state]).map(state =>
    state === 'failed' ? `${counts[state]} failed (${failedNames(jobs)})` : `${counts[state]} ${state}`
  );
  const ended = `${jobs.length} job${jobs.length === 1 ? '' : 's'} ended: ${parts.join(', ')}.`;
  return away ? `While you were away, ${ended}` : ended[0].toUpperCase() + ended.slice(1);
}

/** How many of the jobs ended in each state. */
export function countEndings(jobs: IJob[]): Partial<Record<JobState, number>> {
  const counts: Partial<Record<JobState, number>> = {};
  for (const job of jobs) {
    counts[job.state] = (counts[job.state] ?? 0) + 1;
  }
  return counts;
}

function failedNames(jobs: IJob[]): string {
  return quotedNames(jobs.filter(job => job.state === 'failed'));
}

/** “a”, “b”, “c” and 2 more: the jobs' names, at most `max` of them. */
export function quotedNames(jobs: IJob[], max: number = NAMED_FAILURES): string {
  const names = jobs.map(job => `“${job.name}”`);
  const shown = names.slice(0, max).join(', ');
  return names.length > max ? `${shown} and ${names.length - max} more` : shown;
}

/** The summary takes the colour of its worst ending. */
export function summaryType(jobs: IJob[]): NoticeType {
  const states = new Set(jobs.map(job => job.state));
  if (states.has('failed')) {
    return 'error';
  }
  if (states.has('expired')) {
    return 'warning';
  }
  return states.has('suspended') ? 'info' : 'success';
}

/** Successes close on their own; a notice telling of anything that needs the user stays. */
export function autoCloseFor(jobs: IJob[]): number | false {
  return jobs.some(job => NEEDS_USER.has(job.state)) ? false : SUCCESS_CLOSE_MS;
}

/**
 * Whether the endings a poll finds are what happened while the user was away: the first look
 * after the page opened, or after its tab was shown again.
 */
export class AwayTracker {
  /** The page's tab was hidden: the next look finds what ended meanwhile. */
  left(): void {
    this._looks = 0;
  }

  /** A poll answered (at `fetchedAt`, ms): called for each change of the jobs model. */
  looked(fetchedAt: number): void {
    if (fetchedAt !== this._lastFetch) {
      this._lastFetch = fetchedAt;
      this._looks++;
    }
  }

  /** Whether the endings found now come from the first look since the user came back. */
  get away(): boolean {
    return this._looks <= 1;
  }

  private _looks = 0;
  private _lastFetch: number | null = null;
}
