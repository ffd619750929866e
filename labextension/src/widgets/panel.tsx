/**
 * The jobs panel in the left sidebar: the GPU pool, the user's jobs with their state, place in
 * line, live meter and progress, a filter by state, and the meter chart.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { IDisposableLike, JobFilter, JobsModel } from '../model/jobs';
import {
  STATE_LABELS,
  formatGpuHours,
  formatTime,
  formatTimestamp,
  gpuList,
  jobSummary,
  sweepName
} from '../model/format';
import { ALL_STATES, IGpuInventory, IJob, isCancellable } from '../model/types';
import { ProgressBar, StateBadge, useTicker } from './common';
import { MeterView } from './meterchart';

export interface IPanelActions {
  submit(): void;
  openJob(id: string): void;
  cancel(job: IJob): void;
}

type Tab = 'jobs' | 'meter';

export class JobsPanel extends ReactWidget {
  constructor(
    private readonly model: JobsModel,
    private readonly actions: IPanelActions
  ) {
    super();
    this.id = 'e31-jobs-panel';
    this.addClass('e31-Panel');
    this.title.caption = 'GPU jobs';
    model.changed.connect(this._onModelChanged, this);
  }

  /** Show the jobs list or the meter. */
  showTab(tab: Tab): void {
    this._tab = tab;
    this.update();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._watch();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this._watch();
    }
  }

  protected onBeforeHide(msg: Message): void {
    this._unwatch();
    super.onBeforeHide(msg);
  }

  protected onBeforeDetach(msg: Message): void {
    this._unwatch();
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    this._unwatch();
    this.model.changed.disconnect(this._onModelChanged, this);
    super.dispose();
  }

  render(): JSX.Element {
    return (
      <PanelView
        model={this.model}
        actions={this.actions}
        tab={this._tab}
        onTab={tab => this.showTab(tab)}
        version={this._version}
        visible={this._watching !== null}
      />
    );
  }

  private _onModelChanged(): void {
    this._version++;
    if (this.isVisible) {
      this.update();
    }
  }

  private _watch(): void {
    if (!this._watching) {
      this._watching = this.model.watch({ pool: true });
      this.update();
    }
  }

  private _unwatch(): void {
    this._watching?.dispose();
    this._watching = null;
  }

  private _tab: Tab = 'jobs';
  private _version = 0;
  private _watching: IDisposableLike | null = null;
}

const FILTERS: JobFilter[] = ['all', 'active', ...ALL_STATES];

function PanelView(props: {
  model: JobsModel;
  actions: IPanelActions;
  tab: Tab;
  onTab: (tab: Tab) => void;
  version: number;
  visible: boolean;
}): JSX.Element {
  const { model, actions } = props;
  const [filter, setFilter] = React.useState<JobFilter>('all');
  const [everyone, setEveryone] = React.useState(false);
  const running = model.jobs.some(j => j.state === 'running');
  const now = useTicker(props.visible && (running || model.hasActive));
  const counts = model.countsByFilter(model.shownJobs(everyone));
  const jobs = model.filter(filter, everyone);
  return (
    <div className="e31-Panel-body">
      <header className="e31-Panel-header">
        <h2 className="e31-Panel-title">GPU jobs</h2>
        <button
          className="jp-Button jp-mod-styled jp-mod-accept e31-Panel-submit"
          onClick={() => actions.submit()}
          title="Submit a notebook as a GPU job"
        >
          Submit…
        </button>
      </header>
      <Pool pool={model.pool} />
      <div className="e31-Tabs" role="tablist">
        {(['jobs', 'meter'] as Tab[]).map(tab => (
          <button
            key={tab}
            role="tab"
            aria-selected={props.tab === tab}
            className={`e31-Tab${props.tab === tab ? ' e31-mod-selected' : ''}`}
            onClick={() => props.onTab(tab)}
          >
            {tab === 'jobs' ? 'Jobs' : 'Meter'}
          </button>
        ))}
      </div>
      {model.error ? <div className="e31-Error">{model.error}</div> : null}
      {props.tab === 'meter' ? (
        <MeterView api={model.api} version={props.version} />
      ) : (
        <>
          <div className="e31-Filters" role="radiogroup" aria-label="Filter jobs by state">
            {FILTERS.filter(f => f === 'all' || f === 'active' || counts[f] || filter === f).map(f => (
              <button
                key={f}
                role="radio"
                aria-checked={filter === f}
                data-filter={f}
                className={`e31-Chip${filter === f ? ' e31-mod-selected' : ''}`}
                onClick={() => setFilter(f)}
              >
                {f === 'all' ? 'All' : f === 'active' ? 'Active' : STATE_LABELS[f]}
                <span className="e31-Chip-count">{counts[f] ?? 0}</span>
              </button>
            ))}
            {model.isAdmin ? (
              <label className="e31-Everyone" title="As an admin you may see everyone's jobs">
                <input type="checkbox" checked={everyone} onChange={e => setEveryone(e.target.checked)} />
                everyone
              </label>
            ) : null}
          </div>
          {!model.loaded && !model.error ? (
            <div className="e31-Empty">Loading jobs…</div>
          ) : jobs.length ? (
            <ul className="e31-JobList">
              {jobs.map(job => (
                <JobRow key={job.id} job={job} model={model} actions={actions} now={now} showOwner={everyone} />
              ))}
            </ul>
          ) : (
            <div className="e31-Empty">
              {filter === 'all' ? (
                <>
                  <p>No jobs yet.</p>
                  <p>
                    Submit a notebook from its toolbar, from the file browser's context menu, or with the command
                    “Submit Notebook as GPU Job”. It waits in the queue for free GPUs, runs unattended, and its results
                    wait here.
                  </p>
                </>
              ) : (
                <p>No {filter === 'active' ? 'active' : STATE_LABELS[filter].toLowerCase()} jobs.</p>
              )}
            </div>
          )}
        </>
      )}
    </div>
  );
}

function Pool(props: { pool: IGpuInventory | null }): JSX.Element | null {
  const { pool } = props;
  if (!pool) {
    return null;
  }
  return (
    <div
      className="e31-Pool"
      title={pool.gpus
        .map(g => `GPU ${g.id}: ${g.busy ? `busy${g.job_name ? ` (${g.job_name})` : ''}` : 'free'}`)
        .join('\n')}
    >
      <span className="e31-Pool-gpus">
        {pool.gpus.map(g => (
          <span key={g.id} className={`e31-Pool-gpu${g.busy ? ' e31-mod-busy' : ''}`} />
        ))}
      </span>
      <span className="e31-Pool-text">
        {pool.total === 0
          ? 'No GPUs in this queue'
          : `${pool.free} of ${pool.total} GPU${pool.total === 1 ? '' : 's'} free`}{' '}
        · {pool.running} running · {pool.queued} queued
      </span>
    </div>
  );
}

function JobRow(props: {
  job: IJob;
  model: JobsModel;
  actions: IPanelActions;
  now: number;
  showOwner: boolean;
}): JSX.Element {
  const { job, model, actions, now } = props;
  const hours = model.liveGpuHours(job, now);
  const gpus = job.state === 'running' || job.gpus.length ? job.gpus.length : job.request.gpus;
  const { base, point } = sweepName(job.name);
  return (
    <li
      className={`e31-JobRow e31-mod-${job.state}`}
      data-job-id={job.id}
      data-state={job.state}
      tabIndex={0}
      onClick={() => actions.openJob(job.id)}
      onKeyDown={e => e.key === 'Enter' && actions.openJob(job.id)}
      title={`${job.name} (${job.id})\nsubmitted ${formatTimestamp(job.submitted_at)}${job.reason ? `\n${job.reason}` : ''}`}
    >
      <div className="e31-JobRow-top">
        <StateBadge state={job.state} />
        <span className="e31-JobRow-name">{base}</span>
        {job.state === 'queued' && job.queue_position ? (
          <span className="e31-JobRow-position" title="Place in line (1 starts next)">
            #{job.queue_position}
          </span>
        ) : null}
        {isCancellable(job) ? (
          <button
            className="e31-IconButton e31-JobRow-cancel"
            title={`Cancel ${job.name}`}
            aria-label={`Cancel ${job.name}`}
            onClick={e => {
              e.stopPropagation();
              actions.cancel(job);
            }}
          >
            ✕
          </button>
        ) : null}
      </div>
      {point ? <div className="e31-JobRow-point">{point}</div> : null}
      <div className="e31-JobRow-sub">
        <span className="e31-JobRow-summary">{jobSummary(job, now)}</span>
      </div>
      <ProgressBar job={job} />
      <div className="e31-JobRow-meta">
        <span>
          {job.state === 'running' && job.gpus.length ? gpuList(job.gpus) : `${gpus} GPU${gpus === 1 ? '' : 's'}`}
        </span>
        <span className="e31-JobRow-meter" title="GPU-hours held (the meter)">
          {formatGpuHours(hours)}
        </span>
        <span title={formatTimestamp(job.submitted_at)}>{formatTime(job.submitted_at)}</span>
        {props.showOwner ? <span>{job.owner}</span> : null}
        {job.team ? <span className="e31-JobRow-team">{job.team}</span> : null}
      </div>
    </li>
  );
}
