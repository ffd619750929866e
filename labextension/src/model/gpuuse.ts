/**
 * What GPUs did, as NVML read it: a job's figures and sparkline, the meter's held against used
 * GPU-hours, and the pool's GPUs: who holds each, its last reading, and those busy outside the queue.
 *
 * A figure the server could not take is null, never zero; it is left out here, and where none
 * could be taken the server's reason is shown instead, so that "not measured" never reads as idle.
 */

import { formatHours, formatTime } from './format';
import { GpuUsePoint, IGpu, IGpuReading, IGpuReturned, IGpuUse, IOutsideProcess } from './types';

/** 42.4 -> "42%". */
export function formatPercent(pct: number): string {
  return `${Math.round(pct)}%`;
}

/** 245.3 -> "245 W". */
export function formatWatts(watts: number): string {
  return `${Math.round(watts)} W`;
}

/** Bytes in binary units, as GPU memory is told: 8375186227 -> "7.8 GiB", 536870912 -> "512 MiB". */
export function formatMemory(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Math.max(0, bytes);
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  const digits = i === 0 || value >= 100 ? 0 : 1;
  return `${Number(value.toFixed(digits))} ${units[i]}`;
}

/**
 * Held against used GPU-hours: "12.0 GPU-h held, 4.10 used"; "used: not measured" where no
 * telemetry was taken, "used where measured" where only some of it was.
 */
export function heldUsedWords(held: number, used: number | null | undefined, partial = false): string {
  const heldWords = `${formatHours(held)} GPU-h held`;
  if (used === null || used === undefined) {
    return `${heldWords}, used: not measured`;
  }
  return `${heldWords}, ${formatHours(used)} used${partial ? ' where measured' : ''}`;
}

/** A job's used GPU-hours against those it held: "used 0.42 of 1.00 GPU-h held". */
export function usedOfHeldWords(used: number | null, held: number): string {
  return used === null
    ? `${formatHours(held)} GPU-h held, used: not measured`
    : `used ${formatHours(used)} of ${formatHours(held)} GPU-h held`;
}

export interface IFigure {
  label: string;
  value: string;
}

/** The figures of a job's GPU use, in the order shown; none when they could not be taken. */
export function gpuUseFigures(use: IGpuUse): IFigure[] {
  if (!use.available) {
    return [];
  }
  const figures: IFigure[] = [];
  const utilisation = utilisationWords(use.util_mean, use.util_peak);
  if (utilisation) {
    figures.push({ label: 'Utilisation', value: utilisation });
  }
  if (use.memory_peak_bytes !== null) {
    figures.push({ label: 'Peak memory', value: formatMemory(use.memory_peak_bytes) });
  }
  if (use.power_peak_w !== null) {
    figures.push({ label: 'Peak power', value: formatWatts(use.power_peak_w) });
  }
  figures.push({ label: 'GPU-hours', value: usedOfHeldWords(use.used_gpu_hours, use.held_gpu_hours) });
  return figures;
}

/** "mean 42%, peak 97%", either alone when the other is missing; empty when both are. */
function utilisationWords(mean: number | null, peak: number | null): string {
  return [mean === null ? '' : `mean ${formatPercent(mean)}`, peak === null ? '' : `peak ${formatPercent(peak)}`]
    .filter(Boolean)
    .join(', ');
}

/** Why a job's GPU use has no figures: the server's sentence. */
export function absentWords(use: IGpuUse): string {
  return use.why_absent || 'No figures could be taken for its GPUs.';
}

/** A device as a sentence names it: "GPU 1"; a UUID or MIG id names itself ("GPU-aef6…"). */
export function gpuName(id: string): string {
  return /^\d+$/.test(id) ? `GPU ${id}` : id;
}

/** A GPU the queue took back: "gave back GPU 1 at 10:42, idle". */
export function returnedWords(returned: IGpuReturned, now: Date = new Date()): string {
  return `gave back ${gpuName(returned.device)} at ${formatTime(returned.at, now)}, idle`;
}

export type SparkPoint = [number, number];

/**
 * Utilisation over time as the lines of a sparkline `width` x `height` (y down, 100% at the
 * top): time spread over the width, a line broken where a sample has no utilisation.
 */
export function sparklineSegments(series: GpuUsePoint[], width: number, height: number): SparkPoint[][] {
  if (!series.length) {
    return [];
  }
  const first = series[0][0];
  const span = series[series.length - 1][0] - first;
  const x = (t: number) => round(span > 0 ? ((t - first) / span) * width : width);
  const y = (util: number) => round(height - (Math.min(100, Math.max(0, util)) / 100) * height);
  const segments: SparkPoint[][] = [];
  let current: SparkPoint[] = [];
  for (const [t, util] of series) {
    if (util === null) {
      current = [];
      continue;
    }
    if (!current.length) {
      segments.push(current);
    }
    current.push([x(t), y(util)]);
  }
  return segments;
}

/** A segment as an SVG polyline's points: "0,20 10,5". */
export function svgPoints(segment: SparkPoint[]): string {
  return segment.map(([x, y]) => `${x},${y}`).join(' ');
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

/** Who holds a GPU outside the queue: "GPU 1 busy outside the queue: bob 3.2 GiB, pid 4242". */
export function outsideWords(gpu: IGpu): string {
  const processes = (gpu.outside ?? []).map(processWords).join(', ');
  return `${gpuName(gpu.id)} busy outside the queue${processes ? `: ${processes}` : ''}`;
}

function processWords(process: IOutsideProcess): string {
  const who = process.user ?? `pid ${process.pid}`;
  return process.memory_bytes === null ? who : `${who} ${formatMemory(process.memory_bytes)}`;
}

/**
 * A GPU of the pool as its tooltip tells it: who holds it, then its last reading where one was
 * taken. "GPU 0: busy (train) · 87% utilisation, 30.1 GiB of 80 GiB, 245 W", "GPU 1: free".
 */
export function poolGpuWords(gpu: IGpu): string {
  const holder = gpu.busy_outside
    ? outsideWords(gpu)
    : `${gpuName(gpu.id)}: ${gpu.busy ? `busy${gpu.job_name ? ` (${gpu.job_name})` : ''}` : 'free'}`;
  const reading = readingWords(gpu.reading);
  return reading ? `${holder} · ${reading}` : holder;
}

/**
 * A GPU's last reading: "87% utilisation, 30.1 GiB of 80 GiB, 245 W", each figure left out where
 * NVML gave none; empty when it gave none at all (or no reading was taken), never zeros.
 */
export function readingWords(reading: IGpuReading | null | undefined): string {
  if (!reading) {
    return '';
  }
  const { util, memory_used_bytes: used, memory_total_bytes: total, power_w: power } = reading;
  let memory = '';
  if (used !== null) {
    memory = total !== null ? `${formatMemory(used)} of ${formatMemory(total)}` : `${formatMemory(used)} used`;
  }
  return [util === null ? '' : `${formatPercent(util)} utilisation`, memory, power === null ? '' : formatWatts(power)]
    .filter(Boolean)
    .join(', ');
}

/** How much of the time a GPU was busy at its last reading, 0-100; null where it was not read. */
export function readingUtil(gpu: IGpu): number | null {
  const util = gpu.reading?.util;
  return util === null || util === undefined ? null : Math.min(100, Math.max(0, util));
}
