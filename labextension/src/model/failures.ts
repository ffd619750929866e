/**
 * Failed jobs the user has not looked at yet, for the status bar ("0 running · 0 queued · 1 failed").
 *
 * A failure counts from the moment its ending is announced (so not last month's failures on a
 * browser's first visit: see endings.ts) until the user looks at it:
 * - opening the jobs panel (or having it on screen) looks at every failure;
 * - opening a failed job's page or its executed notebook looks at that one;
 * - a failed job that is resumed is no longer failed, and counts again only if it fails again.
 * The record lives in the browser's storage (localStorage), keyed by server and user, so that
 * every tab shows the same count and it survives a reload.
 */

import { IStorage, finishedMs } from './endings';
import { quotedNames } from './summary';
import { IJob } from './types';

interface IRecord {
  version: 1;
  /** Failed job id -> its finish time (ms), not yet looked at. */
  unseen: Record<string, number>;
}

/** A failure not looked at for this long stops counting. */
export const FORGET_MS = 14 * 86400 * 1000;

export class UnseenFailures {
  /** `key`: the storage key, asked for each time (it names the user, known after the first poll). */
  constructor(
    private readonly storage: IStorage,
    private readonly key: () => string
  ) {}

  /** Endings were announced: the failures among them count until looked at. */
  add(jobs: IJob[]): void {
    const failed = jobs.filter(job => job.state === 'failed');
    if (!failed.length) {
      return;
    }
    const unseen = this.read();
    for (const job of failed) {
      unseen[job.id] = finishedMs(job);
    }
    this.write(forgetOld(unseen));
  }

  /** The user looked at these jobs (their page, their executed notebook). */
  see(ids: string[]): void {
    const unseen = this.read();
    const known = ids.filter(id => id in unseen);
    if (known.length) {
      known.forEach(id => delete unseen[id]);
      this.write(unseen);
    }
  }

  /** The user looked at the jobs list: every failure is seen. */
  seeAll(): void {
    if (Object.keys(this.read()).length) {
      this.write({});
    }
  }

  /** The failed jobs among `jobs` not looked at yet. */
  among(jobs: IJob[]): IJob[] {
    const unseen = this.read();
    return jobs.filter(job => job.state === 'failed' && job.id in unseen);
  }

  /** Whether a storage change (another tab's) is about this record. */
  isKey(key: string | null): boolean {
    return key === this.key();
  }

  private read(): Record<string, number> {
    try {
      const record = JSON.parse(this.storage.getItem(this.key()) ?? 'null');
      if (record && record.version === 1 && typeof record.unseen === 'object' && record.unseen) {
        return (record as IRecord).unseen;
      }
    } catch {
      // storage disabled, or a damaged record: nothing unseen
    }
    return {};
  }

  private write(unseen: Record<string, number>): void {
    try {
      this.storage.setItem(this.key(), JSON.stringify({ version: 1, unseen } satisfies IRecord));
    } catch {
      // storage full or disabled: the count lasts until a reload
    }
  }
}

/** Drop failures that ended long before the newest one: the record stays small. */
function forgetOld(unseen: Record<string, number>): Record<string, number> {
  const newest = Math.max(...Object.values(unseen));
  return Object.fromEntries(Object.entries(unseen).filter(([, t]) => t >= newest - FORGET_MS));
}

/** The storage key for a server (its base URL) and a user. */
export function failuresKey(baseUrl: string, user: string): string {
  return `e31-jupyter:unseen-failures:${baseUrl}:${user}`;
}

/** The status bar's words on hover. */
export function statusTooltip(counts: { running: number; queued: number }, failed: IJob[], hoursToday: string): string {
  const lines = [`GPU jobs: ${counts.running} running, ${counts.queued} queued; ${hoursToday} today.`];
  if (failed.length) {
    lines.push(`${failed.length} failed, not looked at yet: ${quotedNames(failed)}.`);
  }
  lines.push('Click to open the jobs panel.');
  return lines.join('\n');
}
