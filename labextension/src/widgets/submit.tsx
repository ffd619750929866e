/**
 * The submit dialog: a notebook (or an earlier job) becomes a job. It shows the GPU pool and
 * the queue, takes the request and the notebook's parameters, and stays open with the server's
 * message when the server refuses the request. While it is open, the server checks the request
 * as it stands (nothing is submitted): where the job would wait, and what it would warn of.
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
  submitRequest
} from '../model/form';
import { IParameter } from '../model/parameters';
import { outlookText } from '../model/format';
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
      title: resubmit
        ? `Resubmit “${options.source.kind === 'job' ? options.source.job.name : ''}”`
        : 'Submit notebook as a GPU job',
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: resubmit ? 'Resubmit' : 'Submit job' })],
      focusNodeSelector: 'input[name="gpus"]'
    }
  );
  dialog.addClass('e31-SubmitDialog');
  const result = await dialog.launch();
  return result.button.accept ? result.value : null;
}

const CHECK_DELAY_MS = 400; // after the last change, before the server checks the request

/** The server's check of the request as it stands, or why it would refuse it. */
type Outlook = { check: ISubmitCheck } | { refused: string } | null;

class SubmitForm extends ReactWidget {
  constructor(private readonly options: ISubmitDialogOptions) {
    super();
    this.addClass('e31-SubmitForm');
    this._form = initialForm(options.source, options.parameters, options.remembered);
    this._original = JSON.parse(JSON.stringify(this._form));
    this._afterChoices = afterChoices(options.jobs ?? []);
    options.api.gpus().then(
      pool => {
        this._pool = pool;
        this.update();
      },
      () => undefined
    );
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

  /** Send the request; on refusal show why and resolve null (the dialog stays open). */
  async submit(): Promise<ISubmittedJob | null> {
    if (this._busy) {
      return null;
    }
    const { api, source } = this.options;
    const built = this._built();
    this._fieldErrors = built.errors;
    this._error = null;
    if (!built.request) {
      this._error = 'Please correct the fields marked in red.';
      this.update();
      return null;
    }
    this._busy = true;
    this.update();
    try {
      this.job =
        source.kind === 'job' ? await api.resubmit(source.job.id, built.request) : await api.submit(built.request);
      return this.job;
    } catch (error) {
      this._error = errorText(error);
      return null;
    } finally {
      this._busy = false;
      this.update();
    }
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
    return source.kind === 'job' ? api.checkResubmit(source.job.id, request) : api.check(requestToCheck(request));
  }

  render(): JSX.Element {
    return (
      <FormView
        source={this.options.source}
        parameters={this.options.parameters}
        form={this._form}
        pool={this._pool}
        afterChoices={this._afterChoices}
        error={this._error}
        fieldErrors={this._fieldErrors}
        busy={this._busy}
        outlook={this._outlook}
        onChange={change => {
          this._form = { ...this._form, ...change };
          this._checkSoon();
          this.update();
        }}
      />
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
  private _error: string | null = null;
  private _fieldErrors: Record<string, string> = {};
  private _busy = false;
  private _outlook: Outlook = null;
  private _checks = 0;
  private _checkTimer = 0;
}

function FormView(props: {
  source: NotebookSource;
  parameters: IParameter[];
  form: ISubmitForm;
  pool: IGpuInventory | null;
  afterChoices: IJob[];
  error: string | null;
  fieldErrors: Record<string, string>;
  busy: boolean;
  outlook: Outlook;
  onChange: (change: Partial<ISubmitForm>) => void;
}): JSX.Element {
  const { source, parameters, form, pool, fieldErrors, onChange } = props;
  const errorRef = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    errorRef.current?.scrollIntoView({ block: 'nearest' });
  }, [props.error]);
  const text = (field: keyof ISubmitForm, label: string, placeholder: string, hint?: string) => (
    <Field label={label} error={fieldErrors[field]} hint={hint}>
      <input
        className="jp-mod-styled"
        name={field}
        value={form[field] as string}
        placeholder={placeholder}
        spellCheck={false}
        onChange={e => onChange({ [field]: e.target.value })}
      />
    </Field>
  );
  return (
    <div className="e31-SubmitForm-body">
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
      <PoolLine pool={pool} />

      <div className="e31-Form-group">
        <h3>Request</h3>
        <Field
          label="GPUs"
          error={fieldErrors.gpus}
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
            onChange={e => onChange({ gpus: e.target.value })}
          />
        </Field>
        {text(
          'deadline',
          'Deadline',
          '08:00, 8am, tomorrow 18:00, +6h or 2025-01-31T18:00',
          'optional; the job expires if it cannot finish by then'
        )}
        {text('maxRuntime', 'Max run time', 'server default, e.g. 90m, 6h', 'the job is stopped after this long')}
        {text('expectedRuntime', 'Expected run time', 'e.g. 2h', 'optional; helps the queue meet deadlines')}
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
              onChange={e => onChange({ checkpoint: e.target.checked })}
            />
            Save checkpoints (resume from the last finished cell)
          </span>
        </Field>
        <AfterField choices={props.afterChoices} after={form.after} onChange={after => onChange({ after })} />
      </div>

      <div className="e31-Form-group">
        <h3>Job</h3>
        {text('name', 'Name', notebookName(source).replace(/\.ipynb$/, ''))}
        {text('team', 'Team', 'e.g. vision', 'the GPU-hours count towards this team')}
        {text('kernel', 'Kernel', "the notebook's", 'optional; another kernel of this server to run it on')}
        {text(
          'outputs',
          'Outputs',
          'e.g. model.pt, plots/*.png',
          'files to collect; default: every file the job writes'
        )}
        {source.kind !== 'job'
          ? text('data', 'Data', 'e.g. data, labels.csv', 'files or folders next to the notebook to copy into the job')
          : null}
      </div>

      {parameters.length ? (
        <div className="e31-Form-group">
          <h3>Parameters</h3>
          {parameters.map(p => (
            <ParameterField
              key={p.name}
              parameter={p}
              value={form.parameters[p.name]}
              error={fieldErrors[`parameters.${p.name}`]}
              onChange={value => onChange({ parameters: { ...form.parameters, [p.name]: value } })}
            />
          ))}
        </div>
      ) : source.kind !== 'job' ? (
        <p className="e31-Muted e31-SubmitForm-noparams">
          This notebook has no cell tagged <code>parameters</code>; it runs as it is.
        </p>
      ) : null}

      {props.error ? null : <OutlookView outlook={props.outlook} />}
      {props.busy ? <div className="e31-SubmitForm-busy">Submitting…</div> : null}
      {props.error ? (
        <div className="e31-Error e31-SubmitForm-error" role="alert" ref={errorRef}>
          {props.error}
        </div>
      ) : null}
    </div>
  );
}

/** The active jobs to tick: the new job starts only once every one ticked has succeeded. */
function ParameterField(props: {
  parameter: IParameter;
  value: string | boolean | undefined;
  error?: string;
  onChange: (value: string | boolean) => void;
}): JSX.Element {
  const { parameter: p } = props;
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
          className={`jp-mod-styled${p.kind === 'int' || p.kind === 'float' ? ' e31-Input-narrow' : ''}`}
          name={`param-${p.name}`}
          data-kind={p.kind}
          value={String(props.value ?? '')}
          disabled={p.kind === 'expression'}
          spellCheck={false}
          inputMode={p.kind === 'int' || p.kind === 'float' ? 'decimal' : undefined}
          onChange={e => props.onChange(e.target.value)}
        />
      )}
    </Field>
  );
}

function OutlookView(props: { outlook: Outlook }): JSX.Element | null {
  const { outlook } = props;
  if (!outlook) {
    return null;
  }
  if ('refused' in outlook) {
    return (
      <div className="e31-SubmitForm-outlook e31-mod-refused" role="status">
        The server would refuse this: {outlook.refused}
      </div>
    );
  }
  return (
    <div className="e31-SubmitForm-outlook" role="status">
      <div className="e31-SubmitForm-forecast">{outlookText(outlook.check)}</div>
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
          <span key={g.id} className={`e31-Pool-gpu${g.busy ? ' e31-mod-busy' : ''}`} title={`GPU ${g.id}`} />
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
