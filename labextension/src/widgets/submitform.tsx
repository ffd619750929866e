/**
 * The submit dialog: a notebook (or an earlier job) becomes a job. Pinned at its top, the
 * server's forecast of the request as it stands (where the job would wait, what it would cost,
 * what the server would warn of); below, the request, the job, its parameters, and an
 * 'Advanced' section (outputs, data, run after). Run times and deadlines are read as they are
 * typed, with a preview; the dialog submits nothing while a field cannot be read, and stays
 * open with the server's message when the server refuses the request.
 */

import { Dialog } from '@jupyterlab/apputils';
import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { E31Api, errorText } from '../model/api';
import {
  IFormResult,
  ISubmitForm,
  NotebookSource,
  afterChoices,
  initialForm,
  notebookName,
  requestToCheck,
  resubmitRequest,
  submitRequest,
  timeFieldNote
} from '../model/form';
import {
  IRate,
  JobNames,
  checkedRequest,
  costSentence,
  estimateCost,
  forecastSentence,
  jobNames,
  rateFromInfo,
  rateFromUsage
} from '../model/forecastwords';
import { IParameter } from '../model/parameters';
import { gpuName } from '../model/gpuuse';
import { IGpuInventory, IJob, IResubmitRequest, ISubmitCheck, ISubmitRequest, ISubmittedJob } from '../model/types';
import { ActingDialog, AfterField, Field } from './common';

export interface ISubmitDialogOptions {
  api: E31Api;
  source: NotebookSource;
  parameters: IParameter[];
  /** The team and GPU count used last time, to start from. */
  remembered?: { team?: string; gpus?: string };
  /** The caller's jobs as the panel knows them: those still active are offered to run after. */
  jobs?: IJob[];
}

/** Open the dialog; resolves with the submitted job, or null when the user cancels. */
export async function showSubmitDialog(options: ISubmitDialogOptions): Promise<ISubmittedJob | null> {
  const body = new SubmitForm(options);
  const resubmit = options.source.kind === 'job';
  const dialog = new ActingDialog<ISubmittedJob>(
    () => body.submit(),
    () => body.job !== null,
    {
      title: resubmit ? `Resubmit “${notebookTitle(options.source)}”` : 'Submit notebook as a GPU job',
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: resubmit ? 'Resubmit' : 'Submit job' })],
      focusNodeSelector: 'input[name="gpus"]'
    }
  );
  dialog.addClass('e31-SubmitDialog');
  const result = await dialog.launch();
  return result.button.accept ? result.value : null;
}

function notebookTitle(source: NotebookSource): string {
  return source.kind === 'job' ? source.job.name : notebookName(source);
}

const CHECK_DELAY_MS = 400; // after the last change, before the server checks the request
const RATE_WINDOW_MS = 30 * 86400 * 1000; // the meter's usage the rate is read from

/** The server's check of the request as it stands, or why it would refuse it. */
type Outlook = { check: ISubmitCheck } | { refused: string } | null;

class SubmitForm extends ReactWidget {
  constructor(private readonly options: ISubmitDialogOptions) {
    super();
    this.addClass('e31-SubmitForm');
    this._form = initialForm(options.source, options.parameters, options.remembered);
    this._original = JSON.parse(JSON.stringify(this._form));
    this._afterChoices = afterChoices(options.jobs ?? []);
    this._names = jobNames(options.jobs ?? []);
    this._rate = rateFromUsage((options.jobs ?? []).map(job => job.meter));
    this._lookAtPool();
    this._lookAtRate();
    this._checkSoon();
  }

  dispose(): void {
    window.clearTimeout(this._checkTimer);
    super.dispose();
  }

  /** The submitted job, once the server accepted it. */
  job: ISubmittedJob | null = null;

  getValue(): ISubmittedJob | null {
    return this.job;
  }

  /** Send the request; while a field is invalid, or on refusal, resolve null (the dialog stays open). */
  async submit(): Promise<ISubmittedJob | null> {
    if (this._busy) {
      return null;
    }
    const { request } = this._built();
    this._error = request ? null : 'Please correct the fields marked in red.';
    if (!request) {
      this.update();
      return null;
    }
    this._busy = true;
    this.update();
    try {
      this.job = await this._send(request);
      return this.job;
    } catch (error) {
      this._error = errorText(error);
      return null;
    } finally {
      this._busy = false;
      this.update();
    }
  }

  render(): JSX.Element {
    const built = this._built();
    return (
      <FormView
        source={this.options.source}
        parameters={this.options.parameters}
        form={this._form}
        pool={this._pool}
        afterChoices={this._afterChoices}
        error={this._error}
        fieldErrors={built.errors}
        busy={this._busy}
        outlook={built.request ? this._outlook : null}
        names={this._names}
        rate={this._rate}
        onChange={change => {
          this._form = { ...this._form, ...change };
          this._error = null; // the server's word was on the request before this change
          this._checkSoon();
          this.update();
        }}
      />
    );
  }

  private _send(request: ISubmitRequest | IResubmitRequest): Promise<ISubmittedJob> {
    const { api, source } = this.options;
    return source.kind === 'job' ? api.resubmit(source.job.id, request) : api.submit(request as ISubmitRequest);
  }

  /** The request the form stands for: a new job's, or a resubmit's changes. */
  private _built(): IFormResult<ISubmitRequest | IResubmitRequest> {
    const { source, parameters } = this.options;
    const inventory = this._pool ? this._pool.total : null;
    return source.kind === 'job'
      ? resubmitRequest(this._form, this._original, parameters, inventory)
      : submitRequest(this._form, source, parameters, inventory);
  }

  /** The server's check of the form as it stands; null when the form itself is not valid. */
  private _checkRequest(): Promise<ISubmitCheck> | null {
    const { api, source } = this.options;
    const { request } = this._built();
    if (!request) {
      return null;
    }
    return source.kind === 'job'
      ? api.checkResubmit(source.job.id, request)
      : api.check(requestToCheck(request as ISubmitRequest));
  }

  private _lookAtPool(): void {
    this.options.api.gpus().then(
      pool => {
        this._pool = pool;
        this.update();
      },
      () => undefined
    );
  }

  /** The rate the server charges; from an older server that does not say, the meter's last month. */
  private _lookAtRate(): void {
    this.options.api.info().then(
      info => {
        const rate = rateFromInfo(info);
        if (rate) {
          this._rate = rate;
          this.update();
        } else {
          this._lookAtMeter();
        }
      },
      () => this._lookAtMeter()
    );
  }

  /** The rate from the meter's last month, where the caller's own jobs did not tell it. */
  private _lookAtMeter(): void {
    const now = new Date();
    this.options.api.meter(new Date(now.getTime() - RATE_WINDOW_MS), now).then(
      report => {
        this._rate = rateFromUsage([report, ...(this.options.jobs ?? []).map(job => job.meter)]) ?? this._rate;
        this.update();
      },
      () => undefined
    );
  }

  /** Check the request once the user pauses. */
  private _checkSoon(): void {
    window.clearTimeout(this._checkTimer);
    this._checkTimer = window.setTimeout(() => void this._check(), CHECK_DELAY_MS);
  }

  private async _check(): Promise<void> {
    if (this.isDisposed) {
      return;
    }
    const asked = ++this._checks;
    let outlook: Outlook = null;
    try {
      const check = this._checkRequest();
      outlook = check ? { check: await check } : null;
    } catch (error) {
      outlook = { refused: errorText(error) };
    }
    if (asked === this._checks && !this.isDisposed) {
      this._outlook = outlook; // only the answer to the latest request
      this.update();
    }
  }

  private _form: ISubmitForm;
  private readonly _original: ISubmitForm;
  private _pool: IGpuInventory | null = null;
  private readonly _afterChoices: IJob[];
  private readonly _names: JobNames;
  private _rate: IRate | null;
  private _error: string | null = null;
  private _busy = false;
  private _outlook: Outlook = null;
  private _checks = 0;
  private _checkTimer = 0;
}

interface IFormViewProps {
  source: NotebookSource;
  parameters: IParameter[];
  form: ISubmitForm;
  pool: IGpuInventory | null;
  afterChoices: IJob[];
  error: string | null;
  fieldErrors: Record<string, string>;
  busy: boolean;
  outlook: Outlook;
  names: JobNames;
  rate: IRate | null;
  onChange: (change: Partial<ISubmitForm>) => void;
}

function FormView(props: IFormViewProps): JSX.Element {
  const invalid = Object.keys(props.fieldErrors).length > 0;
  const ref = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    acceptButton(ref.current)?.toggleAttribute('disabled', invalid || props.busy);
  });
  return (
    <div className="e31-SubmitForm-body" ref={ref}>
      <div className="e31-SubmitForm-pinned">
        <SourceLine source={props.source} />
        <Forecast {...props} invalid={invalid} />
      </div>
      <PoolLine pool={props.pool} />
      <RequestGroup {...props} />
      <JobGroup {...props} />
      <ParametersGroup {...props} />
      <AdvancedSection {...props} />
    </div>
  );
}

/** The dialog's accept button, to be disabled while a field is invalid. */
function acceptButton(body: HTMLElement | null): HTMLButtonElement | null {
  return body?.closest('.jp-Dialog')?.querySelector<HTMLButtonElement>('.jp-Dialog-button.jp-mod-accept') ?? null;
}

function SourceLine(props: { source: NotebookSource }): JSX.Element {
  const { source } = props;
  return (
    <div className="e31-SubmitForm-source">
      <span className="e31-SubmitForm-notebook">{notebookName(source)}</span>
      <span className="e31-Muted">
        {source.kind === 'path'
          ? source.path
          : source.kind === 'content'
            ? 'as it is open now, unsaved changes included'
            : `again, like job ${source.job.id}`}
      </span>
    </div>
  );
}

/** The pinned forecast: the server's message once it refused, else its check with the cost. */
function Forecast(props: IFormViewProps & { invalid: boolean }): JSX.Element {
  if (props.error) {
    return (
      <div className="e31-Error e31-SubmitForm-error" role="alert">
        {props.error}
      </div>
    );
  }
  if (props.busy) {
    return <div className="e31-SubmitForm-busy">Submitting…</div>;
  }
  if (props.invalid) {
    return (
      <div className="e31-SubmitForm-pending e31-Muted">Correct the fields marked in red to see the forecast.</div>
    );
  }
  if (!props.outlook) {
    return <div className="e31-SubmitForm-pending e31-Muted">Asking the queue where it would wait…</div>;
  }
  return <OutlookView outlook={props.outlook} names={props.names} rate={props.rate} />;
}

function OutlookView(props: { outlook: NonNullable<Outlook>; names: JobNames; rate: IRate | null }): JSX.Element {
  const { outlook } = props;
  if ('refused' in outlook) {
    return (
      <div className="e31-SubmitForm-outlook e31-mod-refused" role="status">
        The server would refuse this: {outlook.refused}
      </div>
    );
  }
  const request = checkedRequest(outlook.check);
  const estimate = request ? estimateCost(request, props.rate) : null;
  return (
    <div className="e31-SubmitForm-outlook" role="status">
      <div className="e31-SubmitForm-forecast">{forecastSentence(outlook.check, props.names)}</div>
      {estimate ? <div className="e31-SubmitForm-cost">{costSentence(estimate)}</div> : null}
      {outlook.check.warnings.map(warning => (
        <div key={warning} className="e31-SubmitForm-warning">
          {warning}
        </div>
      ))}
    </div>
  );
}

function PoolLine(props: { pool: IGpuInventory | null }): JSX.Element {
  const { pool } = props;
  if (!pool) {
    return <div className="e31-SubmitForm-pool e31-Muted">Looking at the GPU pool…</div>;
  }
  return (
    <div className="e31-SubmitForm-pool">
      <span className="e31-Pool-gpus">
        {pool.gpus.map(g => (
          <span key={g.id} className={`e31-Pool-gpu${g.busy ? ' e31-mod-busy' : ''}`} title={gpuName(g.id)} />
        ))}
      </span>
      <span>
        {pool.total
          ? `${pool.total} GPU${pool.total === 1 ? '' : 's'} in the pool, ${pool.free} free`
          : 'No GPUs in this queue: only 0-GPU jobs run'}{' '}
        · queue: {pool.queued} waiting, {pool.running} running
      </span>
    </div>
  );
}

/** A text field of the form. */
function TextField(props: {
  field: keyof ISubmitForm;
  label: string;
  placeholder: string;
  hint?: string;
  form: ISubmitForm;
  fieldErrors: Record<string, string>;
  onChange: (change: Partial<ISubmitForm>) => void;
}): JSX.Element {
  const { field, form } = props;
  return (
    <Field label={props.label} error={props.fieldErrors[field]} hint={props.hint}>
      <input
        className="jp-mod-styled"
        name={field}
        value={form[field] as string}
        placeholder={props.placeholder}
        spellCheck={false}
        aria-invalid={props.fieldErrors[field] ? true : undefined}
        onChange={e => props.onChange({ [field]: e.target.value })}
      />
    </Field>
  );
}

/** A run time or the deadline, previewed as read ("1h 30m", "Fri 08:00, local") under its field. */
function TimeField(
  props: IFormViewProps & {
    field: 'deadline' | 'maxRuntime' | 'expectedRuntime';
    label: string;
    placeholder: string;
    hint: string;
  }
): JSX.Element {
  const note = timeFieldNote(props.field, props.form[props.field], new Date());
  const preview = note && 'value' in note ? note.value : null;
  const hint = preview ? `${props.field === 'deadline' ? '' : '= '}${preview} · ${props.hint}` : props.hint;
  return <TextField {...props} hint={hint} />;
}

function GpusField(props: IFormViewProps): JSX.Element {
  const { pool, form } = props;
  return (
    <Field
      label="GPUs"
      error={props.fieldErrors.gpus}
      hint={pool ? (pool.total ? `at most ${pool.total}` : 'this queue has no GPUs') : undefined}
    >
      <input
        className="jp-mod-styled e31-Input-narrow"
        name="gpus"
        type="number"
        min={0}
        max={pool ? pool.total : undefined}
        step={1}
        value={form.gpus}
        onChange={e => props.onChange({ gpus: e.target.value })}
      />
    </Field>
  );
}

function RequestGroup(props: IFormViewProps): JSX.Element {
  return (
    <div className="e31-Form-group">
      <h3>Request</h3>
      <GpusField {...props} />
      <TimeField
        {...props}
        field="maxRuntime"
        label="Max run time"
        placeholder="server default, e.g. 90m, 6h, 1d"
        hint="the job is stopped after this long"
      />
      <TimeField
        {...props}
        field="expectedRuntime"
        label="Expected run time"
        placeholder="e.g. 2h"
        hint="optional; helps the queue meet deadlines"
      />
      <TimeField
        {...props}
        field="deadline"
        label="Deadline"
        placeholder="08:00, 8am, tomorrow 18:00, +6h or 2026-12-31T18:00"
        hint="optional; the job expires if it cannot finish by then"
      />
      <CheckpointField {...props} />
    </div>
  );
}

function CheckpointField(props: IFormViewProps): JSX.Element {
  const { form } = props;
  return (
    <Field
      label="Checkpoints"
      hint={
        form.checkpoint
          ? 'if it fails (out of time, lost, a cell raised), Resume on its page continues it'
          : "unticked: the queue's default (usually none)"
      }
    >
      <span className="e31-CheckboxChoice">
        <input
          type="checkbox"
          name="checkpoint"
          checked={form.checkpoint}
          onChange={e => props.onChange({ checkpoint: e.target.checked })}
        />
        Save checkpoints (resume from the last finished cell)
      </span>
    </Field>
  );
}

function JobGroup(props: IFormViewProps): JSX.Element {
  return (
    <div className="e31-Form-group">
      <h3>Job</h3>
      <TextField
        {...props}
        field="name"
        label="Name"
        placeholder={notebookName(props.source).replace(/\.ipynb$/, '')}
      />
      <TextField
        {...props}
        field="team"
        label="Team"
        placeholder="e.g. vision"
        hint="the GPU-hours count towards this team"
      />
      <TextField
        {...props}
        field="kernel"
        label="Kernel"
        placeholder="the notebook's"
        hint="optional; another kernel of this server to run it on"
      />
    </div>
  );
}

function ParametersGroup(props: IFormViewProps): JSX.Element | null {
  const { parameters, form, source } = props;
  if (!parameters.length) {
    return source.kind === 'job' ? null : (
      <p className="e31-Muted e31-SubmitForm-noparams">
        This notebook has no cell tagged <code>parameters</code>; it runs as it is.
      </p>
    );
  }
  return (
    <div className="e31-Form-group e31-SubmitForm-parameters">
      <h3>Parameters</h3>
      {parameters.map(p => (
        <ParameterField
          key={p.name}
          parameter={p}
          value={form.parameters[p.name]}
          error={props.fieldErrors[`parameters.${p.name}`]}
          onChange={value => props.onChange({ parameters: { ...form.parameters, [p.name]: value } })}
        />
      ))}
    </div>
  );
}

function ParameterField(props: {
  parameter: IParameter;
  value: string | boolean | undefined;
  error?: string;
  onChange: (value: string | boolean) => void;
}): JSX.Element {
  const { parameter: p } = props;
  const numeric = p.kind === 'int' || p.kind === 'float';
  const hint = [p.comment, p.kind === 'expression' ? `set in the notebook: ${p.literal}` : `default ${p.literal}`]
    .filter(Boolean)
    .join(' · ');
  return (
    <Field label={p.name} error={props.error} hint={hint}>
      {p.kind === 'bool' ? (
        <input
          type="checkbox"
          name={`param-${p.name}`}
          checked={props.value === true}
          onChange={e => props.onChange(e.target.checked)}
        />
      ) : (
        <input
          className={`jp-mod-styled${numeric ? ' e31-Input-narrow' : ''}`}
          name={`param-${p.name}`}
          data-kind={p.kind}
          value={String(props.value ?? '')}
          disabled={p.kind === 'expression'}
          spellCheck={false}
          inputMode={numeric ? 'decimal' : undefined}
          onChange={e => props.onChange(e.target.value)}
        />
      )}
    </Field>
  );
}

/** Outputs, data and run-after, folded away; open from the start where one is set. */
function AdvancedSection(props: IFormViewProps): JSX.Element {
  const { form, source } = props;
  const [open, setOpen] = React.useState(() => !!(form.outputs.trim() || form.data.trim() || form.after.length));
  const shown = open || !!(props.fieldErrors.outputs || props.fieldErrors.data);
  return (
    <details
      className="e31-Form-group e31-SubmitForm-advanced"
      open={shown}
      onToggle={e => setOpen((e.target as HTMLDetailsElement).open)}
    >
      <summary>Advanced: outputs, data, run after</summary>
      <TextField
        {...props}
        field="outputs"
        label="Outputs"
        placeholder="e.g. model.pt, plots/*.png"
        hint="files to collect; default: every file the job writes"
      />
      {source.kind !== 'job' ? (
        <TextField
          {...props}
          field="data"
          label="Data"
          placeholder="e.g. data, labels.csv"
          hint="files or folders next to the notebook to copy into the job"
        />
      ) : null}
      <AfterField choices={props.afterChoices} after={form.after} onChange={after => props.onChange({ after })} />
    </details>
  );
}
