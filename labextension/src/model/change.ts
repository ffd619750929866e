/**
 * The change dialog's form, apart from its widgets: a queued job's request as it stands, and
 * the changes the user made to it (PATCH /jobs/{id}). Only what changed is sent (the jobs it
 * runs after as the whole new list); a cleared run time or deadline is sent as null (no
 * expected run time, no deadline, the queue's default limit). The server checks the changes as
 * it checks a submit and has the last word.
 */

import { IFormResult, checkGpus } from './form';
import { deadlineInput, durationInput } from './format';
import { IJob, IUpdateRequest } from './types';

export interface IChangeForm {
  gpus: string;
  maxRuntime: string;
  expectedRuntime: string;
  deadline: string;
  name: string;
  team: string;
  /** Ids of the jobs it is to run after. */
  after: string[];
}

/** The fields typed as text. */
export type TextField = Exclude<keyof IChangeForm, 'after'>;

/** Form fields typed as text, their names in the request, and whether clearing one means null. */
const FIELDS: [TextField, keyof IUpdateRequest, boolean][] = [
  ['maxRuntime', 'max_runtime', true],
  ['expectedRuntime', 'expected_runtime', true],
  ['deadline', 'deadline', true],
  ['name', 'name', false],
  ['team', 'team', false]
];

/** The job's request as the form shows it. */
export function changeForm(job: IJob): IChangeForm {
  return {
    gpus: String(job.request.gpus),
    maxRuntime: durationInput(job.request.max_runtime_s),
    expectedRuntime: durationInput(job.request.expected_runtime_s),
    deadline: deadlineInput(job.request.deadline),
    name: job.name,
    team: job.team ?? '',
    after: [...(job.request.after ?? [])]
  };
}

/** The changes from `original` to `form`; an empty request when nothing changed. */
export function updateRequest(
  form: IChangeForm,
  original: IChangeForm,
  inventorySize: number | null
): IFormResult<IUpdateRequest> {
  const errors: Record<string, string> = {};
  const request: IUpdateRequest = {};
  if (form.gpus.trim() !== original.gpus.trim()) {
    const gpus = checkGpus(form.gpus, inventorySize, errors);
    if (gpus !== undefined) {
      request.gpus = gpus;
    } else if (!errors.gpus) {
      errors.gpus = 'Say how many GPUs the job needs (0 for a CPU-only job).';
    }
  }
  for (const [field, key, clearable] of FIELDS) {
    const value = form[field].trim();
    if (value === original[field].trim()) {
      continue;
    }
    if (value) {
      (request as Record<string, string>)[key] = value;
    } else if (clearable) {
      (request as Record<string, null>)[key] = null;
    } else {
      errors[field] = `A job keeps its ${field}; type the new one, or put back "${original[field]}".`;
    }
  }
  if (!sameJobs(form.after, original.after)) {
    request.after = [...form.after];
  }
  return Object.keys(errors).length ? { errors } : { request, errors };
}

function sameJobs(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every(id => b.includes(id));
}
