/**
 * The one client of the e31 REST API in the browser.
 *
 * It knows paths and JSON, nothing about JupyterLab: the plugin hands it a `fetch`-like function
 * that adds the server's authentication (ServerConnection.makeRequest), tests hand it a fake.
 */

import {
  IFileEntry,
  IGpuInventory,
  IJob,
  IJobDetail,
  ILogChunk,
  IMeterReport,
  IResubmitRequest,
  IResumeRequest,
  IServerInfo,
  ISubmitCheck,
  ISubmitRequest,
  ISubmittedJob,
  IUpdateRequest,
  IValueEntry,
  JobState
} from './types';

/** Fetch `path` (relative to the API root, e.g. `jobs?state=queued`). */
export type Fetcher = (path: string, init?: RequestInit) => Promise<Response>;

/** An answer other than 2xx, with the server's message for people. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const API_ROOT = 'e31/api';
/** The most jobs one request may ask for by id (the server's job.MAX_IDS). */
export const MAX_IDS = 500;

export class E31Api {
  /**
   * @param fetcher - sends a request to a path under the API root
   * @param urlFor - the absolute URL of a path under the API root (for links and downloads)
   */
  constructor(
    private readonly fetcher: Fetcher,
    readonly urlFor: (path: string) => string
  ) {}

  info(): Promise<IServerInfo> {
    return this.json('info');
  }

  async jobs(state?: JobState): Promise<IJob[]> {
    const answer = await this.json<{ jobs: IJob[] }>(state ? `jobs?state=${encodeURIComponent(state)}` : 'jobs');
    return answer.jobs;
  }

  /** These jobs, wherever they are in the list (the server takes MAX_IDS ids a request). */
  async jobsById(ids: string[]): Promise<IJob[]> {
    const found: IJob[] = [];
    for (let i = 0; i < ids.length; i += MAX_IDS) {
      const query = ids.slice(i, i + MAX_IDS).map(id => `id=${encodeURIComponent(id)}`);
      found.push(...(await this.json<{ jobs: IJob[] }>(`jobs?${query.join('&')}`)).jobs);
    }
    return found;
  }

  job(id: string): Promise<IJobDetail> {
    return this.json(`jobs/${enc(id)}`);
  }

  submit(request: ISubmitRequest): Promise<ISubmittedJob> {
    return this.json('jobs', { method: 'POST', body: JSON.stringify(request) });
  }

  /** What submitting `request` now would give; nothing is submitted. */
  check(request: ISubmitRequest): Promise<ISubmitCheck> {
    return this.json('check', { method: 'POST', body: JSON.stringify(request) });
  }

  /** What resubmitting job `id` with `changes` would give now; nothing is submitted. */
  checkResubmit(id: string, changes: IResubmitRequest = {}): Promise<ISubmitCheck> {
    return this.json(`jobs/${enc(id)}/resubmit/check`, { method: 'POST', body: JSON.stringify(changes) });
  }

  resubmit(id: string, changes: IResubmitRequest = {}): Promise<ISubmittedJob> {
    return this.json(`jobs/${enc(id)}/resubmit`, {
      method: 'POST',
      body: JSON.stringify(changes)
    });
  }

  /**
   * Put a failed or suspended job that took a checkpoint back in line, to continue from its last
   * finished cell; it keeps its id, files, history and meter. 409 when it is neither failed nor
   * suspended, or has no checkpoint.
   */
  resume(id: string, changes: IResumeRequest = {}): Promise<IJob> {
    return this.json(`jobs/${enc(id)}/resume`, { method: 'POST', body: JSON.stringify(changes) });
  }

  /** Change a queued job in place: it keeps its id, its files and the jobs that wait for it. */
  update(id: string, changes: IUpdateRequest): Promise<IJob> {
    return this.json(`jobs/${enc(id)}`, { method: 'PATCH', body: JSON.stringify(changes) });
  }

  /**
   * Ask a running job that takes checkpoints to stop at its running cell's end, save a
   * checkpoint and give its GPUs back; it answers at once, still running (its reason
   * "suspending: ..."), and is `suspended` once the cell has ended. 409 when it is not running or
   * takes no checkpoints.
   */
  suspend(id: string): Promise<IJob> {
    return this.json(`jobs/${enc(id)}/suspend`, { method: 'POST' });
  }

  cancel(id: string): Promise<IJob> {
    return this.json(`jobs/${enc(id)}/cancel`, { method: 'POST' });
  }

  /** Delete an ended job's files (notebook, data, values, outputs, log); its record stays. */
  deleteFiles(id: string): Promise<IJob> {
    return this.json(`jobs/${enc(id)}/files`, { method: 'DELETE' });
  }

  executedNotebook(id: string): Promise<Record<string, unknown>> {
    return this.json(`jobs/${enc(id)}/notebook`);
  }

  logTail(id: string, lines: number): Promise<ILogChunk> {
    return this.json(`jobs/${enc(id)}/log?tail=${lines}`);
  }

  async files(id: string): Promise<IFileEntry[]> {
    return (await this.json<{ files: IFileEntry[] }>(`jobs/${enc(id)}/files`)).files;
  }

  async values(id: string): Promise<IValueEntry[]> {
    return (await this.json<{ values: IValueEntry[] }>(`jobs/${enc(id)}/values`)).values;
  }

  meter(since: Date, until: Date): Promise<IMeterReport> {
    const q = `since=${encodeURIComponent(since.toISOString())}&until=${encodeURIComponent(until.toISOString())}`;
    return this.json(`meter?${q}`);
  }

  gpus(): Promise<IGpuInventory> {
    return this.json('gpus');
  }

  fileUrl(id: string, path: string): string {
    const segments = path.split('/').map(encodeURIComponent).join('/');
    return this.urlFor(`jobs/${enc(id)}/files/${segments}`);
  }

  reportUrl(id: string): string {
    return this.urlFor(`jobs/${enc(id)}/report`);
  }

  private async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    let response: Response;
    try {
      response = await this.fetcher(path, init);
    } catch (error) {
      throw new ApiError(`Cannot reach the Jupyter server (${errorText(error)}).`, 0);
    }
    const text = await response.text();
    let body: any = undefined;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      const message =
        body && typeof body.message === 'string' && body.message
          ? body.message
          : `The server answered ${response.status} ${response.statusText || ''}`.trim() + '.';
      throw new ApiError(message, response.status);
    }
    if (body === undefined) {
      throw new ApiError(`The server's answer to ${path} is not JSON.`, response.status);
    }
    return body as T;
  }
}

function enc(id: string): string {
  return encodeURIComponent(id);
}

export function errorText(error: unknown): string {
  if (error instanceof Error) {
    return error.message;
  }
  return String(error);
}
