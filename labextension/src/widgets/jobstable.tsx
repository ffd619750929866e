/**
 * The "e31 Jobs" table in the main area: every job of the user's on a full-width table, sortable
 * by any column, with bulk actions on the selected jobs (cancel, delete files, collect), each of
 * which says what it did and what it could not, job by job.
 */

import { caretDownIcon, caretUpIcon, closeIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { formatCost, formatHours, formatTime, formatTimestamp, gpuList } from '../model/format';
import { JobsModel, expectedStartClock } from '../model/jobs';
import {
  BULK_LABELS,
  BulkAction,
  IBulkReport,
  SortKey,
  TableSort,
  applicable,
  ariaSort,
  bulkSummary,
  jobGpus,
  nextSort,
  sortJobs
} from '../model/table';
import { IJob } from '../model/types';
import { StateBadge, useTicker } from './common';
import { WatchingWidget } from './watching';

export interface IJobsTableActions {
  openJob(id: string): void;
  /** Run the action on the jobs it applies to (after asking, where it destroys something): what
   * came of it job by job, or null when the user called it off. */
  bulk(action: BulkAction, jobs: IJob[]): Promise<IBulkReport | null>;
}

export class JobsTableView extends WatchingWidget {
  constructor(
    model: JobsModel,
    private readonly actions: IJobsTableActions
  ) {
    super(model);
    this.addClass('e31-JobsTable');
  }

  render(): JSX.Element {
    return <JobsTable model={this.model} actions={this.actions} version={this.version} visible={this.watching} />;
  }
}

interface IColumn {
  key: SortKey;
  label: string;
  title: string;
  numeric?: boolean;
}

const COLUMNS: IColumn[] = [
  { key: 'name', label: 'Name', title: 'The job’s name' },
  { key: 'state', label: 'State', title: 'Where the job stands' },
  { key: 'position', label: 'Place in line', title: 'Place in line (1 starts next)', numeric: true },
  { key: 'gpus', label: 'GPUs', title: 'GPUs held, or asked for', numeric: true },
  { key: 'time', label: 'Started – ended', title: 'When it started and ended; sorts by start' },
  { key: 'meter', label: 'Meter (GPU-h)', title: 'GPU-hours held (the meter)', numeric: true },
  { key: 'cost', label: 'Cost', title: 'What it cost', numeric: true }
];

const BULK_ACTIONS: BulkAction[] = ['cancel', 'deleteFiles', 'collect'];

const BULK_TITLES: Record<BulkAction, string> = {
  cancel: 'Cancel the selected jobs that are queued, running or suspended',
  deleteFiles: 'Delete the files of the selected jobs that ended (their records and GPU-hours stay)',
  collect: 'Open the executed notebooks of the selected jobs that succeeded'
};

function JobsTable(props: {
  model: JobsModel;
  actions: IJobsTableActions;
  version: number;
  visible: boolean;
}): JSX.Element {
  const { model, actions } = props;
  const [sort, setSort] = React.useState<TableSort>(null);
  const [selected, setSelected] = React.useState<ReadonlySet<string>>(new Set());
  const [report, setReport] = React.useState<IBulkReport | null>(null);
  const [busy, setBusy] = React.useState(false);
  const now = useTicker(props.visible && model.hasActive);
  const jobs = sortJobs(model.jobs, sort, job => model.liveGpuHours(job, now));
  const chosen = jobs.filter(job => selected.has(job.id));
  const runAction = async (action: BulkAction) => {
    setBusy(true);
    try {
      const done = await actions.bulk(action, chosen);
      if (done) {
        setReport(done);
        setSelected(new Set());
      }
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="e31-JobsTable-body">
      <header className="e31-JobsTable-header">
        <h1 className="e31-JobsTable-title">e31 Jobs</h1>
        <BulkBar chosen={chosen} busy={busy} onAction={action => void runAction(action)} />
      </header>
      {model.error ? <div className="e31-Error">{model.error}</div> : null}
      <BulkReport report={report} onDismiss={() => setReport(null)} />
      <table className="e31-JobsTable-table">
        <thead>
          <HeaderRow jobs={jobs} selected={selected} onSelect={setSelected} sort={sort} onSort={setSort} />
        </thead>
        <tbody>
          {jobs.map(job => (
            <JobTableRow
              key={job.id}
              job={job}
              hours={model.liveGpuHours(job, now)}
              now={now}
              selected={selected.has(job.id)}
              onSelect={on => setSelected(toggled(selected, job.id, on))}
              onOpen={() => actions.openJob(job.id)}
            />
          ))}
        </tbody>
      </table>
      {jobs.length ? null : (
        <div className="e31-Empty">{model.loaded || model.error ? 'No jobs yet.' : 'Loading jobs…'}</div>
      )}
    </div>
  );
}

function toggled(selected: ReadonlySet<string>, id: string, on: boolean): Set<string> {
  const next = new Set(selected);
  if (on) {
    next.add(id);
  } else {
    next.delete(id);
  }
  return next;
}

/** The bulk actions, each with how many of the selected jobs it applies to. */
function BulkBar(props: { chosen: IJob[]; busy: boolean; onAction: (action: BulkAction) => void }): JSX.Element {
  const { chosen } = props;
  return (
    <div className="e31-JobsTable-bulk" role="toolbar" aria-label="Act on the selected jobs">
      <span className="e31-JobsTable-selected">
        {chosen.length ? `${chosen.length} selected` : 'Select jobs to act on'}
      </span>
      {BULK_ACTIONS.map(action => {
        const count = applicable(action, chosen).length;
        return (
          <button
            key={action}
            className={`jp-Button jp-mod-styled ${action === 'collect' ? 'jp-mod-accept' : 'jp-mod-reject'}`}
            data-action={action}
            disabled={props.busy || count === 0}
            title={BULK_TITLES[action]}
            onClick={() => props.onAction(action)}
          >
            {BULK_LABELS[action]}
            {count ? ` (${count})` : ''}
          </button>
        );
      })}
    </div>
  );
}

/** What the last bulk action did and what it could not; read out when it changes. */
function BulkReport(props: { report: IBulkReport | null; onDismiss: () => void }): JSX.Element {
  const { report } = props;
  const failed = report?.outcomes.some(o => !o.done);
  return (
    <div className={`e31-JobsTable-report${failed ? ' e31-mod-partial' : ''}`} role="status">
      {report ? (
        <>
          <span className="e31-JobsTable-reportText">{bulkSummary(report)}</span>
          <button className="e31-IconButton" title="Dismiss" aria-label="Dismiss" onClick={props.onDismiss}>
            <closeIcon.react tag="span" elementSize="small" />
          </button>
        </>
      ) : null}
    </div>
  );
}

function HeaderRow(props: {
  jobs: IJob[];
  selected: ReadonlySet<string>;
  onSelect: (selected: Set<string>) => void;
  sort: TableSort;
  onSort: (sort: TableSort) => void;
}): JSX.Element {
  const { jobs, selected, sort } = props;
  const all = jobs.length > 0 && jobs.every(job => selected.has(job.id));
  return (
    <tr>
      <th className="e31-JobsTable-check" scope="col">
        <input
          type="checkbox"
          aria-label="Select all jobs"
          checked={all}
          onChange={e => props.onSelect(new Set(e.target.checked ? jobs.map(job => job.id) : []))}
        />
      </th>
      {COLUMNS.map(column => (
        <th
          key={column.key}
          scope="col"
          aria-sort={ariaSort(sort, column.key)}
          data-column={column.key}
          className={column.numeric ? 'e31-mod-numeric' : undefined}
        >
          <button
            className="e31-JobsTable-sort"
            title={column.title}
            onClick={() => props.onSort(nextSort(sort, column.key))}
          >
            {column.label}
            <SortIcon direction={ariaSort(sort, column.key)} />
          </button>
        </th>
      ))}
    </tr>
  );
}

function SortIcon(props: { direction: 'ascending' | 'descending' | 'none' }): JSX.Element {
  if (props.direction === 'none') {
    return <span className="e31-JobsTable-sortIcon" />;
  }
  const Icon = props.direction === 'ascending' ? caretUpIcon : caretDownIcon;
  return <Icon.react className="e31-JobsTable-sortIcon" tag="span" />;
}

function JobTableRow(props: {
  job: IJob;
  hours: number;
  now: number;
  selected: boolean;
  onSelect: (on: boolean) => void;
  onOpen: () => void;
}): JSX.Element {
  const { job } = props;
  return (
    <tr data-job-id={job.id} data-state={job.state} className={props.selected ? 'e31-mod-selected' : undefined}>
      <td className="e31-JobsTable-check">
        <input
          type="checkbox"
          aria-label={`Select ${job.name}`}
          checked={props.selected}
          onChange={e => props.onSelect(e.target.checked)}
        />
      </td>
      <td data-column="name">
        <button className="e31-LinkButton e31-JobsTable-name" title={`${job.name} (${job.id})`} onClick={props.onOpen}>
          {job.name}
        </button>
      </td>
      <td data-column="state" title={job.reason ?? undefined}>
        <StateBadge state={job.state} />
      </td>
      <td data-column="position" className="e31-mod-numeric">
        {job.queue_position ? `#${job.queue_position}` : '—'}
      </td>
      <td data-column="gpus" className="e31-mod-numeric" title={job.gpus.length ? gpuList(job.gpus) : 'asked for'}>
        {jobGpus(job)}
      </td>
      <td data-column="time">{timesWords(job, props.now)}</td>
      <td data-column="meter" className="e31-mod-numeric">
        {formatHours(props.hours)}
      </td>
      <td data-column="cost" className="e31-mod-numeric">
        {formatCost(job.meter.cost, job.meter.currency) || '—'}
      </td>
    </tr>
  );
}

/** "09:12 – 10:40", "09:12 –" while it runs, "~10:42" for a queued one's expected start. */
function timesWords(job: IJob, now: number): JSX.Element | string {
  const expected = expectedStartClock(job, new Date(now));
  if (!job.started_at) {
    return expected ? <span title="Expected start">{expected}</span> : '—';
  }
  const when = new Date(now);
  return (
    <span title={`${formatTimestamp(job.started_at)} – ${formatTimestamp(job.finished_at)}`}>
      {formatTime(job.started_at, when)} – {job.finished_at ? formatTime(job.finished_at, when) : ''}
    </span>
  );
}
