/**
 * How numbers and times read in the UI.
 */

import { IAttempt, ICheckpoint, IJob, ISubmitCheck, IValueEntry, JobState, stopUnderWay } from './types';

/** 5400 -> "1h 30m"; 42 -> "42s"; 90061 -> "1d 1h". Two units at most. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) {
    return '—';
  }
  let s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s}s`;
  }
  const units: [string, number][] = [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
    ['s', 1]
  ];
  const parts: string[] = [];
  for (const [unit, size] of units) {
    const n = Math.floor(s / size);
    if (n > 0 || parts.length > 0) {
      if (n > 0) {
        parts.push(`${n}${unit}`);
      }
      s -= n * size;
    }
    if (parts.length === 2 || (parts.length === 1 && s === 0)) {
      break;
    }
  }
  return parts.join(' ');
}

/** The same duration in the form the server accepts back ("90m", "6h", "1h30m"). */
export function durationInput(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) {
    return '';
  }
  const s = Math.round(seconds);
  if (s % 86400 === 0 && s > 0) {
    return `${s / 86400}d`;
  }
  if (s % 3600 === 0 && s > 0) {
    return `${s / 3600}h`;
  }
  if (s % 60 === 0 && s > 0) {
    const h = Math.floor(s / 3600);
    const m = (s % 3600) / 60;
    return h ? `${h}h${m}m` : `${m}m`;
  }
  return String(s);
}

/** Devices by id: "GPU 0", "GPUs 0, 1". */
export function gpuList(gpus: string[]): string {
  return `GPU${gpus.length === 1 ? '' : 's'} ${gpus.join(', ')}`;
}

/** GPU-hours for people: "0.42 GPU-h", "12.5 GPU-h", "0 GPU-h". */
export function formatGpuHours(hours: number): string {
  return `${formatHours(hours)} GPU-h`;
}

export function formatHours(hours: number): string {
  if (hours <= 0) {
    return '0';
  }
  if (hours < 0.01) {
    return hours < 0.001 ? '<0.001' : hours.toFixed(3);
  }
  if (hours < 10) {
    return hours.toFixed(2);
  }
  if (hours < 100) {
    return hours.toFixed(1);
  }
  return Math.round(hours).toLocaleString('en-US');
}

export function formatCost(cost: number, currency: string | undefined): string {
  if (!cost) {
    return '';
  }
  return `${cost.toFixed(2)} ${currency || ''}`.trim();
}

const pad = (n: number) => String(n).padStart(2, '0');

/** A Date, or what to show instead: "—" for no time, the text itself when it is not a time. */
function parseTime(iso: string | null): Date | string {
  if (!iso) {
    return '—';
  }
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? iso : t;
}

/**
 * A deadline in the form the server accepts back, for editing: local date and time to the
 * minute, with this browser's UTC offset, so the server reads the same moment whatever its own
 * time zone ("2026-12-02 08:00+01:00"). Empty for none.
 */
export function deadlineInput(iso: string | null | undefined): string {
  const t = parseTime(iso ?? null);
  if (!(t instanceof Date)) {
    return iso ?? '';
  }
  const offset = -t.getTimezoneOffset();
  const sign = offset < 0 ? '-' : '+';
  const zone = `${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
  return (
    `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ` +
    `${pad(t.getHours())}:${pad(t.getMinutes())}${zone}`
  );
}

/** A timestamp near `now` in few characters: "14:03", "Tue 14:03", "2024-05-01 14:03". */
export function formatTime(iso: string | null, now: Date = new Date()): string {
  const t = parseTime(iso);
  if (!(t instanceof Date)) {
    return t;
  }
  const hm = `${pad(t.getHours())}:${pad(t.getMinutes())}`;
  const sameDay = t.toDateString() === now.toDateString();
  if (sameDay) {
    return hm;
  }
  const days = Math.abs(now.getTime() - t.getTime()) / 86400000;
  if (days < 6) {
    return `${['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][t.getDay()]} ${hm}`;
  }
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ${hm}`;
}

/**
 * How long until a forecast time, to the minute: "in 1h 30m", "in under a minute", or "now" once
 * it has come.
 */
export function formatUntil(iso: string | null, now: Date = new Date()): string {
  const t = parseTime(iso);
  if (!(t instanceof Date)) {
    return t;
  }
  const seconds = (t.getTime() - now.getTime()) / 1000;
  if (seconds <= 0) {
    return 'now';
  }
  const minutes = Math.round(seconds / 60);
  return minutes >= 1 ? `in ${formatDuration(minutes * 60)}` : 'in under a minute';
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** A local ISO date with its month, for a chart's axis: "2024-12-03" -> "3 Dec". */
export function dayMonth(isoDate: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})/.exec(isoDate);
  const month = match ? MONTHS[Number(match[2]) - 1] : undefined;
  return match && month ? `${Number(match[3])} ${month}` : isoDate;
}

/** Full local date and time with seconds, for tooltips and the timeline. */
export function formatTimestamp(iso: string | null): string {
  const t = parseTime(iso);
  if (!(t instanceof Date)) {
    return t;
  }
  return (
    `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ` +
    `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`
  );
}

/** Seconds between two timestamps (the second defaulting to `now`). */
export function secondsBetween(from: string | null, to: string | null, now: number = Date.now()): number | null {
  if (!from) {
    return null;
  }
  const a = Date.parse(from);
  const b = to ? Date.parse(to) : now;
  if (Number.isNaN(a) || Number.isNaN(b)) {
    return null;
  }
  return Math.max(0, (b - a) / 1000);
}

export const STATE_LABELS: Record<JobState, string> = {
  queued: 'Queued',
  running: 'Running',
  suspended: 'Suspended',
  succeeded: 'Succeeded',
  failed: 'Failed',
  cancelled: 'Cancelled',
  expired: 'Expired'
};

/** One line that says where the job stands: "#2 in queue", "cell 3 of 8", "ran 4m 12s". */
export function jobSummary(job: IJob, now: number = Date.now()): string {
  switch (job.state) {
    case 'queued': {
      const waiting = `waiting ${formatDuration(secondsBetween(job.submitted_at, null, now))}`;
      const after = job.waiting_for?.length ? ` · after ${waitingWords(job.waiting_for)}` : '';
      const expected = job.expected_to_expire
        ? ' · expected to expire'
        : job.expected_start
          ? ` · starts ${formatUntil(job.expected_start, new Date(now))}`
          : '';
      const deadline = job.request.deadline ? ` · due ${formatTime(job.request.deadline, new Date(now))}` : '';
      return waiting + after + expected + deadline;
    }
    case 'running': {
      const { cells_done, cells_total } = job.progress;
      const cells = cells_total ? `cell ${Math.min(cells_done + 1, cells_total)} of ${cells_total}` : 'starting';
      const stopping = stopUnderWay(job);
      const ends = stopping
        ? ` · ${stopping}`
        : job.expected_end
          ? ` · ends ${formatUntil(job.expected_end, new Date(now))}`
          : '';
      return `${cells} · ${formatDuration(secondsBetween(job.started_at, null, now))}${ends}`;
    }
    case 'suspended': {
      const where = job.last_checkpoint ? `suspended after cell ${job.last_checkpoint.after_cell + 1}` : 'suspended';
      const ran = secondsBetween(job.started_at, job.finished_at, now);
      return ran === null ? where : `${where} · ran ${formatDuration(ran)}`;
    }
    case 'expired':
      return job.reason || 'the deadline could not be met';
    default: {
      const ran = secondsBetween(job.started_at, job.finished_at, now);
      return ran === null ? job.reason || STATE_LABELS[job.state].toLowerCase() : `ran ${formatDuration(ran)}`;
    }
  }
}

/**
 * How a job's end is announced: its words and the kind of notification; null for a cancel (the
 * user or an admin did it: nothing to announce). A suspend is asked for too, but takes until the
 * running cell ends, and leaves the job to be resumed: a neutral notice says it is done.
 */
export function endingNotice(
  job: IJob,
  now: number = Date.now()
): { message: string; type: 'success' | 'error' | 'warning' | 'info' } | null {
  const name = `Job “${job.name}”`;
  switch (job.state) {
    case 'succeeded': {
      const ran = formatDuration(secondsBetween(job.started_at, job.finished_at, now));
      const held = job.gpus.length ? ` (${formatGpuHours(job.meter.gpu_hours)}).` : '.';
      return { message: `${name} succeeded after ${ran}${held}`, type: 'success' };
    }
    case 'failed':
      return { message: `${name} failed${job.reason ? `: ${job.reason}` : '.'}`, type: 'error' };
    case 'expired':
      return {
        message: `${name} expired${job.reason ? `: ${job.reason}` : ' before it could start.'}`,
        type: 'warning'
      };
    case 'suspended': {
      const saved = job.last_checkpoint;
      const message = saved
        ? `${name} is suspended after cell ${saved.after_cell + 1}, its GPUs given back; resume it from its page.`
        : `${name} is suspended, its GPUs given back${job.reason ? `: ${job.reason}` : '.'}`;
      return { message, type: 'info' };
    }
    default:
      return null; // cancelled; or not ended
  }
}

/**
 * What the forecast expects of a queued job: "expected to start in 1h, to end in 1h 30m"; of a
 * running one: "expected to end in 40m".
 */
export function expectedWords(job: IJob, now: Date = new Date()): string {
  if (job.state === 'running') {
    return job.expected_end ? `expected to end ${formatUntil(job.expected_end, now)}` : '';
  }
  const waiting = job.waiting_for?.length ? `waiting for ${job.waiting_for.join(', ')} to succeed` : '';
  return [waiting, lineWords(job, now)].filter(words => words).join(', ');
}

/**
 * What the forecast expects of a queued job in the line, or of one once the jobs it waits for
 * end; and why it is held back while GPUs are free, where it is.
 */
function lineWords(job: IJob, now: Date): string {
  if (job.expected_to_expire) {
    return 'expected to expire: its deadline is out of reach';
  }
  const end = job.expected_end ? `, to end ${formatUntil(job.expected_end, now)}` : '';
  const start = job.expected_start ? `expected to start ${formatUntil(job.expected_start, now)}${end}` : '';
  const held = job.held_back ? `held back though GPUs are free: ${job.held_back}` : '';
  return [start, held].filter(words => words).join(', ');
}

/**
 * A sweep's job name, "train[lr=0.1,batch=32]", as its base "train" and its point
 * "lr=0.1, batch=32" (shown on a line of its own: it is what tells a sweep's jobs apart);
 * any other name as it is, with no point.
 */
export function sweepName(name: string): { base: string; point: string | null } {
  const match = /^(.*\S)\[([^[\]]+)\]$/.exec(name);
  return match ? { base: match[1], point: match[2].split(',').join(', ') } : { base: name, point: null };
}

/** Where a checked request would wait, in a sentence: "Would start now, expected to end in 10m." */
export function outlookText(check: ISubmitCheck, now: Date = new Date()): string {
  if (check.waiting_for?.length) {
    const start = check.expected_start ? `; expected to start ${formatUntil(check.expected_start, now)}` : '';
    return `Would wait for ${waitingWords(check.waiting_for)} to succeed, then join the line${start}.`;
  }
  if (check.expected_to_expire) {
    return 'Would expire before it starts: its deadline is out of reach behind the jobs ahead.';
  }
  if (check.queue_position === null) {
    return "The cluster's scheduler decides when it starts.";
  }
  const end = check.expected_end ? `, expected to end ${formatUntil(check.expected_end, now)}` : '';
  if (!check.expected_start) {
    return `Would wait at position ${check.queue_position}; when it would start cannot be told yet.`;
  }
  const start = formatUntil(check.expected_start, now);
  const held = check.held_back ? ` Held back though GPUs are free: ${check.held_back}.` : '';
  return start === 'now'
    ? `Would start now${end}.`
    : `Would wait at position ${check.queue_position}, expected to start ${start}${end}.${held}`;
}

/** The jobs a job waits for, in few words: "job b90c4400", "3 jobs". */
function waitingWords(ids: string[]): string {
  return ids.length === 1 ? `job ${ids[0].split('-').pop()}` : `${ids.length} jobs`;
}

/** Progress as a fraction in [0, 1], or null when unknown. */
export function progressFraction(job: IJob): number | null {
  const { cells_done, cells_total } = job.progress;
  if (!cells_total) {
    return job.state === 'succeeded' ? 1 : null;
  }
  return Math.max(0, Math.min(1, cells_done / cells_total));
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) {
    return `${bytes} B`;
  }
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[i]}`;
}

/** What a returned value is, in a few words: its type and size, the module it brings back, or
 * why it was not handed back. */
export function valueNote(value: IValueEntry): string {
  if (value.skipped) {
    return `not returned: ${value.skipped}`;
  }
  if (value.module) {
    return `module ${value.module}, imported again when collected`;
  }
  return `${value.type}, ${formatBytes(value.size)}`;
}

/**
 * A job's last checkpoint in a line: "checkpoint after cell 3, 12 KB; not saved: log, lock".
 * Cells count from 1, as `e31 status` counts them.
 */
export function checkpointWords(saved: ICheckpoint): string {
  const cannot = Object.keys(saved.cannot_save ?? {});
  const words = `checkpoint after cell ${saved.after_cell + 1}, ${formatBytes(saved.bytes)}`;
  return cannot.length ? `${words}; not saved: ${cannot.join(', ')}` : words;
}

/**
 * A resumed job's earlier runs in a line: "resumed 1 time; earlier run: failed (timeout: ...)";
 * empty for a job that ran at most once.
 */
export function attemptsWords(attempts: IAttempt[] = []): string {
  const n = attempts.length;
  if (!n) {
    return '';
  }
  const runs = attempts.map(a => (a.reason ? `${a.state} (${a.reason})` : a.state)).join(', ');
  return `resumed ${n} time${n === 1 ? '' : 's'}; earlier run${n === 1 ? '' : 's'}: ${runs}`;
}
