/**
 * One job in detail: its record with the state history, the tail of its log and the files (and,
 * for a cell's job, the values) it handed back. Polls while the view is on screen and the job has
 * not ended; once it has ended one last fetch picks up its final log, files and values, then
 * nothing runs.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { E31Api, errorText } from './api';
import { IBackoff, Poller } from './poller';
import { IFileEntry, IJobDetail, IValueEntry, isFinal } from './types';

export const LOG_TAIL_LINES = 60;

export class JobDetailModel {
  constructor(
    readonly api: E31Api,
    readonly id: string,
    backoff?: IBackoff
  ) {
    this._poller = new Poller({
      tick: () => this.tick(),
      wanted: () => this._visible && (this._job === null || !isFinal(this._job)),
      backoff
    });
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get job(): IJobDetail | null {
    return this._job;
  }

  get log(): string {
    return this._log;
  }

  get files(): IFileEntry[] {
    return this._files;
  }

  get values(): IValueEntry[] {
    return this._values;
  }

  get error(): string | null {
    return this._error;
  }

  get fetchedAt(): number {
    return this._fetchedAt;
  }

  get isPolling(): boolean {
    return this._poller.isPolling;
  }

  /** The view was shown or hidden. */
  setVisible(visible: boolean): void {
    this._visible = visible;
    if (visible) {
      this._poller.wake();
    }
  }

  refresh(): void {
    this._poller.wake();
  }

  async tick(): Promise<boolean> {
    try {
      const job = await this.api.job(this.id);
      const [log, files, values] = job.files_deleted
        ? ['', [], []] // nothing left to ask for: the record says so
        : await this.fetchFiles(job);
      const signature = JSON.stringify([
        job.state,
        job.reason,
        job.queue_position,
        job.progress,
        job.transitions.length,
        job.files_deleted,
        job.last_checkpoint,
        log,
        files,
        values
      ]);
      const changed = signature !== this._signature;
      this._signature = signature;
      this._job = job;
      this._log = log;
      this._files = files;
      this._values = values;
      this._error = null;
      this._fetchedAt = Date.now();
      this._changed.emit();
      return changed;
    } catch (error) {
      this._error = errorText(error);
      this._changed.emit();
      throw error;
    }
  }

  /** The log's tail, and once the job has ended the files and values it handed back. */
  private fetchFiles(job: IJobDetail): Promise<[string, IFileEntry[], IValueEntry[]]> {
    const ended = isFinal(job);
    return Promise.all([
      this.api.logTail(this.id, LOG_TAIL_LINES).then(
        chunk => chunk.text,
        () => this._log
      ),
      // Files are collected when the job ends; before that (again, once it is resumed) the list is empty.
      !ended
        ? Promise.resolve([])
        : this._files.length === 0
          ? this.api.files(this.id).catch(() => this._files)
          : Promise.resolve(this._files),
      // The record names the values a cell's job handed back; their types and sizes are asked once.
      !ended
        ? Promise.resolve([])
        : this._values.length === 0 && (job.values ?? []).length > 0
          ? this.api.values(this.id).catch(() => this._values)
          : Promise.resolve(this._values)
    ]);
  }

  dispose(): void {
    this._poller.dispose();
    Signal.clearData(this);
  }

  private _job: IJobDetail | null = null;
  private _log = '';
  private _files: IFileEntry[] = [];
  private _values: IValueEntry[] = [];
  private _error: string | null = null;
  private _signature = '';
  private _fetchedAt = 0;
  private _visible = false;
  private readonly _poller: Poller;
  private readonly _changed = new Signal<this, void>(this);
}
