/**
 * The user's jobs as the UI sees them, kept fresh by one poller.
 *
 * Views say when they are on screen with `watch()`. The model polls while a view watches or
 * while one of the user's jobs is queued or running (a job can end at any time and deserves a
 * notification), and never when the browser tab is hidden. With nothing watched and nothing
 * active, no timer runs at all; `refresh()` (after a submit, on return to the tab) and
 * `jobChanged()` (the server announced a change to a job, wherever it was made) start it again
 * when needed.
 *
 * The server answers with its newest jobs (one page); a job that was active is followed by id
 * after newer ones push it off that page, until it has ended.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { ApiError, E31Api, errorText } from './api';
import { EndingsTracker } from './endings';
import { formatCost, formatGpuHours, formatTime } from './format';
import { gpuHoursToday, liveGpuHours } from './meter';
import { IBackoff, Poller } from './poller';
import { IGpuInventory, IJob, JobState, isActive } from './types';

export type JobFilter = 'all' | 'active' | JobState;

export interface IJobsModelOptions {
  api: E31Api;
  /** Announces each job ending once; without it nothing is announced. */
  endings?: (user: string) => EndingsTracker;
  backoff?: IBackoff;
  clock?: () => number;
}

export interface IDisposableLike {
  dispose(): void;
}

/** The `$id` of the server's job events (e31_jupyter/server/events.py). */
export const JOB_EVENT_SCHEMA = 'https://e31-jupyter.org/events/job/v1';

/** The key of the owner of the job an event of the server's event bus is about (the
 * `events_key` the server gives that owner); null for any other event. */
export function jobEventOwnerKey(event: { schema_id: string; [key: string]: unknown }): string | null {
  return event.schema_id === JOB_EVENT_SCHEMA && typeof event.owner_key === 'string' ? event.owner_key : null;
}

export class JobsModel {
  constructor(options: IJobsModelOptions) {
    this.api = options.api;
    this._makeEndings = options.endings;
    this._clock = options.clock ?? Date.now;
    this._poller = new Poller({
      tick: () => this.tick(),
      wanted: () => this.wantsPolling,
      backoff: options.backoff
    });
  }

  readonly api: E31Api;

  /** Something the views show changed (jobs, pool, error). */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Jobs that ended since they were last announced, once each. */
  get ended(): ISignal<this, IJob[]> {
    return this._ended;
  }

  /** The caller's name as the server knows it (jobs' owner), once known. */
  get user(): string | null {
    return this._user;
  }

  get isAdmin(): boolean {
    return this._admin;
  }

  /** The caller's own jobs, newest first. */
  get jobs(): IJob[] {
    return this._jobs;
  }

  /** Every job the caller may see (an admin sees everyone's). */
  get visibleJobs(): IJob[] {
    return this._allJobs;
  }

  get pool(): IGpuInventory | null {
    return this._pool;
  }

  /** The last error, or null after a successful poll. */
  get error(): string | null {
    return this._error;
  }

  /** When the jobs were last fetched (ms). */
  get fetchedAt(): number {
    return this._fetchedAt;
  }

  get loaded(): boolean {
    return this._loaded;
  }

  get hasActive(): boolean {
    return this._jobs.some(isActive);
  }

  get isPolling(): boolean {
    return this._poller.isPolling;
  }

  get pollDelay(): number {
    return this._poller.delay;
  }

  get wantsPolling(): boolean {
    return this._pageVisible && (this._watchers > 0 || this.hasActive);
  }

  counts(): { running: number; queued: number } {
    let running = 0;
    let queued = 0;
    for (const job of this._jobs) {
      if (job.state === 'running') {
        running++;
      } else if (job.state === 'queued') {
        queued++;
      }
    }
    return { running, queued };
  }

  countsByFilter(jobs: IJob[] = this.shownJobs()): Record<JobFilter, number> {
    const counts: Record<string, number> = { all: jobs.length, active: 0 };
    for (const job of jobs) {
      counts[job.state] = (counts[job.state] ?? 0) + 1;
      if (isActive(job)) {
        counts.active++;
      }
    }
    return counts as Record<JobFilter, number>;
  }

  /** The jobs the panel lists: the caller's own, or everyone's for an admin who asks. */
  shownJobs(everyone = false): IJob[] {
    return everyone ? this._allJobs : this._jobs;
  }

  filter(filter: JobFilter, everyone = false): IJob[] {
    const jobs = this.shownJobs(everyone);
    if (filter === 'all') {
      return jobs;
    }
    if (filter === 'active') {
      return jobs.filter(isActive);
    }
    return jobs.filter(job => job.state === filter);
  }

  find(id: string): IJob | undefined {
    return this._allJobs.find(job => job.id === id);
  }

  /** GPU-hours the caller's jobs held since local midnight, ticking for running jobs. */
  gpuHoursToday(now: number = this._clock()): number {
    return gpuHoursToday(this._jobs, now);
  }

  /** The job's meter now, between polls. */
  liveGpuHours(job: IJob, now: number = this._clock()): number {
    return liveGpuHours(job, this._fetchedAt, now);
  }

  /**
   * A view is on screen: poll while it is. Returns a handle to call when it is hidden.
   * `wantsPool` asks for the GPU pool too.
   */
  watch(options: { pool?: boolean } = {}): IDisposableLike {
    this._watchers++;
    if (options.pool) {
      this._poolWatchers++;
    }
    let disposed = false;
    if (!this._loaded || (options.pool && !this._pool)) {
      this._poller.wake();
    } else {
      this._poller.resume();
    }
    return {
      dispose: () => {
        if (disposed) {
          return;
        }
        disposed = true;
        this._watchers--;
        if (options.pool) {
          this._poolWatchers--;
        }
      }
    };
  }

  /**
   * The server announced that a job was submitted, started, changed or ended, from this page
   * or anywhere else (a terminal, a console, another server): look again when it is a job the
   * views show (its owner's key is the caller's, or the caller is an admin), and follow it
   * while it is active.
   */
  jobChanged(ownerKey: string): void {
    if (!this._infoLoaded || this._admin || ownerKey === this._eventsKey) {
      this.refresh();
    }
  }

  /** The browser tab was hidden or shown again (document.visibilityState). */
  setPageVisible(visible: boolean): void {
    if (visible === this._pageVisible) {
      return;
    }
    this._pageVisible = visible;
    if (visible) {
      this.refresh(); // jobs may have ended meanwhile
    }
  }

  /** Poll now (e.g. after a submit or a cancel) and go on polling while wanted. */
  refresh(): void {
    this._poller.wake();
  }

  /** One poll: fetch the jobs (and the pool when a view wants it). True when anything changed. */
  async tick(): Promise<boolean> {
    try {
      if (!this._infoLoaded) {
        const info = await this.api.info();
        this._infoLoaded = true;
        this._user = info.user ?? null;
        this._admin = !!info.admin;
        this._eventsKey = info.events_key ?? null;
        if (this._makeEndings) {
          this._endings = this._makeEndings(this._user ?? '');
        }
      }
      const [page, pool] = await Promise.all([
        this.api.jobs(),
        this._poolWatchers > 0 ? this.api.gpus() : Promise.resolve(this._pool)
      ]);
      const jobs = page.concat(await this.followed(page));
      this._fetchedAt = this._clock();
      const mine = this._user === null ? jobs : jobs.filter(j => j.owner === this._user);
      const signature = JSON.stringify([jobs.map(jobSignature), pool]);
      const changed = signature !== this._signature || this._error !== null || !this._loaded;
      this._signature = signature;
      this._allJobs = jobs;
      this._jobs = mine;
      this._pool = pool;
      this._error = null;
      this._loaded = true;
      // The meters of running jobs move on every poll; views redraw, the poller need not hurry.
      this._changed.emit();
      if (this._endings) {
        const ended = this._endings.takeNew(mine);
        if (ended.length) {
          this._ended.emit(ended);
        }
      }
      return changed;
    } catch (error) {
      const message =
        !this._infoLoaded && error instanceof ApiError && error.status === 404
          ? 'The e31 queue is not running on this Jupyter server: enable the e31_jupyter server extension.'
          : errorText(error);
      if (message !== this._error) {
        this._error = message;
        this._changed.emit();
      }
      throw error;
    }
  }

  /**
   * Jobs that were queued or running at the last poll but are no longer on the server's first
   * page (newer jobs pushed them off): asked for by id, so they are still counted while active
   * and their ending is announced.
   */
  private async followed(page: IJob[]): Promise<IJob[]> {
    const onPage = new Set(page.map(job => job.id));
    const ids = this._allJobs.filter(job => isActive(job) && !onPage.has(job.id)).map(job => job.id);
    return ids.length ? this.api.jobsById(ids) : [];
  }

  dispose(): void {
    this._poller.dispose();
    Signal.clearData(this);
  }

  private _jobs: IJob[] = [];
  private _allJobs: IJob[] = [];
  private _pool: IGpuInventory | null = null;
  private _infoLoaded = false;
  private _user: string | null = null;
  private _admin = false;
  private _eventsKey: string | null = null;
  private _error: string | null = null;
  private _fetchedAt = 0;
  private _loaded = false;
  private _signature = '';
  private _watchers = 0;
  private _poolWatchers = 0;
  private _pageVisible = true;
  private _endings: EndingsTracker | null = null;
  private readonly _makeEndings?: (user: string) => EndingsTracker;
  private readonly _clock: () => number;
  private readonly _poller: Poller;
  private readonly _changed = new Signal<this, void>(this);
  private readonly _ended = new Signal<this, IJob[]>(this);
}

/** What counts as a change worth polling again soon: not the meter, which always moves. */
function jobSignature(job: IJob): unknown[] {
  return [
    job.id,
    job.state,
    job.reason,
    job.queue_position,
    job.progress.cells_done,
    job.progress.cells_total,
    job.gpus
  ];
}

/** The panel's list in the order of the queue: what runs, what waits in line, what ended. */
export interface IJobSections {
  /** Running, the longest running first. */
  running: IJob[];
  /** Queued in line order (#1 first); those with no place yet (waiting for other jobs) after. */
  queued: IJob[];
  /** Ended (or suspended), the newest finished first. */
  ended: IJob[];
}

export function jobSections(jobs: IJob[]): IJobSections {
  return {
    running: jobs.filter(job => job.state === 'running').sort(byStart),
    queued: jobs.filter(job => job.state === 'queued').sort(byPlaceInLine),
    ended: jobs.filter(job => !isActive(job)).sort(byNewestFinish)
  };
}

/** The sections one after the other: the list's order as a flat list. */
export function inQueueOrder(jobs: IJob[]): IJob[] {
  const { running, queued, ended } = jobSections(jobs);
  return [...running, ...queued, ...ended];
}

/**
 * When a queued job is expected to start, as a local clock time: "~10:42" ("~Tue 10:42" on another
 * day); "~now" once that time has come; null when the forecast does not tell.
 */
export function expectedStartClock(job: IJob, now: Date = new Date()): string | null {
  if (job.state !== 'queued' || !job.expected_start) {
    return null;
  }
  const start = Date.parse(job.expected_start);
  if (Number.isNaN(start)) {
    return null;
  }
  return start <= now.getTime() ? '~now' : `~${formatTime(job.expected_start, now)}`;
}

/** Why an ended job did not succeed (its reason); null for a success, or when none is known. */
export function failureReason(job: IJob): string | null {
  return job.state === 'succeeded' || isActive(job) ? null : job.reason || null;
}

/** What a job cost: its price where the queue charges one ("1.20 USD"), else its GPU-hours. */
export function costWords(job: IJob): string {
  return formatCost(job.meter.cost, job.meter.currency) || formatGpuHours(job.meter.gpu_hours);
}

/**
 * Where an ended job's results are: its executed notebook once it ran and its files are kept,
 * else its page (which says why there is none).
 */
export function resultsPlace(job: IJob): 'notebook' | 'page' {
  return job.started_at && !job.files_deleted ? 'notebook' : 'page';
}

function byStart(a: IJob, b: IJob): number {
  return timeOf(a.started_at) - timeOf(b.started_at) || timeOf(a.submitted_at) - timeOf(b.submitted_at);
}

function byPlaceInLine(a: IJob, b: IJob): number {
  const place = (job: IJob) => job.queue_position ?? Number.MAX_SAFE_INTEGER;
  return place(a) - place(b) || timeOf(a.submitted_at) - timeOf(b.submitted_at);
}

function byNewestFinish(a: IJob, b: IJob): number {
  const finish = (job: IJob) => timeOf(job.finished_at ?? job.started_at ?? job.submitted_at);
  return finish(b) - finish(a);
}

/** Epoch ms of a timestamp; 0 for none. */
function timeOf(iso: string | null | undefined): number {
  const t = iso ? Date.parse(iso) : NaN;
  return Number.isNaN(t) ? 0 : t;
}
