/**
 * The status bar item: the user's running and queued jobs, their failures not looked at yet and
 * today's GPU-hours; on hover, a summary. Clicking it opens the jobs panel. It draws from the jobs
 * model and never polls by itself.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { statusTooltip } from '../model/failures';
import { formatGpuHours } from '../model/format';
import { JobsModel } from '../model/jobs';
import { IJob } from '../model/types';
import { jobsQueueIcon } from '../statusicon';
import { useTicker } from './common';

/** The failed jobs among the model's the user has not looked at. */
export interface IFailuresView {
  among(jobs: IJob[]): IJob[];
}

export class JobsStatus extends ReactWidget {
  constructor(
    private readonly model: JobsModel,
    private readonly failures: IFailuresView,
    private readonly onClick: () => void
  ) {
    super();
    this.addClass('e31-Status');
    this.addClass('jp-mod-highlighted');
    model.changed.connect(() => this.update(), this);
  }

  render(): JSX.Element {
    return (
      <StatusView
        model={this.model}
        failed={this.failures.among(this.model.jobs)}
        onClick={this.onClick}
        setTitle={title => (this.node.title = title)}
      />
    );
  }
}

function StatusView(props: {
  model: JobsModel;
  failed: IJob[];
  onClick: () => void;
  setTitle: (title: string) => void;
}): JSX.Element {
  const { model, failed } = props;
  const counts = model.counts();
  const now = useTicker(counts.running > 0, 5000);
  const hours = formatGpuHours(model.gpuHoursToday(now));
  const title = statusTooltip(counts, failed, hours);
  React.useEffect(() => {
    props.setTitle(title);
  }, [title]);
  return (
    <div
      className="e31-Status-body"
      role="button"
      tabIndex={0}
      onClick={props.onClick}
      onKeyDown={e => e.key === 'Enter' && props.onClick()}
    >
      <jobsQueueIcon.react tag="span" className="e31-Status-icon" />
      <span className={counts.running ? 'e31-Status-running' : ''} data-count={counts.running}>
        {counts.running} running
      </span>
      <span className="e31-Status-sep">·</span>
      <span data-count={counts.queued}>{counts.queued} queued</span>
      {failed.length > 0 && <FailedCount count={failed.length} />}
      <span className="e31-Status-sep">·</span>
      <span className="e31-Status-hours">{hours} today</span>
    </div>
  );
}

function FailedCount(props: { count: number }): JSX.Element {
  return (
    <>
      <span className="e31-Status-sep">·</span>
      <span className="e31-Status-failed" data-count={props.count}>
        {props.count} failed
      </span>
    </>
  );
}
