/**
 * The jobs panel in the left sidebar: the GPU pool, the user's jobs in the queue's order (running;
 * queued in line, with place and expected start; ended, with why, cost and results) with their
 * live meter and progress, a filter by state, and the meter chart.
 */

import { ToolbarButtonComponent, closeIcon, tableRowsIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import {
  IJobSections,
  JobFilter,
  JobsModel,
  costWords,
  expectedStartClock,
  failureReason,
  jobSections,
  resultsPlace
} from '../model/jobs';
import {
  STATE_LABELS,
  formatGpuHours,
  formatTime,
  formatTimestamp,
  gpuList,
  jobSummary,
  sweepName
} from '../model/format';
import { outsideWords, poolGpuWords, readingUtil } from '../model/gpuuse';
import { rovingIndex } from '../model/roving';
import { ALL_STATES, IGpu, IGpuInventory, IJob, isActive, isCancellable } from '../model/types';
import { ProgressBar, StateBadge, useTicker } from './common';
import { MeterView } from './meterchart';
import { WatchingWidget } from './watching';

export interface IPanelActions {
  submit(): void;
  openJob(id: string): void;
  cancel(job: IJob): void;
  /** An ended job's results: its executed notebook, or its page when there is none. */
  openResults(job: IJob): void;
  /** The jobs table in the main area. */
  openTable(): void;
}

type Tab = 'jobs' | 'meter';

export class JobsPanel extends WatchingWidget {
  constructor(
    model: JobsModel,
    private readonly actions: IPanelActions
  ) {
    super(model, { pool: true });
    this.id = 'e31-jobs-panel';
    this.addClass('e31-Panel');
    this.title.caption = 'GPU jobs';
  }

  /** Show the jobs list or the meter. */
  showTab(tab: Tab): void {
    this._tab = tab;
    this.update();
  }

  render(): JSX.Element {
    return (
      <PanelView
        model={this.model}
        actions={this.actions}
        tab={this._tab}
        onTab={tab => this.showTab(tab)}
        version={this.version}
        visible={this.watching}
      />
    );
  }

  private _tab: Tab = 'jobs';
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
        <span className="e31-Panel-headerActions">
          <ToolbarButtonComponent
            className="e31-Panel-table"
            icon={tableRowsIcon}
            tooltip="Open the jobs table: sort, select and act on many jobs"
            onClick={() => actions.openTable()}
          />
          <button
            className="jp-Button jp-mod-styled jp-mod-accept e31-Panel-submit"
            onClick={() => actions.submit()}
            title="Submit a notebook as a GPU job"
          >
            Submit…
          </button>
        </span>
      </header>
      <Pool pool={model.pool} />
      <Tabs tab={props.tab} onTab={props.onTab} />
      {model.error ? <div className="e31-Error">{model.error}</div> : null}
      {props.tab === 'meter' ? (
        <MeterView api={model.api} version={props.version} />
      ) : (
        <>
          <div className="e31-Filters">
            <FilterChips filter={filter} counts={counts} onFilter={setFilter} />
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
            <JobSections jobs={jobs} model={model} actions={actions} now={now} showOwner={everyone} />
          ) : (
            <NoJobs filter={filter} />
          )}
        </>
      )}
    </div>
  );
}

const TABS: Tab[] = ['jobs', 'meter'];

/** The Jobs and Meter tabs: one takes the Tab key, the arrow keys move between them. */
function Tabs(props: { tab: Tab; onTab: (tab: Tab) => void }): JSX.Element {
  return (
    <div className="e31-Tabs" role="tablist" aria-label="Jobs or meter">
      {TABS.map((tab, i) => (
        <button
          key={tab}
          role="tab"
          aria-selected={props.tab === tab}
          tabIndex={props.tab === tab ? 0 : -1}
          className={`e31-Tab${props.tab === tab ? ' e31-mod-selected' : ''}`}
          onClick={() => props.onTab(tab)}
          onKeyDown={e => roveTo(e, i, TABS.length, next => props.onTab(TABS[next]))}
        >
          {tab === 'jobs' ? 'Jobs' : 'Meter'}
        </button>
      ))}
    </div>
  );
}

/** The filters by state: a radio group, the arrow keys move (and filter). */
function FilterChips(props: {
  filter: JobFilter;
  counts: Record<JobFilter, number>;
  onFilter: (filter: JobFilter) => void;
}): JSX.Element {
  const { filter, counts } = props;
  const shown = FILTERS.filter(f => f === 'all' || f === 'active' || counts[f] || filter === f);
  return (
    <span className="e31-FilterChips" role="radiogroup" aria-label="Filter jobs by state">
      {shown.map((f, i) => (
        <button
          key={f}
          role="radio"
          aria-checked={filter === f}
          tabIndex={filter === f ? 0 : -1}
          data-filter={f}
          className={`e31-Chip${filter === f ? ' e31-mod-selected' : ''}`}
          onClick={() => props.onFilter(f)}
          onKeyDown={e => roveTo(e, i, shown.length, next => props.onFilter(shown[next]))}
        >
          {f === 'all' ? 'All' : f === 'active' ? 'Active' : STATE_LABELS[f]}
          <span className="e31-Chip-count">{counts[f] ?? 0}</span>
        </button>
      ))}
    </span>
  );
}

/** An arrow key on one of a row of tabs or chips: select the next one and move the focus there. */
function roveTo(
  event: React.KeyboardEvent<HTMLElement>,
  index: number,
  count: number,
  select: (next: number) => void
): void {
  const next = rovingIndex(event.key, index, count);
  if (next === null) {
    return;
  }
  event.preventDefault();
  const role = event.currentTarget.getAttribute('role');
  const siblings = event.currentTarget.parentElement?.querySelectorAll<HTMLElement>(`[role="${role}"]`);
  select(next);
  siblings?.[next]?.focus();
}

function NoJobs(props: { filter: JobFilter }): JSX.Element {
  const { filter } = props;
  return (
    <div className="e31-Empty">
      {filter === 'all' ? (
        <>
          <p>No jobs yet.</p>
          <p>
            Submit a notebook from its toolbar, from the file browser's context menu, or with the command “Submit
            Notebook as GPU Job”. It waits in the queue for free GPUs, runs unattended, and its results wait here.
          </p>
        </>
      ) : (
        <p>No {filter === 'active' ? 'active' : STATE_LABELS[filter].toLowerCase()} jobs.</p>
      )}
    </div>
  );
}

const SECTION_TITLES: Record<keyof IJobSections, string> = {
  running: 'Running',
  queued: 'Queued',
  ended: 'Ended'
};

/** The jobs as the queue has them: running; queued in line order; ended, the newest first. */
function JobSections(props: {
  jobs: IJob[];
  model: JobsModel;
  actions: IPanelActions;
  now: number;
  showOwner: boolean;
}): JSX.Element {
  const sections = jobSections(props.jobs);
  const keys = (Object.keys(SECTION_TITLES) as (keyof IJobSections)[]).filter(key => sections[key].length);
  return (
    <>
      {keys.map(key => (
        <section key={key} className="e31-JobSection" data-section={key} aria-labelledby={`e31-JobSection-${key}`}>
          <h3 className="e31-JobSection-title" id={`e31-JobSection-${key}`}>
            {SECTION_TITLES[key]}
            <span className="e31-JobSection-count">{sections[key].length}</span>
          </h3>
          <ul className="e31-JobList">
            {sections[key].map(job => (
              <JobRow
                key={job.id}
                job={job}
                model={props.model}
                actions={props.actions}
                now={props.now}
                showOwner={props.showOwner}
              />
            ))}
          </ul>
        </section>
      ))}
    </>
  );
}

function Pool(props: { pool: IGpuInventory | null }): JSX.Element | null {
  const { pool } = props;
  if (!pool) {
    return null;
  }
  const outside = pool.gpus.filter(g => g.busy_outside);
  return (
    <div className="e31-Pool" title={pool.gpus.map(poolGpuWords).join('\n')}>
      <span className="e31-Pool-gpus">
        {pool.gpus.map(g => (
          <PoolGpu key={g.id} gpu={g} />
        ))}
      </span>
      <span className="e31-Pool-text">
        {pool.total === 0
          ? 'No GPUs in this queue'
          : `${pool.free} of ${pool.total} GPU${pool.total === 1 ? '' : 's'} free`}{' '}
        · {pool.running} running · {pool.queued} queued
      </span>
      {outside.length ? (
        <ul className="e31-Pool-outside">
          {outside.map(g => (
            <li key={g.id} data-gpu={g.id}>
              {outsideWords(g)}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** One GPU of the pool: who holds it by its colour, and how busy it was at its last reading by how full it is. */
function PoolGpu(props: { gpu: IGpu }): JSX.Element {
  const { gpu } = props;
  const util = readingUtil(gpu);
  return (
    <span
      className={`e31-Pool-gpu${gpuModifier(gpu)}`}
      data-gpu={gpu.id}
      data-util={util === null ? undefined : Math.round(util)}
      title={poolGpuWords(gpu)}
    >
      {util === null ? null : <span className="e31-Pool-util" style={{ height: `${util}%` }} />}
    </span>
  );
}

function gpuModifier(gpu: IGpu): string {
  return gpu.busy_outside ? ' e31-mod-outside' : gpu.busy ? ' e31-mod-busy' : '';
}

function JobRow(props: {
  job: IJob;
  model: JobsModel;
  actions: IPanelActions;
  now: number;
  showOwner: boolean;
}): JSX.Element {
  const { job, actions } = props;
  const { point } = sweepName(job.name);
  const open = () => actions.openJob(job.id);
  return (
    <li
      className={`e31-JobRow e31-mod-${job.state}`}
      data-job-id={job.id}
      data-state={job.state}
      title={`${job.name} (${job.id})\nsubmitted ${formatTimestamp(job.submitted_at)}${job.reason ? `\n${job.reason}` : ''}`}
    >
      <div
        className="e31-JobRow-open"
        role="button"
        tabIndex={0}
        onClick={open}
        onKeyDown={e => {
          if (e.key === 'Enter' || e.key === ' ') {
            e.preventDefault();
            open();
          }
        }}
      >
        <JobRowTop job={job} now={props.now} />
        {point ? <div className="e31-JobRow-point">{point}</div> : null}
        <div className="e31-JobRow-sub">
          <span className="e31-JobRow-summary">{jobSummary(job, props.now)}</span>
        </div>
        <JobRowEnding job={job} />
        <ProgressBar job={job} />
        {job.state === 'running' && job.progress.last_line ? (
          <div className="e31-JobRow-printed" title="The last line it printed">
            {job.progress.last_line}
          </div>
        ) : null}
        <JobRowMeta {...props} />
      </div>
      <JobRowActions job={job} actions={actions} />
    </li>
  );
}

/** The name (on up to two lines), the state, and a queued job's place in line and expected start. */
function JobRowTop(props: { job: IJob; now: number }): JSX.Element {
  const { job } = props;
  const start = expectedStartClock(job, new Date(props.now));
  return (
    <div className="e31-JobRow-top">
      <span className="e31-JobRow-name">{sweepName(job.name).base}</span>
      <StateBadge state={job.state} />
      {job.state === 'queued' && job.queue_position ? (
        <span className="e31-JobRow-position" title="Place in line (1 starts next)">
          #{job.queue_position}
        </span>
      ) : null}
      {start ? (
        <span className="e31-JobRow-start" title={`Expected to start ${formatTimestamp(job.expected_start ?? null)}`}>
          {start}
        </span>
      ) : null}
    </div>
  );
}

/** An ended job's failure reason (when it did not succeed) and its cost. */
function JobRowEnding(props: { job: IJob }): JSX.Element | null {
  const { job } = props;
  if (isActive(job)) {
    return null;
  }
  const reason = failureReason(job);
  return (
    <div className="e31-JobRow-ending">
      {reason ? <span className="e31-JobRow-reason">{reason}</span> : null}
      <span className="e31-JobRow-cost" title="What it cost (its meter)">
        {costWords(job)}
      </span>
    </div>
  );
}

function JobRowMeta(props: { job: IJob; model: JobsModel; now: number; showOwner: boolean }): JSX.Element {
  const { job, now } = props;
  const gpus = job.state === 'running' || job.gpus.length ? job.gpus.length : job.request.gpus;
  return (
    <div className="e31-JobRow-meta">
      <span>
        {job.state === 'running' && job.gpus.length ? gpuList(job.gpus) : `${gpus} GPU${gpus === 1 ? '' : 's'}`}
      </span>
      {isActive(job) ? (
        <span className="e31-JobRow-meter" title="GPU-hours held (the meter)">
          {formatGpuHours(props.model.liveGpuHours(job, now))}
        </span>
      ) : null}
      <span title={formatTimestamp(job.submitted_at)}>{formatTime(job.submitted_at)}</span>
      {props.showOwner ? <span>{job.owner}</span> : null}
      {job.team ? <span className="e31-JobRow-team">{job.team}</span> : null}
    </div>
  );
}

/** Cancel while it can still be cancelled; "Open results" once it ended. */
function JobRowActions(props: { job: IJob; actions: IPanelActions }): JSX.Element | null {
  const { job, actions } = props;
  if (isCancellable(job)) {
    return (
      <div className="e31-JobRow-actions">
        <button
          className="e31-IconButton e31-JobRow-cancel"
          title={`Cancel ${job.name}`}
          aria-label={`Cancel ${job.name}`}
          onClick={() => actions.cancel(job)}
        >
          <closeIcon.react tag="span" elementSize="small" />
        </button>
      </div>
    );
  }
  return (
    <div className="e31-JobRow-actions">
      <button
        className="e31-LinkButton e31-JobRow-results"
        title={resultsPlace(job) === 'notebook' ? 'Open the executed notebook, read-only' : "Open the job's page"}
        aria-label={`Open results of ${job.name}`}
        onClick={() => actions.openResults(job)}
      >
        Open results
      </button>
    </div>
  );
}
