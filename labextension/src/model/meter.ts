/**
 * GPU-hours in the browser: the live meter of a running job, today's usage, and the
 * per-day, per-team series the meter chart draws.
 *
 * The formula is the server's (`e31_jupyter/meter.py`): granted GPUs x time held, clipped to
 * a window. The server's numbers are the truth; these only let the UI tick between polls.
 */

import { E31Api } from './api';
import { IJob, IMeterReport, IUsage } from './types';

function ms(iso: string | null): number | null {
  if (!iso) {
    return null;
  }
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

/** GPU-seconds `job` held within [since, until] (epoch ms), `now` standing in for "still running". */
export function gpuSecondsIn(
  job: Pick<IJob, 'started_at' | 'finished_at' | 'gpus'>,
  since: number,
  until: number,
  now: number
): number {
  const started = ms(job.started_at);
  if (started === null) {
    return 0; // queued or never started: waiting is free
  }
  const finished = ms(job.finished_at) ?? now;
  const start = Math.max(started, since);
  const end = Math.min(finished, until);
  return (job.gpus.length * Math.max(0, end - start)) / 1000;
}

/**
 * The job's meter now: the server's reading, plus the time a running job has held its GPUs
 * since that reading was fetched.
 */
export function liveGpuHours(job: IJob, fetchedAt: number, now: number): number {
  let seconds = job.meter.gpu_seconds;
  if (job.state === 'running' && !job.finished_at) {
    seconds += (job.gpus.length * Math.max(0, now - fetchedAt)) / 1000;
  }
  return seconds / 3600;
}

/** Local midnight of the day `now` falls on. */
export function startOfDay(now: Date): Date {
  return new Date(now.getFullYear(), now.getMonth(), now.getDate());
}

/** GPU-hours `jobs` held since local midnight. */
export function gpuHoursToday(jobs: IJob[], now: number): number {
  const midnight = startOfDay(new Date(now)).getTime();
  let seconds = 0;
  for (const job of jobs) {
    seconds += gpuSecondsIn(job, midnight, now, now);
  }
  return seconds / 3600;
}

export interface IDayWindow {
  /** e.g. "Mon 3" */
  label: string;
  /** ISO date, e.g. "2024-06-03" (local). */
  date: string;
  since: Date;
  until: Date;
}

/** The last `days` local days, oldest first; the last one is today, up to `now`. */
export function dayWindows(now: Date, days: number): IDayWindow[] {
  const windows: IDayWindow[] = [];
  const today = startOfDay(now);
  for (let i = days - 1; i >= 0; i--) {
    const since = new Date(today.getFullYear(), today.getMonth(), today.getDate() - i);
    const next = new Date(since.getFullYear(), since.getMonth(), since.getDate() + 1);
    const until = i === 0 ? now : next;
    windows.push({
      label: `${WEEKDAYS[since.getDay()]} ${since.getDate()}`,
      date: isoDate(since),
      since,
      until
    });
  }
  return windows;
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

function isoDate(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/**
 * Utilisation-weighted GPU-hours summed over readings: `hours` null while none was measured,
 * `missing` once one that held GPUs was not.
 */
export interface IUsedHours {
  hours: number | null;
  missing: boolean;
}

export const NOTHING_USED: IUsedHours = { hours: null, missing: false };

/** `sum` with one more reading's used GPU-hours; a reading that held none changes nothing. */
export function addUsed(sum: IUsedHours, reading: IUsage): IUsedHours {
  if (reading.gpu_hours <= 0) {
    return sum;
  }
  const used = reading.used_gpu_hours;
  return used === null || used === undefined
    ? { ...sum, missing: true }
    : { hours: (sum.hours ?? 0) + used, missing: sum.missing };
}

export interface IMeterSeries {
  days: IDayWindow[];
  /** Teams by total GPU-hours, largest first. */
  teams: string[];
  /** hours[day][team] */
  hours: Record<string, number>[];
  totalsByTeam: Record<string, number>;
  /** Whether the server reports used GPU-hours at all (an older one does not). */
  usedReported: boolean;
  usedByTeam: Record<string, IUsedHours>;
  totalUsed: IUsedHours;
  /** Why some used GPU-hours were not measured (the latest reason the server gave). */
  usedWhyAbsent: string | null;
  /** The tallest day's total. */
  maxDay: number;
  totalHours: number;
  totalCost: number;
  currency: string;
}

/** One meter report per day -> a stacked series by team. */
export function meterSeries(days: IDayWindow[], reports: IMeterReport[]): IMeterSeries {
  const totalsByTeam: Record<string, number> = {};
  const usedByTeam: Record<string, IUsedHours> = {};
  const hours: Record<string, number>[] = [];
  let maxDay = 0;
  let totalHours = 0;
  let totalCost = 0;
  let totalUsed = NOTHING_USED;
  let usedWhyAbsent: string | null = null;
  let currency = '';
  reports.forEach(report => {
    const day: Record<string, number> = {};
    let dayTotal = 0;
    for (const [team, usage] of Object.entries(report.by_team)) {
      if (usage.gpu_hours <= 0) {
        continue;
      }
      day[team] = usage.gpu_hours;
      dayTotal += usage.gpu_hours;
      totalsByTeam[team] = (totalsByTeam[team] ?? 0) + usage.gpu_hours;
      usedByTeam[team] = addUsed(usedByTeam[team] ?? NOTHING_USED, usage);
    }
    hours.push(day);
    maxDay = Math.max(maxDay, dayTotal);
    totalHours += report.gpu_hours;
    totalCost += report.cost;
    totalUsed = addUsed(totalUsed, report);
    usedWhyAbsent = report.used_why_absent || usedWhyAbsent;
    currency = report.currency || currency;
  });
  const teams = Object.keys(totalsByTeam).sort((a, b) => totalsByTeam[b] - totalsByTeam[a] || a.localeCompare(b));
  return {
    days,
    teams,
    hours,
    totalsByTeam,
    usedReported: reports.some(report => 'used_gpu_hours' in report),
    usedByTeam,
    totalUsed,
    usedWhyAbsent,
    maxDay,
    totalHours,
    totalCost,
    currency
  };
}

/** A round number at or above `value` for a chart axis (1, 2, 5 x 10^n). */
export function niceCeiling(value: number): number {
  if (value <= 0) {
    return 1;
  }
  const exponent = Math.floor(Math.log10(value));
  const base = Math.pow(10, exponent);
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * base >= value - 1e-12) {
      return step * base;
    }
  }
  return 10 * base;
}

/** The last `days` days of GPU-hours by team: one meter report per day, fetched together. */
export async function loadMeterSeries(api: E31Api, now: Date, days: number): Promise<IMeterSeries> {
  const windows = dayWindows(now, days);
  const reports = await Promise.all(windows.map(w => api.meter(w.since, w.until)));
  return meterSeries(windows, reports);
}
