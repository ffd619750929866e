/** The jobs panel in the left area. */

import { ILayoutRestorer } from '@jupyterlab/application';

import { gpuJobsIcon } from '../icons';
import { JobsPanel } from '../widgets/panel';
import { CommandIDs } from './commandids';
import { IE31Context } from './context';
import { cancelJob } from './jobactions';

export function addJobsPanel(ctx: IE31Context, restorer: ILayoutRestorer | null): JobsPanel {
  const { commands, shell } = ctx.app;
  const panel = new JobsPanel(ctx.model, {
    submit: () => void commands.execute(CommandIDs.submitNotebook),
    openJob: id => void commands.execute(CommandIDs.openJob, { id }),
    cancel: job => void cancelJob(ctx, job)
  });
  panel.title.icon = gpuJobsIcon;
  shell.add(panel, 'left', { rank: 350 });
  restorer?.add(panel, panel.id);
  return panel;
}
