/** The status bar item (the user's running and queued jobs, today's GPU-hours); a click shows the panel. */

import { IStatusBar } from '@jupyterlab/statusbar';

import { JobsStatus } from '../widgets/statusbar';
import { IPluginContext } from './context';
import { showPanel } from './panelcommands';

export function addStatusItem(ctx: IPluginContext, statusBar: IStatusBar | null): void {
  statusBar?.registerStatusItem('e31-jupyter:status', {
    item: new JobsStatus(ctx.model, () => showPanel(ctx)),
    align: 'left',
    rank: 5
  });
}
