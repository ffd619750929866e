/**
 * One job in detail: its record with the state history, the tail of its log and the files (and,
 * for a cell's job, the values) it handed back. Polls while the view is on screen and the job has
 * not ended; once it has ended one last fetch picks up its final log, files and values, then
 * nothing runs.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { E31Api, errorText } from './api';
import { IBackoff, Poller } from './poller';
import { STATE_LABELS } from './format';
import { IFileEntry, IJob, IJobDetail, IValueEntry, JobState, isFinal } from './types';

export const LOG_TAIL_LINES = 60;

/** The ends of a job that stopped it short of its last cell: where it stopped is what matters. */
const STOPPED_SHORT: readonly JobState[] = ['failed', 'cancelled', 'expired'];

export interface IProgressWords {
  /** "2 of 3 cells", "stopped in cell 3 of 3", "not started", "—". */
  text: string;
  /** It ran and stopped short (failed, cancelled, expired): shown in its state's colour. */
  stopped: boolean;
}

/**
 * A job's progress for its page. One that failed, was cancelled or expired says where it
 * stopped, not "3 of 3 cells": papermill counts the cell a job stopped in as done.
 */
export function progressWords(job: IJob): IProgressWords {
  const ran = job.started_at !== null;
  if (ran && STOPPED_SHORT.includes(job.state)) {
    return { text: stoppedWords(job.progress), stopped: true };
  }
  const { cells_done, cells_total } = job.progress;
  const text = cells_total ? `${cells_done} of ${cells_total} cells` : ran ? '—' : 'not started';
  return { text, stopped: false };
}

/**
 * Where a job stopped: "stopped in cell 3 of 3" (the user's cells counted from 1, as the server's
 * progress and a failure's reason count them: papermill's injected parameters cell is not one);
 * "stopped before cell 1 of 3".
 */
export function stoppedWords(progress: IJob['progress']): string {
  const cell = stoppedCell(progress);
  const of = progress.cells_total ? ` of ${progress.cells_total}` : '';
  return cell === null ? `stopped before cell 1${of}` : `stopped in cell ${cell + 1}${of}`;
}

/** The index of the cell a job stopped in: the one it was running, or the last one counted as done. */
function stoppedCell(progress: IJob['progress']): number | null {
  if (progress.current_cell !== null && progress.current_cell !== undefined) {
    return progress.current_cell;
  }
  return progress.cells_done > 0 ? progress.cells_done - 1 : null;
}

/** The label of the timeline's last step: how the job ended ("Failed"), or "Finished". */
export function endStepLabel(job: IJob): string {
  return job.state === 'suspended' || STOPPED_SHORT.includes(job.state) ? STATE_LABELS[job.state] : 'Finished';
}

/** A running job's latest printed line ("epoch 7/12"); null for none, or once it is not running. */
export function lastPrintedLine(job: IJob): string | null {
  const line = job.state === 'running' ? job.progress.last_line?.trim() : '';
  return line || null;
}

/**
 * What of a job's GPU use counts as a change: whether it has figures, its warning and the GPUs
 * given back; not each new sample, which would keep a running job's page polling at full speed.
 */
function gpuUseSignature(job: IJobDetail): unknown {
  const use = job.gpu_use;
  return use ? [use.available, use.why_absent, use.idle ?? null, use.returned ?? []] : null;
}

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
        gpuUseSignature(job),
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
