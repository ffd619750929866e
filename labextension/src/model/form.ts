/**
 * The submit dialog's form, apart from its widgets: what it starts with, and the request it
 * becomes. The server checks the request again and has the last word (its messages are shown
 * in the dialog); the checks here only catch what the form itself can know.
 */

import { durationInput } from './format';
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
  inventorySize: number | null
): IFormResult<ISubmitRequest> {
  const errors: Record<string, string> = {};
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
  inventorySize: number | null
): IFormResult<IResubmitRequest> {
  const errors: Record<string, string> = {};
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
