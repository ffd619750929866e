/** Submitting a notebook (a file, or an open notebook's content) through the submit dialog. */

import { showErrorMessage } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';

import { errorText } from '../model/api';
import { NotebookSource } from '../model/form';
import { IParameter, notebookParameters } from '../model/parameters';
import { IJob } from '../model/types';
import { showSubmitDialog } from '../widgets/submitform';
import { IPluginContext } from './context';
import { showPanelTab } from './panelcommands';
import { notifySubmitted } from './notifications';

const REMEMBERED_KEY = 'e31-jupyter:last-request';

export async function submitPath(ctx: IPluginContext, path: string): Promise<void> {
  try {
    const file = await ctx.app.serviceManager.contents.get(path, { content: true, type: 'notebook' });
    await submit(ctx, { kind: 'path', path }, file.content);
  } catch (error) {
    void showErrorMessage('Cannot submit the notebook', errorText(error));
  }
}

export async function submitPanel(ctx: IPluginContext, nbPanel: NotebookPanel): Promise<void> {
  await nbPanel.context.ready;
  const content = nbPanel.context.model.toJSON();
  const name = PathExt.basename(nbPanel.context.path);
  const folder = PathExt.dirname(nbPanel.context.path);
  await submit(ctx, { kind: 'content', name, content, folder }, content);
}

async function submit(ctx: IPluginContext, source: NotebookSource, content: unknown): Promise<void> {
  const { api, model } = ctx;
  const parameters = parametersOf(content);
  const job = await showSubmitDialog({ api, source, parameters, remembered: remembered(), jobs: model.jobs });
  if (job) {
    afterSubmit(ctx, job);
  }
}

function parametersOf(content: unknown): IParameter[] {
  try {
    return notebookParameters(content as any);
  } catch {
    return [];
  }
}

/** Remember the request's team and GPUs, show the job in the panel and say where it stands. */
export function afterSubmit(ctx: IPluginContext, job: IJob & { warnings?: string[] }): void {
  remember({ team: job.team ?? '', gpus: String(job.request.gpus) });
  ctx.model.refresh();
  showPanelTab(ctx, 'jobs');
  notifySubmitted(job);
}

function remembered(): { team?: string; gpus?: string } {
  try {
    return JSON.parse(window.localStorage.getItem(REMEMBERED_KEY) ?? '{}');
  } catch {
    return {};
  }
}

function remember(value: { team: string; gpus: string }): void {
  try {
    window.localStorage.setItem(REMEMBERED_KEY, JSON.stringify(value));
  } catch {
    // no storage: the dialog starts from defaults next time
  }
}
