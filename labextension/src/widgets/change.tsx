/**
 * The change dialog: a queued job's GPUs, run times, deadline, name, team and the jobs it runs
 * after, changed in place (it keeps its id, its files and the jobs waiting for it). It stays
 * open with the server's message when the server refuses the change.
 */

import { Dialog } from '@jupyterlab/apputils';
import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { E31Api, errorText } from '../model/api';
import { IChangeForm, TextField, changeForm, updateRequest } from '../model/change';
import { afterChoices } from '../model/form';
import { IJob } from '../model/types';
import { ActingDialog, AfterField, Field } from './common';

/** Open the dialog; resolves with the changed job, or null when the user cancels. `jobs`: the
 * user's jobs, among which the active ones (but this one) may be ticked to run after; those it
 * runs after already are listed too, ended or not. */
export async function showChangeDialog(api: E31Api, job: IJob, jobs: IJob[] = []): Promise<IJob | null> {
  const others = jobs.filter(other => other.id !== job.id);
  const body = new ChangeForm(api, job, afterChoices(others, job.request.after ?? []));
  const dialog = new ActingDialog<IJob>(
    () => body.save(),
    () => body.saved !== null,
    {
      title: `Change “${job.name}”`,
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Change job' })],
      focusNodeSelector: 'input[name="gpus"]'
    }
  );
  dialog.addClass('e31-ChangeDialog');
  const result = await dialog.launch();
  return result.button.accept ? body.saved : null;
}

class ChangeForm extends ReactWidget {
  constructor(
    private readonly api: E31Api,
    private readonly job: IJob,
    private readonly afterChoices: IJob[]
  ) {
    super();
    this.addClass('e31-ChangeForm');
    this._original = changeForm(job);
    this._form = { ...this._original };
    api.gpus().then(
      pool => {
        this._inventory = pool.total;
      },
      () => undefined
    );
  }

  /** The job as the server answered the change (the job unchanged when nothing was). */
  saved: IJob | null = null;

  getValue(): IJob | null {
    return this.saved;
  }

  /** Send the changes; on refusal show why and keep the dialog open. */
  async save(): Promise<void> {
    const built = updateRequest(this._form, this._original, this._inventory);
    this._fieldErrors = built.errors;
    this._error = built.request ? null : 'Please correct the fields marked in red.';
    if (built.request && !Object.keys(built.request).length) {
      this.saved = this.job; // nothing changed
    } else if (built.request) {
      try {
        this.saved = await this.api.update(this.job.id, built.request);
      } catch (error) {
        this._error = errorText(error);
      }
    }
    this.update();
  }

  render(): JSX.Element {
    const text = (field: TextField, label: string, hint: string) => (
      <Field label={label} error={this._fieldErrors[field]} hint={hint}>
        <input
          className="jp-mod-styled"
          name={field}
          value={this._form[field]}
          spellCheck={false}
          onChange={e => {
            this._form = { ...this._form, [field]: e.target.value };
            this.update();
          }}
        />
      </Field>
    );
    return (
      <div className="e31-ChangeForm-body">
        <p className="e31-Muted">
          It keeps its id, its files and the jobs that wait for it, and takes its place in line anew.
        </p>
        {this._error ? (
          <div className="e31-Error e31-ChangeForm-error" role="alert">
            {this._error}
          </div>
        ) : null}
        {text('gpus', 'GPUs', '0 for a CPU-only job')}
        {text('maxRuntime', 'Max run time', "e.g. 2h, 90m; empty: the queue's default; the job is stopped after it")}
        {text('expectedRuntime', 'Expected run time', 'what it will likely take; empty: none')}
        {text('deadline', 'Deadline', 'e.g. +6h, 08:00, 8am, tomorrow 18:00, 2025-01-31T18:00; empty: none')}
        {text('name', 'Name', '')}
        {text('team', 'Team', 'who is charged for its GPU-hours')}
        <AfterField
          choices={this.afterChoices}
          after={this._form.after}
          onChange={after => {
            this._form = { ...this._form, after };
            this.update();
          }}
        />
      </div>
    );
  }

  private _form: IChangeForm;
  private readonly _original: IChangeForm;
  private _inventory: number | null = null;
  private _error: string | null = null;
  private _fieldErrors: Record<string, string> = {};
}
