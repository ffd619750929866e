/**
 * The e31 REST API's nouns, as `e31_jupyter/server/openapi.yaml` describes them.
 */

export type JobState = 'queued' | 'running' | 'suspended' | 'succeeded' | 'failed' | 'cancelled' | 'expired';

export const ALL_STATES: ReadonlyArray<JobState> = [
  'queued',
  'running',
  'suspended',
  'succeeded',
  'failed',
  'cancelled',
  'expired'
];

/**
 * States a job has stopped in: it leaves them only when a failed or suspended one is resumed
 * (back to queued), or a suspended one is cancelled. None of them holds GPUs.
 */
export const FINAL_STATES: ReadonlySet<JobState> = new Set<JobState>([
  'suspended',
  'succeeded',
  'failed',
  'cancelled',
  'expired'
]);

/** The states a job with a checkpoint can be resumed from. */
export const RESUMABLE_STATES: ReadonlySet<JobState> = new Set<JobState>(['failed', 'suspended']);

/** Queued or running: it waits for GPUs or holds them. */
export function isActive(job: { state: JobState }): boolean {
  return job.state === 'queued' || job.state === 'running';
}

export function isFinal(job: { state: JobState }): boolean {
  return FINAL_STATES.has(job.state);
}

/** Whether a cancel can still end it: while it waits, runs, or is suspended (then it is not resumed). */
export function isCancellable(job: { state: JobState }): boolean {
  return isActive(job) || job.state === 'suspended';
}

/** Whether it can be resumed from its last checkpoint: it failed or was suspended, and saved one. */
export function isResumable(job: { state: JobState; last_checkpoint?: ICheckpoint | null }): boolean {
  return RESUMABLE_STATES.has(job.state) && !!job.last_checkpoint;
}

/**
 * A stop under way of a running job, as its reason says ("suspending: asked by ada; ...",
 * "cancelling: cancelled by ada"); null when none is.
 */
export function stopUnderWay(job: { state: JobState; reason: string | null }): 'suspending' | 'cancelling' | null {
  if (job.state !== 'running' || !job.reason) {
    return null;
  }
  return job.reason.startsWith('suspending') ? 'suspending' : job.reason.startsWith('cancelling') ? 'cancelling' : null;
}

export interface IUsage {
  gpu_seconds: number;
  gpu_hours: number;
  cost: number;
  currency?: string;
  /** Utilisation-weighted GPU-hours (meter readings only); null where no telemetry was taken. */
  used_gpu_hours?: number | null;
}

/** One sample of a job's GPUs together: [epoch seconds, mean SM utilisation %, memory bytes, power W]. */
export type GpuUsePoint = [number, number | null, number | null, number | null];

/** The warning given when granted GPUs stayed nearly idle for long. */
export interface IGpuIdle {
  devices: string[];
  since: string;
  message: string;
}

/** A GPU the queue took back from a running job because it was idle. */
export interface IGpuReturned {
  device: string;
  at: string;
}

/**
 * What a job's GPUs did, read through NVML. Where no reading could be taken, `available` is
 * false, `why_absent` says why and every figure is null (never zero).
 */
export interface IGpuUse {
  available: boolean;
  why_absent: string | null;
  sample_s?: number | null;
  series: GpuUsePoint[];
  util_mean: number | null;
  util_peak: number | null;
  memory_peak_bytes: number | null;
  power_peak_w: number | null;
  used_gpu_hours: number | null;
  held_gpu_hours: number;
  idle?: IGpuIdle | null;
  returned?: IGpuReturned[];
}

export interface IFilesDeleted {
  at: string;
  by: string;
  bytes: number;
}

export interface IJob {
  id: string;
  name: string;
  owner: string;
  team: string | null;
  state: JobState;
  reason: string | null;
  /** 1 for the next job to start; null unless queued. */
  queue_position: number | null;
  /** When a queued job is expected to start (the policy run forward); null when not forecast. */
  expected_start?: string | null;
  /** When a queued or running job is expected to end; null when not known. */
  expected_end?: string | null;
  /** Whether the forecast expects the queue to give up on it before it starts (deadline out of reach). */
  expected_to_expire?: boolean;
  /** Why a queued job is not starting now although GPUs it would fit on are free; null otherwise. */
  held_back?: string | null;
  /** The jobs a queued job still waits for (it runs only once they have succeeded). */
  waiting_for?: string[];
  request: {
    gpus: number;
    max_runtime_s: number | null;
    expected_runtime_s: number | null;
    deadline: string | null;
    /** The jobs it runs after. */
    after?: string[];
    /** Whether it saves checkpoints, so that it can be resumed once it failed, and be suspended. */
    checkpoint?: boolean;
  };
  /** Device ids granted; empty unless the job ran. */
  gpus: string[];
  meter: IUsage;
  progress: {
    cells_done: number;
    cells_total: number | null;
    current_cell?: number | null;
    /** The last line the job printed ("epoch 7/12"), while it runs; null when none. */
    last_line?: string | null;
  };
  submitted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  work?: {
    notebook?: string | null;
    parameters?: Record<string, unknown>;
    kernel?: string | null;
    /** The files or folders copied into the job at submit. */
    data?: string[];
  };
  output?: {
    files?: string[];
    reports?: string[];
  };
  files_count?: number;
  /** The names a cell's job handed back (empty for a notebook's job). */
  values?: string[];
  /** When and by whom the job's files were deleted (the record stays); null while they are kept. */
  files_deleted?: IFilesDeleted | null;
  /** Its last checkpoint (it can be resumed from there); null before the first, and while queued. */
  last_checkpoint?: ICheckpoint | null;
  /** A resumed job's earlier runs, oldest first; empty for a job that ran at most once. */
  attempts?: IAttempt[];
  /** What its GPUs did; null when it never held any (and from a server without telemetry). */
  gpu_use?: IGpuUse | null;
}

export interface ICheckpoint {
  /** The cell it follows, 0-based (papermill's injected parameters cell counted). */
  after_cell: number;
  saved_at: string;
  bytes: number;
  /** The variables it could not save (an open file, a lock), by name, with why. */
  cannot_save: Record<string, string>;
}

/** One earlier run of a resumed job: its hold of GPUs and how it ended. */
export interface IAttempt {
  started_at: string | null;
  finished_at: string | null;
  gpus_released_at: string | null;
  gpus: string[];
  state: JobState;
  reason: string;
}

export interface ITransition {
  at: string;
  from: JobState | null;
  to: JobState;
  reason: string | null;
}

export interface IJobDetail extends IJob {
  transitions: ITransition[];
}

export interface ISubmittedJob extends IJob {
  warnings: string[];
}

/** What submitting a request now would give (POST /check); nothing was submitted. */
export interface ISubmitCheck {
  submitted: false;
  name: string;
  /** 1 = next; null where a cluster scheduler (Slurm) decides. */
  queue_position: number | null;
  expected_start: string | null;
  expected_end: string | null;
  expected_to_expire: boolean;
  held_back?: string | null;
  waiting_for?: string[];
  warnings: string[];
}

export interface ISubmitRequest {
  path?: string;
  notebook?: unknown;
  notebook_name?: string;
  /** The folder `notebook` is saved in, relative to the server's root. */
  folder?: string;
  parameters?: Record<string, unknown>;
  /** Files or folders copied into the job, relative to the server's root or absolute. */
  data?: string[];
  gpus?: number;
  max_runtime?: string | number;
  expected_runtime?: string | number;
  deadline?: string;
  name?: string;
  team?: string;
  /** The kernel to run it on instead of the one the notebook names (papermill's -k). */
  kernel?: string;
  outputs?: string[];
  reports?: string[];
  /** Ids of jobs that must all succeed before this one starts. */
  after?: string[];
  /** Save checkpoints, so that it can be resumed once it failed; left out: the queue's default. */
  checkpoint?: boolean;
}

/** What `POST /jobs/{id}/resubmit` takes: changes to the original job's request. */
export type IResubmitRequest = Omit<ISubmitRequest, 'path' | 'notebook' | 'notebook_name' | 'folder' | 'data'>;

/** What `POST /jobs/{id}/resume` takes: changes to a failed job's request for the runs to come. */
export type IResumeRequest = Pick<ISubmitRequest, 'gpus' | 'max_runtime' | 'expected_runtime' | 'deadline'>;

/** What to change in a queued job (PATCH /jobs/{id}); null clears a field (the limit: the queue's default). */
export interface IUpdateRequest {
  gpus?: number;
  max_runtime?: string | null;
  expected_runtime?: string | null;
  deadline?: string | null;
  name?: string;
  team?: string;
  /** The jobs it runs after, instead of those it named before; [] for none. */
  after?: string[];
}

export interface IFileEntry {
  path: string;
  size: number;
}

/** A value a cell's job handed back: ``%e31 collect`` brings it into a kernel. */
export interface IValueEntry {
  name: string;
  /** As module.Class; builtins by name ("int"); "module" for a module the cell imported. */
  type: string;
  /** Bytes written for it (0 when skipped, and for a module). */
  size: number;
  /** Why it was not handed back (it could not be pickled); null when it was. */
  skipped?: string | null;
  /** For a module: its name, imported again when collected. */
  module?: string | null;
}

export interface ILogChunk {
  text: string;
  offset: number;
  final: boolean;
}

export interface IMeterReport extends IUsage {
  since: string;
  until: string;
  currency: string;
  by_user: Record<string, IUsage>;
  by_team: Record<string, IUsage>;
  /** Why some readings' used GPU-hours are null; null when all were measured. */
  used_why_absent?: string | null;
}

/** A process on a GPU that no job of the queue started. */
export interface IOutsideProcess {
  pid: number;
  user: string | null;
  memory_bytes: number | null;
}

/** A GPU's latest NVML reading. */
export interface IGpuReading {
  util: number | null;
  memory_used_bytes: number | null;
  memory_total_bytes: number | null;
  power_w: number | null;
}

export interface IGpu {
  id: string;
  busy?: boolean;
  job: string | null;
  job_name: string | null;
  owner: string | null;
  /** Used by processes the queue did not start: it is not handed out meanwhile. */
  busy_outside?: boolean;
  outside?: IOutsideProcess[];
  reading?: IGpuReading | null;
}

export interface IGpuInventory {
  gpus: IGpu[];
  total: number;
  free: number;
  queued: number;
  running: number;
  source: 'configured' | 'nvml';
  telemetry?: { available: boolean; why_absent: string | null };
}

export interface IServerInfo {
  version: string;
  /** The name jobs are owned by for this caller. */
  user?: string;
  admin?: boolean;
  /** How the server's job events name the caller as a job's owner. */
  events_key?: string;
  /** What one GPU-hour costs (an older server does not say). */
  gpu_hour_rate?: number;
  currency?: string;
}
