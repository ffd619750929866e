/**
 * The status bar item: the user's running and queued jobs and today's GPU-hours.
 * Clicking it opens the jobs panel. It draws from the jobs model and never polls by itself.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { JobsModel } from '../model/jobs';
import { formatGpuHours } from '../model/format';
import { gpuJobsIcon } from '../icons';
import { useTicker } from './common';

export class JobsStatus extends ReactWidget {
  constructor(
    private readonly model: JobsModel,
    private readonly onClick: () => void
  ) {
    super();
    this.addClass('e31-Status');
    this.addClass('jp-mod-highlighted');
    this.node.title = 'GPU jobs: click to open the jobs panel';
    model.changed.connect(() => this.update(), this);
  }

  render(): JSX.Element {
    return <StatusView model={this.model} onClick={this.onClick} />;
  }
}

function StatusView(props: { model: JobsModel; onClick: () => void }): JSX.Element {
  const { model } = props;
  const { running, queued } = model.counts();
  const now = useTicker(running > 0, 5000);
  return (
    <div
      className="e31-Status-body"
      role="button"
      tabIndex={0}
      onClick={props.onClick}
      onKeyDown={e => e.key === 'Enter' && props.onClick()}
    >
      <gpuJobsIcon.react tag="span" className="e31-Status-icon" />
      <span className={running ? 'e31-Status-running' : ''} data-count={running}>
        {running} running
      </span>
      <span className="e31-Status-sep">·</span>
      <span data-count={queued}>{queued} queued</span>
      <span className="e31-Status-sep">·</span>
      <span className="e31-Status-hours">{formatGpuHours(model.gpuHoursToday(now))} today</span>
    </div>
  );
}
