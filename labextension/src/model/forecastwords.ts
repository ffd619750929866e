/**
 * The submit dialog's forecast in words: where a checked request would wait, naming the jobs it
 * waits for by their names (not their ids), and what it would cost.
 */

import { formatDuration, formatHours, formatUntil } from './format';
import { IJob, IServerInfo, ISubmitCheck, IUsage } from './types';

/** Job id -> name, for the jobs the caller can see. */
export type JobNames = ReadonlyMap<string, string>;

export function jobNames(jobs: Pick<IJob, 'id' | 'name'>[]): JobNames {
  return new Map(jobs.map(job => [job.id, job.name]));
}

/** A job as a sentence names it: its name, or "job b90c4400" when its name is not known. */
export function jobWord(id: string, names: JobNames): string {
  return names.get(id) ?? `job ${id.split('-').pop()}`;
}

/** Jobs in a list: "prep", "prep and train", "prep, train and 2 more". */
export function jobsWords(ids: string[], names: JobNames): string {
  const words = ids.map(id => jobWord(id, names));
  if (words.length <= 2) {
    return words.join(' and ');
  }
  const more = words.length - 2;
  return more === 1 ? `${words[0]}, ${words[1]} and ${words[2]}` : `${words[0]}, ${words[1]} and ${more} more`;
}

/** Job ids as the server writes them (yymmdd-8 hex digits). */
const JOB_ID = /\b\d{6}-[0-9a-f]{8}\b/g;

/** The server's words with every job id in them replaced by the job's name. */
export function withJobNames(text: string, names: JobNames): string {
  return text.replace(JOB_ID, id => (names.has(id) ? `“${names.get(id)}”` : jobWord(id, names)));
}

/** Where a checked request would wait, in a sentence: "Would wait at position 2, expected to start in 11m." */
export function forecastSentence(check: ISubmitCheck, names: JobNames, now: Date = new Date()): string {
  if (check.waiting_for?.length) {
    const start = check.expected_start ? `; expected to start ${formatUntil(check.expected_start, now)}` : '';
    const them = jobsWords(check.waiting_for, names);
    return `Would wait for ${them} to succeed, then join the line${start}.`;
  }
  if (check.expected_to_expire) {
    return 'Would expire before it starts: its deadline is out of reach behind the jobs ahead.';
  }
  if (check.queue_position === null) {
    return "The cluster's scheduler decides when it starts.";
  }
  return lineSentence(check, names, now);
}

function lineSentence(check: ISubmitCheck, names: JobNames, now: Date): string {
  const end = check.expected_end ? `, expected to end ${formatUntil(check.expected_end, now)}` : '';
  if (!check.expected_start) {
    return `Would wait at position ${check.queue_position}; when it would start cannot be told yet.`;
  }
  const start = formatUntil(check.expected_start, now);
  if (start === 'now') {
    return `Would start now${end}.`;
  }
  const held = check.held_back ? ` Held back though GPUs are free: ${withJobNames(check.held_back, names)}.` : '';
  return `Would wait at position ${check.queue_position}, expected to start ${start}${end}.${held}`;
}

// --- cost ------------------------------------------------------------------------------------

/** What one GPU-hour costs, as the meter charges it. */
export interface IRate {
  perGpuHour: number;
  currency: string;
}

/** The rate the server charges, where it says (`/e31/api/info`); null from an older server. */
export function rateFromInfo(info: IServerInfo): IRate | null {
  return typeof info.gpu_hour_rate === 'number'
    ? { perGpuHour: info.gpu_hour_rate, currency: info.currency ?? '' }
    : null;
}

/** GPU-hours enough to tell the rate from a meter's cost, which is rounded to 4 decimals. */
const RATE_SAMPLE_GPU_HOURS = 0.01;

/**
 * The rate the meter charges, from usage it reported (cost / GPU-hours of the largest sample);
 * null when no usage is large enough to tell. A rate of 0: GPU time is not charged.
 */
export function rateFromUsage(usages: IUsage[]): IRate | null {
  const sample = usages.filter(u => u.gpu_hours >= RATE_SAMPLE_GPU_HOURS).sort((a, b) => b.gpu_hours - a.gpu_hours)[0];
  if (!sample) {
    return null;
  }
  const perGpuHour = Math.round((sample.cost / sample.gpu_hours) * 1000) / 1000;
  return { perGpuHour, currency: sample.currency ?? '' };
}

/** A queued job's expected use: GPUs x run time (the expected one, else the limit) x the rate. */
export interface ICostEstimate {
  gpus: number;
  seconds: number;
  basis: 'expected' | 'max';
  gpuHours: number;
  /** Null when the rate is not known. */
  cost: number | null;
  currency: string;
}

/** The request as the server's check read it (its defaults filled in). */
export interface ICheckedRequest {
  gpus: number;
  max_runtime_s: number | null;
  expected_runtime_s: number | null;
}

/** The checked request, where the server's check says it (`SubmitCheck.request`). */
export function checkedRequest(check: ISubmitCheck): ICheckedRequest | null {
  const request = (check as ISubmitCheck & { request?: ICheckedRequest }).request;
  return request && typeof request.gpus === 'number' ? request : null;
}

export function estimateCost(request: ICheckedRequest, rate: IRate | null): ICostEstimate | null {
  const basis = request.expected_runtime_s ? 'expected' : 'max';
  const seconds = request.expected_runtime_s || request.max_runtime_s;
  if (!seconds) {
    return null;
  }
  const gpuHours = (request.gpus * seconds) / 3600;
  const cost = rate ? gpuHours * rate.perGpuHour : null;
  return { gpus: request.gpus, seconds, basis, gpuHours, cost, currency: rate?.currency ?? '' };
}

/** "Estimated cost: 7.50 EUR (~3.00 GPU-h: 2 GPUs × 1h 30m expected)"; "~48 GPU-h" without a rate. */
export function costSentence(estimate: ICostEstimate): string {
  if (!estimate.gpus) {
    return 'Estimated cost: none, a job without GPUs is not charged.';
  }
  const gpus = `${estimate.gpus} GPU${estimate.gpus === 1 ? '' : 's'}`;
  const time = `${formatDuration(estimate.seconds)} ${estimate.basis === 'expected' ? 'expected' : 'at most'}`;
  const use = `~${formatHours(estimate.gpuHours)} GPU-h: ${gpus} × ${time}`;
  if (estimate.cost === null) {
    return `Estimated use: ${use} (the rate is not known yet).`;
  }
  const cost = `${estimate.cost.toFixed(2)} ${estimate.currency}`.trim();
  return `Estimated cost: ${estimate.basis === 'max' ? 'up to ' : ''}${cost} (${use}).`;
}
