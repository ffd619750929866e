/**
 * Which job endings still need a notification: one per ending (a resumed job can end again),
 * across reloads and tabs.
 *
 * The record lives in the browser's storage (localStorage), keyed by server and user:
 * - the first time a browser sees a server, every job that has already ended counts as seen
 *   (nobody wants forty notifications for last month's jobs);
 * - afterwards a job that is in a final state and not yet seen is new, including jobs that
 *   ended while the browser was closed: they are announced once on return;
 * - the record is read again right before it is updated, so two tabs do not both announce.
 * Seen jobs that ended long before the newest ending are folded into a cut-off time, so the
 * record stays small however many jobs a user runs.
 */

import { IJob, isFinal } from './types';

export interface IStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

interface IRecord {
  version: 1;
  /** Jobs that finished before this time (server clock, ms) count as seen. */
  cutoff: number | null;
  /** Seen job id -> its finish time (ms). */
  seen: Record<string, number>;
}

/** How long a seen id is remembered before the cut-off takes over. */
export const REMEMBER_MS = 14 * 86400 * 1000;

export class EndingsTracker {
  constructor(
    private readonly storage: IStorage,
    readonly key: string
  ) {}

  /**
   * The jobs among `jobs` whose ending has not been announced yet; they are recorded as
   * announced. The first call for a key announces nothing and records every ended job.
   */
  takeNew(jobs: IJob[]): IJob[] {
    const ended = jobs.filter(isFinal);
    const record = this.read();
    if (record === null) {
      const seen: Record<string, number> = {};
      for (const job of ended) {
        seen[job.id] = finishedMs(job);
      }
      this.write(prune({ version: 1, cutoff: null, seen }));
      return [];
    }
    // A job seen to end may end again later: resumed, it went back in line.
    const fresh = ended.filter(
      job =>
        !(job.id in record.seen && record.seen[job.id] >= finishedMs(job)) &&
        (record.cutoff === null || finishedMs(job) >= record.cutoff)
    );
    if (fresh.length) {
      for (const job of fresh) {
        record.seen[job.id] = finishedMs(job);
      }
      this.write(prune(record));
    }
    return fresh;
  }

  /** Whether this browser has seen the server before (an announcement record exists). */
  get hasRecord(): boolean {
    return this.read() !== null;
  }

  private read(): IRecord | null {
    let text: string | null = null;
    try {
      text = this.storage.getItem(this.key);
    } catch {
      return null;
    }
    if (!text) {
      return null;
    }
    try {
      const record = JSON.parse(text);
      if (record && record.version === 1 && typeof record.seen === 'object') {
        return record as IRecord;
      }
    } catch {
      // a damaged record: start again (announce nothing old)
    }
    return null;
  }

  private write(record: IRecord): void {
    try {
      this.storage.setItem(this.key, JSON.stringify(record));
    } catch {
      // storage full or disabled: notifications may repeat after a reload, nothing worse
    }
  }
}

/** When the job finished (ms, server clock); 0 when not known. */
export function finishedMs(job: IJob): number {
  const t = job.finished_at ? Date.parse(job.finished_at) : NaN;
  return Number.isNaN(t) ? 0 : t;
}

/** Fold ids of jobs that ended long before the newest ending into the cut-off. */
function prune(record: IRecord): IRecord {
  const times = Object.values(record.seen);
  if (!times.length) {
    return record;
  }
  const newest = Math.max(...times);
  const cutoff = newest - REMEMBER_MS;
  if (Object.values(record.seen).every(t => t >= cutoff)) {
    return record;
  }
  const seen: Record<string, number> = {};
  for (const [id, t] of Object.entries(record.seen)) {
    if (t >= cutoff) {
      seen[id] = t;
    }
  }
  return {
    version: 1,
    cutoff: Math.max(record.cutoff ?? cutoff, cutoff),
    seen
  };
}

/** The storage key for a server (its base URL) and a user. */
export function endingsKey(baseUrl: string, user: string): string {
  return `e31-jupyter:announced-endings:${baseUrl}:${user}`;
}
