/** The jobs panel in the left area. */

import { ILayoutRestorer } from '@jupyterlab/application';

import { gpuJobsIcon } from '../icons';
import { resultsPlace } from '../model/jobs';
import { IJob } from '../model/types';
import { JobsPanel } from '../widgets/panel';
import { CommandIDs } from './commandids';
import { IE31Context } from './context';
import { cancelJob } from './jobactions';

export function addJobsPanel(ctx: IE31Context, restorer: ILayoutRestorer | null): JobsPanel {
  const { commands, shell } = ctx.app;
  const panel = new JobsPanel(ctx.model, {
    submit: () => void commands.execute(CommandIDs.submitNotebook),
    openJob: id => void commands.execute(CommandIDs.openJob, { id }),
    cancel: job => void cancelJob(ctx, job),
    openResults: job => void openResults(ctx, job),
    openTable: () => void commands.execute(CommandIDs.openJobsTable)
  });
  panel.title.icon = gpuJobsIcon;
  shell.add(panel, 'left', { rank: 350 });
  restorer?.add(panel, panel.id);
  return panel;
}

/** An ended job's results: its executed notebook (read-only) where it has one, else its page. */
export function openResults({ app }: IE31Context, job: IJob): Promise<unknown> {
  const command = resultsPlace(job) === 'notebook' ? CommandIDs.openResults : CommandIDs.openJob;
  return app.commands.execute(command, { id: job.id });
}
