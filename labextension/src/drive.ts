/**
 * A read-only contents drive for the executed notebooks of jobs.
 *
 * `E31Jobs:<job id>/<notebook name>` opens like any notebook, fetched from the e31 API instead
 * of the file system: nothing is written to the user's files, the document is marked
 * read-only (its cells cannot be edited, it cannot be saved back), and File > Download works.
 */

import { Contents, ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { E31Api } from './model/api';

export const DRIVE_NAME = 'E31Jobs';

export function executedNotebookPath(jobId: string, notebookName: string): string {
  return `${DRIVE_NAME}:${jobId}/${notebookName || 'executed.ipynb'}`;
}

export class ExecutedNotebooksDrive implements Contents.IDrive {
  constructor(
    private readonly api: E31Api,
    readonly serverSettings: ServerConnection.ISettings
  ) {}

  readonly name = DRIVE_NAME;

  get fileChanged(): ISignal<this, Contents.IChangedArgs> {
    return this._fileChanged;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    this._isDisposed = true;
    Signal.clearData(this);
  }

  async get(localPath: string, options?: Contents.IFetchOptions): Promise<Contents.IModel> {
    const { jobId, name } = parse(localPath);
    const notebook = (await this.api.executedNotebook(jobId)) as any;
    for (const cell of notebook.cells ?? []) {
      cell.metadata = { ...(cell.metadata ?? {}), editable: false, deletable: false };
    }
    const now = new Date().toISOString();
    return {
      name,
      path: localPath,
      type: 'notebook',
      format: 'json',
      mimetype: 'application/x-ipynb+json',
      content: options?.content === false ? null : notebook,
      writable: false,
      created: now,
      last_modified: now
    };
  }

  async getDownloadUrl(localPath: string): Promise<string> {
    return this.api.urlFor(`jobs/${encodeURIComponent(parse(localPath).jobId)}/notebook`);
  }

  newUntitled(): Promise<Contents.IModel> {
    return readOnly();
  }

  delete(): Promise<void> {
    return readOnly();
  }

  rename(): Promise<Contents.IModel> {
    return readOnly();
  }

  save(): Promise<Contents.IModel> {
    return readOnly();
  }

  copy(): Promise<Contents.IModel> {
    return readOnly();
  }

  createCheckpoint(): Promise<Contents.ICheckpointModel> {
    return readOnly();
  }

  async listCheckpoints(): Promise<Contents.ICheckpointModel[]> {
    return [];
  }

  restoreCheckpoint(): Promise<void> {
    return readOnly();
  }

  deleteCheckpoint(): Promise<void> {
    return readOnly();
  }

  private _isDisposed = false;
  private _fileChanged = new Signal<this, Contents.IChangedArgs>(this);
}

function parse(localPath: string): { jobId: string; name: string } {
  const [jobId, ...rest] = localPath.split('/');
  if (!jobId || !rest.length) {
    throw new Error(`Not a job's notebook: ${localPath}`);
  }
  return { jobId, name: rest.join('/') };
}

function readOnly(): Promise<never> {
  return Promise.reject(
    new Error("A job's executed notebook is read-only. Download it (File > Download) to keep a copy.")
  );
}
