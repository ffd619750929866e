/**
 * The status bar item (the user's running and queued jobs, failures not looked at yet, today's
 * GPU-hours); a click shows the panel. Looking at the panel or at a failed job clears its failure
 * (src/model/failures.ts keeps the count).
 */

import { IStatusBar } from '@jupyterlab/statusbar';

import { UnseenFailures, failuresKey } from '../model/failures';
import { JobsStatus } from '../widgets/statusbar';
import { CommandIDs } from './commandids';
import { IPluginContext } from './context';
import { showPanel } from './panelcommands';

export function addStatusItem(ctx: IPluginContext, statusBar: IStatusBar | null): void {
  if (!statusBar) {
    return;
  }
  const failures = unseenFailures(ctx);
  const item = new JobsStatus(ctx.model, failures, () => {
    showPanel(ctx);
    failures.seeAll();
    item.update();
  });
  followFailures(ctx, failures, () => item.update());
  statusBar.registerStatusItem('e31-jupyter:status', { item, align: 'left', rank: 5 });
}

function unseenFailures({ app, model }: IPluginContext): UnseenFailures {
  const baseUrl = app.serviceManager.serverSettings.baseUrl;
  return new UnseenFailures(window.localStorage, () => failuresKey(baseUrl, model.user ?? ''));
}

/** Announced failures count; the panel on screen, or a failed job opened, clears them. */
function followFailures(ctx: IPluginContext, failures: UnseenFailures, redraw: () => void): void {
  const { app, model, panel } = ctx;
  const seeAllIfPanelShown = () => panel.isVisible && failures.seeAll();
  model.changed.connect(seeAllIfPanelShown);
  model.ended.connect((_, jobs) => {
    failures.add(jobs);
    seeAllIfPanelShown();
    redraw();
  });
  app.commands.commandExecuted.connect((_, { id, args }) => {
    if (lookedAt(failures, id, args)) {
      redraw();
    }
  });
  window.addEventListener('storage', event => failures.isKey(event.key) && redraw());
}

/** Whether the command looks at failures (the jobs list, a job's page or results); marks them seen. */
function lookedAt(failures: UnseenFailures, command: string, args: { id?: unknown }): boolean {
  if (command === CommandIDs.showJobs) {
    failures.seeAll();
    return true;
  }
  if ((command === CommandIDs.openJob || command === CommandIDs.openResults) && typeof args.id === 'string') {
    failures.see([args.id]);
    return true;
  }
  return false;
}
