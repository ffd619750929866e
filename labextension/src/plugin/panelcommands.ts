/** Showing the jobs panel: on its own, on the jobs list or on the meter; the commands that do. */

import { gpuJobsIcon } from '../icons';
import { CommandIDs } from './commandids';
import { IPluginContext } from './context';

/** Bring the panel to the front. */
export function showPanel({ app, panel }: IPluginContext): void {
  app.shell.activateById(panel.id);
}

/** Bring the panel to the front, on the jobs list or the meter. */
export function showPanelTab(ctx: IPluginContext, tab: 'jobs' | 'meter'): void {
  ctx.panel.showTab(tab);
  showPanel(ctx);
}

export function addPanelCommands(ctx: IPluginContext): void {
  const { commands } = ctx.app;
  commands.addCommand(CommandIDs.showJobs, {
    label: 'Show GPU Jobs',
    icon: gpuJobsIcon,
    execute: () => showPanelTab(ctx, 'jobs')
  });
  commands.addCommand(CommandIDs.showMeter, {
    label: 'Show GPU Meter',
    caption: 'GPU-hours of the last days, by team',
    execute: () => showPanelTab(ctx, 'meter')
  });
}
