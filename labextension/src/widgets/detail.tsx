/**
 * One job in the main area: request and grant, timeline, parameters, log tail, collected
 * files, and the ways to its results (the executed notebook, the HTML report).
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { JobDetailModel, endStepLabel, lastPrintedLine, progressWords } from '../model/detail';
import {
  attemptsWords,
  checkpointWords,
  expectedWords,
  formatBytes,
  formatCost,
  formatDuration,
  formatGpuHours,
  formatTimestamp,
  gpuList,
  secondsBetween,
  valueNote
} from '../model/format';
import { absentWords, gpuUseFigures, returnedWords, sparklineSegments, svgPoints } from '../model/gpuuse';
import { liveGpuHours } from '../model/meter';
import { IGpuUse, IJobDetail, isActive, isCancellable, isFinal, isResumable, stopUnderWay } from '../model/types';
import { ProgressBar, StateBadge, useTicker } from './common';

export interface IDetailActions {
  cancel(job: IJobDetail): void;
  suspend(job: IJobDetail): void;
  deleteFiles(job: IJobDetail): void;
  change(job: IJobDetail): void;
  resubmit(job: IJobDetail): void;
  resume(job: IJobDetail): void;
  openNotebook(job: IJobDetail): void;
  openReport(job: IJobDetail): void;
}

export class JobDetailView extends ReactWidget {
  constructor(
    readonly model: JobDetailModel,
    private readonly actions: IDetailActions
  ) {
    super();
    this.addClass('e31-Detail');
    model.changed.connect(this._onChanged, this);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.setVisible(true);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.model.setVisible(this.isVisible);
  }

  protected onBeforeHide(msg: Message): void {
    this.model.setVisible(false);
    super.onBeforeHide(msg);
  }

  protected onBeforeDetach(msg: Message): void {
    this.model.setVisible(false);
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    this.model.dispose();
    super.dispose();
  }

  render(): JSX.Element {
    return <DetailView model={this.model} actions={this.actions} />;
  }

  private _onChanged(): void {
    const job = this.model.job;
    if (job && this.parent) {
      this.parent.title.label = `Job: ${job.name}`;
    }
    this.update();
  }
}

function DetailView(props: { model: JobDetailModel; actions: IDetailActions }): JSX.Element {
  const { model, actions } = props;
  const job = model.job;
  const now = useTicker(!!job && isActive(job));
  if (!job) {
    return (
      <div className="e31-Detail-body">
        {model.error ? <div className="e31-Error">{model.error}</div> : <div className="e31-Empty">Loading…</div>}
      </div>
    );
  }
  const ran = job.started_at !== null;
  const deleted = job.files_deleted;
  const gone = deleted ? "The job's files were deleted" : '';
  const hours = liveGpuHours(job, model.fetchedAt || now, now);
  const parameters = Object.entries(job.work?.parameters ?? {});
  const hasReport = (job.output?.reports ?? []).includes('html');
  const checkpoint = job.last_checkpoint ?? null;
  const attempts = attemptsWords(job.attempts);
  const stopping = stopUnderWay(job);
  // Ended for good: a suspended job's notebook goes on once it is resumed.
  const done = isFinal(job) && job.state !== 'suspended';
  return (
    <div className="e31-Detail-body" data-job-id={job.id} data-state={job.state}>
      <header className="e31-Detail-header">
        <div className="e31-Detail-heading">
          <h1 className="e31-Detail-title">{job.name}</h1>
          <StateBadge state={job.state} />
        </div>
        <div className="e31-Detail-ids">
          <span title="Job id">{job.id}</span>
          <span>{job.owner}</span>
          {job.team ? <span>team {job.team}</span> : null}
          {job.work?.notebook ? <span>{job.work.notebook}</span> : null}
        </div>
        <div className="e31-Detail-actions">
          <button
            className="jp-Button jp-mod-styled jp-mod-accept"
            disabled={!ran || !!deleted}
            title={gone || (ran ? 'Open the executed notebook, read-only' : 'The job has not started yet')}
            onClick={() => actions.openNotebook(job)}
          >
            {done ? 'Open executed notebook' : 'Open notebook so far'}
          </button>
          <button
            className="jp-Button jp-mod-styled jp-mod-reject e31-Secondary"
            disabled={!isFinal(job) || !ran || !hasReport || !!deleted}
            title={gone || (hasReport ? 'The HTML report of the executed notebook' : 'No HTML report was asked for')}
            onClick={() => actions.openReport(job)}
          >
            HTML report
          </button>
          {isResumable(job) && checkpoint ? (
            <button
              className="jp-Button jp-mod-styled jp-mod-accept e31-Detail-resume"
              disabled={!!deleted}
              title={
                gone ||
                `Back in line, to continue after cell ${checkpoint.after_cell + 1} from its last checkpoint, ` +
                  `with the same request (e31 resume ${job.id} can change it)`
              }
              onClick={() => actions.resume(job)}
            >
              Resume
            </button>
          ) : null}
          <button
            className="jp-Button jp-mod-styled jp-mod-reject e31-Secondary"
            disabled={!!deleted}
            title={gone || 'Run its notebook again as a new job'}
            onClick={() => actions.resubmit(job)}
          >
            Resubmit…
          </button>
          {job.state === 'queued' ? (
            <button
              className="jp-Button jp-mod-styled jp-mod-reject e31-Secondary"
              title="Change its GPUs, run times, deadline, name or team while it waits"
              onClick={() => actions.change(job)}
            >
              Change…
            </button>
          ) : null}
          {job.state === 'running' && job.request.checkpoint ? (
            stopping === 'suspending' ? (
              <span className="e31-Detail-suspending e31-Muted" title={job.reason ?? ''}>
                Suspending…
              </span>
            ) : (
              <button
                className="jp-Button jp-mod-styled jp-mod-reject e31-Secondary e31-Detail-suspend"
                disabled={stopping !== null}
                title="Finish the running cell, save a checkpoint and give the GPUs back; resume it later"
                onClick={() => actions.suspend(job)}
              >
                Suspend…
              </button>
            )
          ) : null}
          {isCancellable(job) ? (
            <button className="jp-Button jp-mod-styled jp-mod-warn" onClick={() => actions.cancel(job)}>
              Cancel job
            </button>
          ) : null}
          {isFinal(job) && !deleted ? (
            <button
              className="jp-Button jp-mod-styled jp-mod-reject e31-Secondary e31-Detail-delete"
              title="Delete its notebook, report, data, values, files and log to free their space; the record and GPU-hours stay"
              onClick={() => actions.deleteFiles(job)}
            >
              Delete files…
            </button>
          ) : null}
        </div>
        {deleted ? (
          <p className="e31-Detail-deleted e31-Muted">
            {`Files deleted ${formatTimestamp(deleted.at)} by ${deleted.by} (${formatBytes(deleted.bytes)} freed). The record and GPU-hours stay.`}
          </p>
        ) : null}
        {job.reason && (job.state !== 'running' || stopping) ? (
          <p className={`e31-Detail-reason e31-mod-${job.state}`}>{job.reason}</p>
        ) : null}
        {checkpoint ? (
          <p className="e31-Detail-checkpoint e31-Muted" title={`saved ${formatTimestamp(checkpoint.saved_at)}`}>
            {checkpointWords(checkpoint)}
          </p>
        ) : null}
        {attempts ? <p className="e31-Detail-attempts e31-Muted">{attempts}</p> : null}
        {model.error ? <div className="e31-Error">{model.error}</div> : null}
      </header>

      <section className="e31-Cards">
        <div className="e31-Card">
          <h3>Request</h3>
          <dl>
            <dt>GPUs</dt>
            <dd>{job.request.gpus}</dd>
            <dt>Max run time</dt>
            <dd>{formatDuration(job.request.max_runtime_s)}</dd>
            <dt>Expected run time</dt>
            <dd>{formatDuration(job.request.expected_runtime_s)}</dd>
            <dt>Deadline</dt>
            <dd>{formatTimestamp(job.request.deadline)}</dd>
            {job.request.checkpoint ? (
              <>
                <dt>Checkpoints</dt>
                <dd>saved after cells that finish</dd>
              </>
            ) : null}
            {job.request.after?.length ? (
              <>
                <dt>Runs after</dt>
                <dd className="e31-Detail-after">{job.request.after.join(', ')}</dd>
              </>
            ) : null}
            {job.work?.data?.length ? (
              <>
                <dt>Data</dt>
                <dd className="e31-Detail-data">{job.work.data.join(', ')}</dd>
              </>
            ) : null}
          </dl>
        </div>
        <div className="e31-Card">
          <h3>Grant</h3>
          <dl>
            <dt>Devices</dt>
            <dd className="e31-Detail-devices">
              {job.state === 'suspended'
                ? `none: given back${job.gpus.length ? ` (it ran on ${gpuList(job.gpus)})` : ''}`
                : job.gpus.length || job.state === 'queued'
                  ? [
                      job.gpus.length
                        ? gpuList(job.gpus)
                        : job.queue_position
                          ? `waiting · #${job.queue_position} in queue`
                          : 'waiting',
                      expectedWords(job)
                    ]
                      .filter(Boolean)
                      .join(' · ')
                  : 'none'}
            </dd>
            <dt>Meter</dt>
            <dd className="e31-Detail-meter">{formatGpuHours(hours)}</dd>
            {job.meter.cost ? (
              <>
                <dt>Cost</dt>
                <dd>{formatCost(job.meter.cost, job.meter.currency)}</dd>
              </>
            ) : null}
            <dt>Progress</dt>
            <dd>
              <Progress job={job} />
            </dd>
          </dl>
        </div>
      </section>

      <GpuUse use={job.gpu_use} now={now} />

      <section className="e31-Section">
        <h2>Timeline</h2>
        <Timeline job={job} now={now} />
      </section>

      {parameters.length ? (
        <section className="e31-Section">
          <h2>Parameters</h2>
          <table className="e31-Table e31-Parameters">
            <tbody>
              {parameters.map(([name, value]) => (
                <tr key={name}>
                  <th>{name}</th>
                  <td>
                    <code>{JSON.stringify(value)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      ) : null}

      <section className="e31-Section">
        <h2>Files</h2>
        {model.files.length ? (
          <ul className="e31-Files">
            {model.files.map(f => (
              <li key={f.path}>
                <a
                  href={model.api.fileUrl(job.id, f.path)}
                  download={f.path.split('/').pop()}
                  title={`Download ${f.path}`}
                >
                  {f.path}
                </a>
                <span className="e31-Files-size">{formatBytes(f.size)}</span>
              </li>
            ))}
          </ul>
        ) : (
          <p className="e31-Muted">
            {deleted
              ? 'Deleted.'
              : isFinal(job)
                ? 'The job handed back no files.'
                : 'Files are collected when the job ends.'}
          </p>
        )}
      </section>

      <Values model={model} job={job} />

      <section className="e31-Section">
        <h2>Log</h2>
        <pre className="e31-Log">
          {model.log || (deleted ? '(deleted)' : ran ? '(empty)' : '(the log starts when the job does)')}
        </pre>
      </section>
    </div>
  );
}

/** How far the job got: its cells, where one that did not succeed stopped, its latest printed line. */
function Progress(props: { job: IJobDetail }): JSX.Element {
  const { job } = props;
  const words = progressWords(job);
  const line = lastPrintedLine(job);
  return (
    <>
      <span
        className={
          words.stopped ? `e31-Detail-progress e31-Detail-stopped e31-mod-${job.state}` : 'e31-Detail-progress'
        }
        title={words.stopped && job.reason ? job.reason : undefined}
      >
        {words.text}
      </span>
      <ProgressBar job={job} />
      {line ? (
        <code className="e31-Detail-lastLine" title="The last line it printed">
          {line}
        </code>
      ) : null}
    </>
  );
}

/**
 * What the job's GPUs did: its figures and utilisation over time, or why there are none; the
 * idle warning, and the GPUs the queue took back. Nothing for a job that never held a GPU.
 */
function GpuUse(props: { use: IGpuUse | null | undefined; now: number }): JSX.Element | null {
  const { use, now } = props;
  if (!use) {
    return null;
  }
  const returned = use.returned ?? [];
  return (
    <section className="e31-Section e31-GpuUse" data-available={String(use.available)}>
      <h2>GPU use</h2>
      {use.idle ? (
        <div className="e31-GpuUse-idle" role="alert" title={`since ${formatTimestamp(use.idle.since)}`}>
          {use.idle.message}
        </div>
      ) : null}
      {use.available ? (
        <div className="e31-GpuUse-figures">
          <dl>
            {gpuUseFigures(use).map(figure => (
              <React.Fragment key={figure.label}>
                <dt>{figure.label}</dt>
                <dd>{figure.value}</dd>
              </React.Fragment>
            ))}
          </dl>
          <Sparkline use={use} />
        </div>
      ) : (
        <p className="e31-GpuUse-absent e31-Muted">{absentWords(use)}</p>
      )}
      {returned.length ? (
        <ul className="e31-GpuUse-returned">
          {returned.map(r => (
            <li key={`${r.device}@${r.at}`} title={formatTimestamp(r.at)}>
              {returnedWords(r, new Date(now))}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}

const SPARK_WIDTH = 200;
const SPARK_HEIGHT = 36;

/** Utilisation over the run, 0 to 100%, broken where a sample had none. */
function Sparkline(props: { use: IGpuUse }): JSX.Element | null {
  const segments = sparklineSegments(props.use.series ?? [], SPARK_WIDTH, SPARK_HEIGHT);
  if (!segments.length) {
    return null;
  }
  return (
    <svg
      className="e31-Sparkline"
      viewBox={`-2 -2 ${SPARK_WIDTH + 4} ${SPARK_HEIGHT + 4}`}
      role="img"
      aria-label="GPU utilisation over the run, 0 to 100%"
    >
      <line className="e31-Sparkline-base" x1={0} x2={SPARK_WIDTH} y1={SPARK_HEIGHT} y2={SPARK_HEIGHT} />
      {segments.map((segment, i) =>
        segment.length > 1 ? (
          <polyline key={i} className="e31-Sparkline-line" points={svgPoints(segment)} />
        ) : (
          <circle key={i} className="e31-Sparkline-dot" cx={segment[0][0]} cy={segment[0][1]} r={1.5} />
        )
      )}
    </svg>
  );
}

/** The values a cell's job handed back, and how to bring them into a kernel. */
function Values(props: { model: JobDetailModel; job: IJobDetail }): JSX.Element | null {
  const { model, job } = props;
  const names = job.values ?? [];
  if (!names.length || job.files_deleted) {
    return null;
  }
  const notes = new Map(model.values.map(v => [v.name, valueNote(v)]));
  return (
    <section className="e31-Section">
      <h2>Values</h2>
      <table className="e31-Table e31-Values">
        <tbody>
          {names.map(name => (
            <tr key={name}>
              <th>
                <code>{name}</code>
              </th>
              <td className="e31-Muted">{notes.get(name) ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="e31-Muted">
        In a notebook, <code>%e31 collect {job.id}</code> brings them into the kernel; in a terminal,{' '}
        <code>e31 collect {job.id} --to DIR</code> writes them to <code>DIR/values</code>.
      </p>
    </section>
  );
}

/** A timeline step's classes: done or not; the ending step in the colours of how the job ended. */
function stepClass(step: { done: boolean; end?: boolean }, job: IJobDetail): string {
  if (!step.done) {
    return '';
  }
  return step.end ? `e31-mod-done e31-Timeline-end e31-mod-${job.state}` : 'e31-mod-done';
}

/** The last step's note: "stopped in cell 3 of 3 · ran 4m", "ran 1h 2m", "running 5m". */
function endNote(job: IJobDetail, ran: number | null): string {
  if (!job.finished_at) {
    return job.state === 'running' ? `running ${formatDuration(ran)}` : '';
  }
  const progress = progressWords(job);
  const where = progress.stopped ? `${progress.text} · ` : '';
  return where + (ran !== null ? `ran ${formatDuration(ran)}` : job.state);
}

function Timeline(props: { job: IJobDetail; now: number }): JSX.Element {
  const { job, now } = props;
  const waited = secondsBetween(job.submitted_at, job.started_at ?? job.finished_at, now);
  const ran = secondsBetween(job.started_at, job.finished_at, now);
  const steps: { label: string; at: string | null; note: string; done: boolean; end?: boolean }[] = [
    { label: 'Submitted', at: job.submitted_at, note: '', done: true },
    {
      label: 'Started',
      at: job.started_at,
      note: job.started_at
        ? `waited ${formatDuration(waited)}`
        : job.state === 'queued'
          ? `waiting ${formatDuration(waited)}`
          : 'never started',
      done: !!job.started_at
    },
    {
      label: endStepLabel(job),
      end: true,
      at: job.finished_at,
      note: endNote(job, ran),
      done: !!job.finished_at
    }
  ];
  return (
    <>
      <ol className="e31-Timeline">
        {steps.map(step => (
          <li key={step.label} className={stepClass(step, job)}>
            <span className="e31-Timeline-label">{step.label}</span>
            <span className="e31-Timeline-at">{step.at ? formatTimestamp(step.at) : '—'}</span>
            <span className="e31-Timeline-note">{step.note}</span>
          </li>
        ))}
      </ol>
      <table className="e31-Table e31-Transitions">
        <tbody>
          {job.transitions.map((t, i) => (
            <tr key={i}>
              <td>{formatTimestamp(t.at)}</td>
              <td>
                {t.from ? `${t.from} → ` : ''}
                <strong>{t.to}</strong>
              </td>
              <td className="e31-Muted">{t.reason ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
