/** The "e31 Jobs" table in the main area, the command that opens it, and its bulk actions. */

import { Dialog, ICommandPalette, MainAreaWidget, showDialog } from '@jupyterlab/apputils';

import { gpuJobsIcon } from '../icons';
import { BULK_LABELS, BulkAction, IBulkReport, applicable, runBulk } from '../model/table';
import { IJob } from '../model/types';
import { JobsTableView } from '../widgets/jobstable';
import { CATEGORY, CommandIDs } from './commandids';
import { IE31Context } from './context';
import { openResults } from './jobspanel';

const TABLE_ID = 'e31-jobs-table';

export function addJobsTable(ctx: IE31Context, palette: ICommandPalette | null): void {
  const { commands, shell } = ctx.app;
  commands.addCommand(CommandIDs.openJobsTable, {
    label: 'Open GPU Jobs Table',
    caption: 'All your jobs in a sortable table, with bulk cancel, delete files and collect',
    icon: gpuJobsIcon,
    execute: () => {
      const open = Array.from(shell.widgets('main')).find(widget => widget.id === TABLE_ID);
      if (!open) {
        shell.add(jobsTableWidget(ctx), 'main');
      }
      shell.activateById(TABLE_ID);
    }
  });
  palette?.addItem({ command: CommandIDs.openJobsTable, category: CATEGORY });
}

function jobsTableWidget(ctx: IE31Context): MainAreaWidget<JobsTableView> {
  const content = new JobsTableView(ctx.model, {
    openJob: id => void ctx.app.commands.execute(CommandIDs.openJob, { id }),
    bulk: (action, jobs) => bulkAction(ctx, action, jobs)
  });
  const widget = new MainAreaWidget({ content });
  widget.id = TABLE_ID;
  widget.title.label = 'e31 Jobs';
  widget.title.icon = gpuJobsIcon;
  widget.title.closable = true;
  return widget;
}

/** Ask where the action destroys something; run it; look again at the jobs it touched. */
async function bulkAction(ctx: IE31Context, action: BulkAction, jobs: IJob[]): Promise<IBulkReport | null> {
  if (action !== 'collect' && !(await confirmed(action, applicable(action, jobs)))) {
    return null;
  }
  const report = await runBulk(action, jobs, job => act(ctx, action, job));
  ctx.model.refresh();
  for (const { job, done } of report.outcomes) {
    if (done) {
      ctx.details.get(job.id)?.content.model.refresh();
    }
  }
  return report;
}

function act(ctx: IE31Context, action: BulkAction, job: IJob): Promise<unknown> {
  switch (action) {
    case 'cancel':
      return ctx.api.cancel(job.id);
    case 'deleteFiles':
      return ctx.api.deleteFiles(job.id);
    case 'collect':
      return openResults(ctx, job);
  }
}

const CONSEQUENCES: Record<Exclude<BulkAction, 'collect'>, string> = {
  cancel: 'Queued jobs leave the queue; running ones are stopped and give their GPUs back.',
  deleteFiles:
    'Their executed notebooks, reports, data, values, files and logs are deleted for good; ' +
    'their records and GPU-hours stay.'
};

async function confirmed(action: Exclude<BulkAction, 'collect'>, jobs: IJob[]): Promise<boolean> {
  const names = jobs.map(job => `“${job.name}”`).join(', ');
  const result = await showDialog({
    title: `${BULK_LABELS[action]}: ${jobs.length} job${jobs.length === 1 ? '' : 's'}?`,
    body: `${names}. ${CONSEQUENCES[action]}`,
    buttons: [Dialog.cancelButton({ label: 'Keep them' }), Dialog.warnButton({ label: BULK_LABELS[action] })]
  });
  return result.button.accept;
}
