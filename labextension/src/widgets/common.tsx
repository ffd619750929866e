import { Dialog } from '@jupyterlab/apputils';
import { closeIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { afterChoiceText, listedAfterChoices } from '../model/form';
import { STATE_LABELS, progressFraction } from '../model/format';
import { IJob, JobState } from '../model/types';

/** A job's state as a badge, in the state palette's colours (style/palette.css). */
export function StateBadge(props: { state: JobState }): JSX.Element {
  return (
    <span className={`e31-StateBadge e31-mod-${props.state}`} data-state={props.state}>
      <span className="e31-StateBadge-dot" />
      {STATE_LABELS[props.state]}
    </span>
  );
}

/** A small round button with JupyterLab's close icon: to dismiss something, or to cancel a job. */
export function CloseButton(props: { label: string; className?: string; onClick: () => void }): JSX.Element {
  return (
    <button
      className={['e31-IconButton', 'e31-CloseButton', props.className].filter(Boolean).join(' ')}
      title={props.label}
      aria-label={props.label}
      onClick={props.onClick}
    >
      <closeIcon.react tag="span" className="e31-CloseButton-icon" />
    </button>
  );
}

export function ProgressBar(props: { job: IJob }): JSX.Element | null {
  const fraction = progressFraction(props.job);
  const { cells_done, cells_total } = props.job.progress;
  if (props.job.state !== 'running') {
    return null;
  }
  return (
    <div
      className={`e31-Progress${fraction === null ? ' e31-mod-indeterminate' : ''}`}
      role="progressbar"
      aria-valuemin={0}
      aria-valuemax={cells_total ?? undefined}
      aria-valuenow={cells_done}
      title={cells_total ? `${cells_done} of ${cells_total} cells done` : 'starting'}
    >
      <div className="e31-Progress-bar" style={{ width: `${Math.round((fraction ?? 0.3) * 100)}%` }} />
    </div>
  );
}

/** Re-render every `ms` while `active` (for clocks and live meters; no network). */
export function useTicker(active: boolean, ms = 1000): number {
  const [now, setNow] = React.useState(Date.now());
  React.useEffect(() => {
    if (!active) {
      return;
    }
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [active, ms]);
  return now;
}

export const TEAM_COLORS = ['#1976d2', '#f57c00', '#388e3c', '#7b1fa2', '#c2185b', '#0097a7', '#afb42b', '#5d4037'];

export function teamColor(index: number): string {
  return TEAM_COLORS[index % TEAM_COLORS.length];
}

/**
 * A Dialog whose accept button first runs `act`, and closes only once `done()` says it
 * succeeded; otherwise it stays open, its body showing why (nothing typed is lost).
 */
export class ActingDialog<T> extends Dialog<T | null> {
  constructor(
    private readonly act: () => Promise<unknown>,
    private readonly done: () => boolean,
    options: Partial<Dialog.IOptions<T | null>>
  ) {
    super(options);
  }

  resolve(index?: number): void {
    const accept = index === undefined || index === ACCEPT_INDEX;
    if (!accept || this.done()) {
      super.resolve(index);
      return;
    }
    void this.act().then(() => {
      if (this.done()) {
        super.resolve(index);
      }
    });
  }
}

const ACCEPT_INDEX = 1; // buttons: [cancel, accept]

export function Field(props: { label: string; error?: string; hint?: string; children: React.ReactNode }): JSX.Element {
  return (
    <label className={`e31-Field${props.error ? ' e31-mod-invalid' : ''}`}>
      <span className="e31-Field-label">{props.label}</span>
      <span className="e31-Field-control">
        {props.children}
        {props.error ? (
          <span className="e31-Field-error">{props.error}</span>
        ) : props.hint ? (
          <span className="e31-Field-hint">{props.hint}</span>
        ) : null}
      </span>
    </label>
  );
}

/** The jobs a job is to run after, ticked among `choices` (active jobs, newest first). */
export function AfterField(props: {
  choices: IJob[];
  after: string[];
  onChange: (after: string[]) => void;
}): JSX.Element | null {
  const { choices, after, onChange } = props;
  const [all, setAll] = React.useState(false);
  if (!choices.length) {
    return null;
  }
  const listed = listedAfterChoices(choices, after, all);
  return (
    <div className="e31-Field e31-AfterField" role="group" aria-label="Run after">
      <span className="e31-Field-label">Run after</span>
      <span className="e31-Field-control">
        {listed.map(job => (
          <label key={job.id} className="e31-AfterField-choice">
            <input
              type="checkbox"
              name="after"
              value={job.id}
              checked={after.includes(job.id)}
              onChange={e => onChange(e.target.checked ? [...after, job.id] : after.filter(id => id !== job.id))}
            />
            {afterChoiceText(job)}
          </label>
        ))}
        {listed.length < choices.length ? (
          <button type="button" className="e31-LinkButton e31-AfterField-more" onClick={() => setAll(true)}>
            {`Show ${choices.length - listed.length} older active job${choices.length - listed.length === 1 ? '' : 's'}`}
          </button>
        ) : null}
        <span className="e31-Field-hint">optional; it starts only once every job ticked has succeeded</span>
      </span>
    </div>
  );
}
