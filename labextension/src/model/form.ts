/**
 * The submit dialog's form, apart from its widgets: what it starts with, and the request it
 * becomes. The server checks the request again and has the last word (its messages are shown
 * in the dialog); the checks here only catch what the form itself can know.
 */

import { durationInput, formatDuration } from './format';
import { IParameter, changedParameters, fieldText, parameterFromValue } from './parameters';
import { IJob, IResubmitRequest, ISubmitRequest, isActive } from './types';

export interface ISubmitForm {
  gpus: string;
  deadline: string;
  maxRuntime: string;
  expectedRuntime: string;
  name: string;
  team: string;
  /** The kernel to run it on; empty: the one the notebook names. */
  kernel: string;
  /** Globs, separated by commas or new lines. */
  outputs: string;
  /** Files or folders to copy into the job, next to the notebook unless absolute; separated as outputs are. */
  data: string;
  /** Parameter name -> field text (or checkbox state). */
  parameters: Record<string, string | boolean>;
  /** Ids of the jobs it is to run after: it starts once every one of them has succeeded. */
  after: string[];
  /** Save checkpoints, so that it can be resumed once it failed; unticked: the queue's default. */
  checkpoint: boolean;
}

/** Where the job's notebook comes from. */
export type NotebookSource =
  | { kind: 'path'; path: string }
  | { kind: 'content'; name: string; content: unknown; folder?: string }
  | { kind: 'job'; job: IJob };

export function notebookName(source: NotebookSource): string {
  switch (source.kind) {
    case 'path':
      return source.path.split('/').pop() || source.path;
    case 'content':
      return source.name;
    case 'job':
      return source.job.work?.notebook || source.job.name;
  }
}

export function initialForm(
  source: NotebookSource,
  parameters: IParameter[],
  remembered: { team?: string; gpus?: string } = {}
): ISubmitForm {
  const fields: Record<string, string | boolean> = {};
  for (const p of parameters) {
    fields[p.name] = p.kind === 'bool' ? p.value === true : fieldText(p);
  }
  if (source.kind === 'job') {
    const job = source.job;
    return {
      gpus: String(job.request.gpus),
      deadline: '',
      maxRuntime: durationInput(job.request.max_runtime_s),
      expectedRuntime: durationInput(job.request.expected_runtime_s),
      name: job.name,
      team: job.team || '',
      kernel: job.work?.kernel || '',
      outputs: (job.output?.files ?? []).join(', '),
      data: '',
      parameters: fields,
      after: [],
      checkpoint: job.request.checkpoint ?? false
    };
  }
  return {
    gpus: remembered.gpus ?? '1',
    deadline: '',
    maxRuntime: '',
    expectedRuntime: '',
    name: notebookName(source).replace(/\.ipynb$/, ''),
    team: remembered.team ?? '',
    kernel: '',
    outputs: '',
    data: '',
    parameters: fields,
    after: [],
    checkpoint: false
  };
}

export const AFTER_CHOICES = 8; // active jobs the dialog lists to run after until asked for all

/** The jobs a job may be set to run after: those still queued, running or suspended (to be
 * resumed: the jobs after it wait on), and those it already runs after (`current`, a change:
 * shown ticked, whatever their state), newest first. */
export function afterChoices(jobs: IJob[], current: string[] = []): IJob[] {
  return jobs
    .filter(job => isActive(job) || job.state === 'suspended' || current.includes(job.id))
    .sort((a, b) => (b.submitted_at ?? '').localeCompare(a.submitted_at ?? ''));
}

/** Those the dialog lists: the AFTER_CHOICES newest and every one ticked, or all of them. */
export function listedAfterChoices(choices: IJob[], after: string[], all: boolean): IJob[] {
  return all ? choices : choices.filter((job, i) => i < AFTER_CHOICES || after.includes(job.id));
}

/** One of them as the dialog names it: "prep · running · job b90c4400". */
export function afterChoiceText(job: IJob): string {
  return `${job.name} · ${job.state} · job ${job.id.split('-').pop()}`;
}

/** The folder a new job's notebook is in, relative to the server's root ('' at the root). */
export function notebookFolder(source: Exclude<NotebookSource, { kind: 'job' }>): string {
  return source.kind === 'path' ? source.path.split('/').slice(0, -1).join('/') : (source.folder ?? '');
}

/** Data entries as the server takes them: next to the notebook unless absolute. */
export function dataPaths(text: string, folder: string): string[] {
  return splitGlobs(text).map(item => (item.startsWith('/') || !folder ? item : `${folder}/${item}`));
}

/** The parameters a resubmit dialog shows: those the job was given, with their values. */
export function jobParameters(job: IJob): IParameter[] {
  return Object.entries(job.work?.parameters ?? {}).map(([name, value]) => parameterFromValue(name, value));
}

export function splitGlobs(text: string): string[] {
  return text
    .split(/[,\n]/)
    .map(s => s.trim())
    .filter(Boolean);
}

export interface IFormResult<T> {
  request?: T;
  /** Field -> message; `parameters.<name>` for a parameter. */
  errors: Record<string, string>;
}

/** Form fields sent as typed (trimmed), and their names in a submit or resubmit request. */
const TEXT_FIELDS: [keyof ISubmitForm, keyof ISubmitRequest & keyof IResubmitRequest][] = [
  ['deadline', 'deadline'],
  ['maxRuntime', 'max_runtime'],
  ['expectedRuntime', 'expected_runtime'],
  ['name', 'name'],
  ['team', 'team'],
  ['kernel', 'kernel']
];

/** A new job's request from the form; empty fields are left to the server's defaults. */
export function submitRequest(
  form: ISubmitForm,
  source: Exclude<NotebookSource, { kind: 'job' }>,
  parameters: IParameter[],
  inventorySize: number | null,
  now: Date = new Date()
): IFormResult<ISubmitRequest> {
  const errors: Record<string, string> = checkTimeFields(form, now);
  const request: ISubmitRequest =
    source.kind === 'path' ? { path: source.path } : { notebook: source.content, notebook_name: source.name };
  if (source.kind === 'content' && source.folder !== undefined) {
    request.folder = source.folder;
  }
  const gpus = checkGpus(form.gpus, inventorySize, errors);
  if (gpus !== undefined) {
    request.gpus = gpus;
  }
  for (const [field, key] of TEXT_FIELDS) {
    const value = String(form[field]).trim();
    if (value) {
      (request as any)[key] = value;
    }
  }
  const outputs = splitGlobs(form.outputs);
  if (outputs.length) {
    request.outputs = outputs;
  }
  const data = dataPaths(form.data, notebookFolder(source));
  if (data.length) {
    request.data = data;
  }
  if (form.after.length) {
    request.after = [...form.after];
  }
  if (form.checkpoint) {
    request.checkpoint = true; // unticked: not sent, the queue's default applies
  }
  const changed = changedParameters(parameters, form.parameters);
  for (const [name, message] of Object.entries(changed.errors)) {
    errors[`parameters.${name}`] = message;
  }
  if (Object.keys(changed.values).length) {
    request.parameters = changed.values;
  }
  return Object.keys(errors).length ? { errors } : { request, errors };
}

/**
 * The request to check while the dialog is open: an open notebook without its code cells'
 * outputs, which the check does not read and which can be most of a notebook's size (the
 * dialog checks again after every pause in typing).
 */
export function requestToCheck(request: ISubmitRequest): ISubmitRequest {
  const notebook = request.notebook as { cells?: unknown } | undefined;
  if (!notebook || !Array.isArray(notebook.cells)) {
    return request;
  }
  const cells = notebook.cells.map(cell =>
    cell && typeof cell === 'object' && (cell as { cell_type?: string }).cell_type === 'code'
      ? { ...cell, outputs: [] }
      : cell
  );
  return { ...request, notebook: { ...notebook, cells } };
}

/**
 * A resubmit's changes: only the fields the user changed from the original job (the server
 * keeps the rest, including limits that were its defaults). A cleared field means "the
 * server's default" and is not sent either, except the deadline, which is never carried over.
 */
export function resubmitRequest(
  form: ISubmitForm,
  original: ISubmitForm,
  parameters: IParameter[],
  inventorySize: number | null,
  now: Date = new Date()
): IFormResult<IResubmitRequest> {
  const errors: Record<string, string> = checkTimeFields(form, now);
  const request: IResubmitRequest = {};
  if (form.gpus.trim() !== original.gpus.trim()) {
    const gpus = checkGpus(form.gpus, inventorySize, errors);
    if (gpus !== undefined) {
      request.gpus = gpus;
    }
  }
  for (const [field, key] of TEXT_FIELDS) {
    const value = String(form[field]).trim();
    if (value && value !== String(original[field]).trim()) {
      (request as any)[key] = value;
    }
  }
  if (splitGlobs(form.outputs).join(',') !== splitGlobs(original.outputs).join(',')) {
    request.outputs = splitGlobs(form.outputs);
  }
  if (form.after.length) {
    request.after = [...form.after]; // never carried over from the original job
  }
  if (form.checkpoint !== original.checkpoint) {
    request.checkpoint = form.checkpoint;
  }
  const changed = changedParameters(parameters, form.parameters);
  for (const [name, message] of Object.entries(changed.errors)) {
    errors[`parameters.${name}`] = message;
  }
  if (Object.keys(changed.values).length) {
    request.parameters = changed.values;
  }
  return Object.keys(errors).length ? { errors } : { request, errors };
}

export function checkGpus(
  text: string,
  inventorySize: number | null,
  errors: Record<string, string>
): number | undefined {
  const value = text.trim();
  if (value === '') {
    return undefined;
  }
  if (!/^\d+$/.test(value)) {
    errors.gpus = 'GPUs must be a whole number (0 for a CPU-only job).';
    return undefined;
  }
  const gpus = parseInt(value, 10);
  if (inventorySize !== null && gpus > inventorySize) {
    errors.gpus =
      inventorySize === 0
        ? 'This queue has no GPUs: only 0-GPU jobs can run.'
        : `This queue has ${inventorySize} GPU${inventorySize === 1 ? '' : 's'}; ask for at most ${inventorySize}.`;
    return undefined;
  }
  return gpus;
}

// --- run times and deadlines, read as the server reads them (core/job.py) -----------------------

/** A field read: its value, or why it cannot be read. */
export type Reading<T> = { value: T } | { error: string };

const MAX_DURATION_S = 366 * 86400; // the server's limit: at most a year
const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
const DURATION = /^(?:\d+(?:\.\d+)?[smhdw])+$/;
const DURATION_PART = /(\d+(?:\.\d+)?)([smhdw])/g;

/** Seconds from "90m", "6h", "1d", "1h30m", "45s" or a plain number of seconds; "forever" is no duration. */
export function readDuration(text: string): Reading<number> {
  const compact = text.trim().toLowerCase().replace(/\s+/g, '');
  const seconds = /^\d+(?:\.\d+)?$/.test(compact)
    ? parseFloat(compact)
    : DURATION.test(compact)
      ? durationSeconds(compact)
      : NaN;
  if (Number.isNaN(seconds)) {
    return { error: `Cannot read “${text.trim()}” as a duration: use 45s, 90m, 6h, 1d or 1h30m.` };
  }
  if (!(seconds > 0 && seconds <= MAX_DURATION_S)) {
    return { error: 'A run time must be longer than zero and at most a year.' };
  }
  return { value: seconds };
}

function durationSeconds(compact: string): number {
  let seconds = 0;
  for (const [, n, unit] of compact.matchAll(DURATION_PART)) {
    seconds += parseFloat(n) * DURATION_UNITS[unit];
  }
  return seconds;
}

const CLOCK = /^(\d{1,2})(?::(\d{2})(?::(\d{2}))?)?\s*(am|pm)?$/;
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[t ](\d{2})(?::(\d{2})(?::(\d{2})(?:\.\d+)?)?)?)?\s*(z|[+-]\d{2}(?::?\d{2})?)?$/;
const DAYS: Record<string, number> = { today: 0, tomorrow: 1 };
const DEADLINE_FORMS = 'use 08:00, 8am, tomorrow 18:00, +6h or 2026-12-31T18:00.';

/**
 * The moment a deadline names, as the server reads it: "+6h" from now; "08:00" or "8am", the
 * next such time; "today 18:00", "tomorrow 8am"; or an ISO 8601 time (local unless it says).
 */
export function readDeadline(text: string, now: Date): Reading<Date> {
  const typed = text.trim();
  const when = typed.startsWith('+')
    ? relativeDeadline(typed.slice(1), now)
    : absoluteDeadline(typed.toLowerCase(), now);
  return when ? { value: when } : { error: `Cannot read “${typed}” as a deadline: ${DEADLINE_FORMS}` };
}

function relativeDeadline(text: string, now: Date): Date | null {
  const duration = readDuration(text);
  return 'value' in duration ? new Date(now.getTime() + duration.value * 1000) : null;
}

function absoluteDeadline(text: string, now: Date): Date | null {
  const [day, ...rest] = text.split(/\s+/);
  if (day in DAYS) {
    const clock = readClock(rest.join(' '));
    return clock ? clockOn(now, DAYS[day], clock) : null;
  }
  const clock = readClock(text);
  if (clock) {
    const today = clockOn(now, 0, clock);
    return today > now ? today : clockOn(now, 1, clock);
  }
  return isoTime(text);
}

/** [hour, minute, second] of "08:00", "8:00:30", "8am", "8:30 pm"; a bare hour says too little. */
function readClock(text: string): [number, number, number] | null {
  const match = CLOCK.exec(text.trim());
  if (!match || (match[2] === undefined && match[4] === undefined)) {
    return null;
  }
  let hour = parseInt(match[1], 10);
  const [minute, second] = [parseInt(match[2] ?? '0', 10), parseInt(match[3] ?? '0', 10)];
  if (match[4]) {
    if (hour < 1 || hour > 12) {
      return null;
    }
    hour = (hour % 12) + (match[4] === 'pm' ? 12 : 0);
  }
  return hour > 23 || minute > 59 || second > 59 ? null : [hour, minute, second];
}

/** The clock time, local wall time, `daysAhead` days after `now`'s day. */
function clockOn(now: Date, daysAhead: number, [hour, minute, second]: [number, number, number]): Date {
  return new Date(now.getFullYear(), now.getMonth(), now.getDate() + daysAhead, hour, minute, second);
}

function isoTime(text: string): Date | null {
  const m = ISO_TIME.exec(text);
  if (!m) {
    return null;
  }
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(part => parseInt(part ?? '0', 10));
  const wall = Date.UTC(year, month - 1, day, hour, minute, second);
  const read = new Date(wall);
  if (read.getUTCMonth() !== month - 1 || read.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
    return null; // 31 February, 25:00
  }
  return m[7] ? new Date(wall - zoneOffsetMinutes(m[7]) * 60000) : new Date(year, month - 1, day, hour, minute, second); // no zone: local time
}

/** "z" -> 0, "+01:00" -> 60, "-0530" -> -330. */
function zoneOffsetMinutes(zone: string): number {
  if (zone === 'z') {
    return 0;
  }
  const digits = zone.slice(1).replace(':', '');
  const minutes = parseInt(digits.slice(0, 2), 10) * 60 + parseInt(digits.slice(2) || '0', 10);
  return zone[0] === '-' ? -minutes : minutes;
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const WEEK_MS = 6.5 * 86400 * 1000; // within it, the weekday says which day

/** A deadline as the browser's clock reads it: "Fri 08:00, local"; its date too when a week or more away. */
export function deadlinePreview(when: Date, now: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  const clock = `${pad(when.getHours())}:${pad(when.getMinutes())}`;
  const ahead = when.getTime() - now.getTime();
  const day =
    ahead >= 0 && ahead < WEEK_MS
      ? WEEKDAYS[when.getDay()]
      : `${WEEKDAYS[when.getDay()]} ${when.getDate()} ${MONTHS[when.getMonth()]}` +
        (when.getFullYear() === now.getFullYear() ? '' : ` ${when.getFullYear()}`);
  return `${day} ${clock}, local${ahead < 0 ? ' — in the past' : ''}`;
}

/** A run time field's preview: "1h 30m". */
export function durationPreview(seconds: number): string {
  return formatDuration(seconds);
}

/** What the form shows under a time field: its preview, or why it cannot be read; null when empty. */
export function timeFieldNote(
  field: 'deadline' | 'maxRuntime' | 'expectedRuntime',
  text: string,
  now: Date
): Reading<string> | null {
  if (!text.trim()) {
    return null;
  }
  if (field === 'deadline') {
    const when = readDeadline(text, now);
    return 'value' in when ? { value: deadlinePreview(when.value, now) } : when;
  }
  const seconds = readDuration(text);
  return 'value' in seconds ? { value: durationPreview(seconds.value) } : seconds;
}

/** The time fields that cannot be read, with why; the server checks the rest (a past deadline). */
export function checkTimeFields(form: ISubmitForm, now: Date): Record<string, string> {
  const errors: Record<string, string> = {};
  for (const field of ['deadline', 'maxRuntime', 'expectedRuntime'] as const) {
    const note = timeFieldNote(field, form[field], now);
    if (note && 'error' in note) {
      errors[field] = note.error;
    }
  }
  return errors;
}
