/**
 * What the plugin's parts share: the application, the e31 API client, the jobs model, the open job
 * detail views and (once added) the jobs panel.
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { ExecutedNotebooksDrive } from '../drive';
import { API_ROOT, E31Api } from '../model/api';
import { EndingsTracker, endingsKey } from '../model/endings';
import { JobsModel } from '../model/jobs';
import { JobDetailView } from '../widgets/detail';
import { JobsPanel } from '../widgets/panel';

export interface IE31Context {
  readonly app: JupyterFrontEnd;
  readonly api: E31Api;
  readonly model: JobsModel;
  /** The open job detail views, by job id. */
  readonly details: Map<string, MainAreaWidget<JobDetailView>>;
}

export interface IPluginContext extends IE31Context {
  readonly panel: JobsPanel;
}

/** The API client talking to this Jupyter server, and the jobs model reading through it. */
export function createContext(app: JupyterFrontEnd): IE31Context {
  const settings = app.serviceManager.serverSettings;
  const api = new E31Api(
    (path, init) => ServerConnection.makeRequest(apiUrl(settings, path), init ?? {}, settings),
    path => apiUrl(settings, path)
  );
  const model = new JobsModel({
    api,
    endings: user => new EndingsTracker(window.localStorage, endingsKey(settings.baseUrl, user))
  });
  return { app, api, model, details: new Map() };
}

/** The drive that serves jobs' executed notebooks (read-only) to the document manager. */
export function addExecutedNotebooksDrive({ app, api }: IE31Context): void {
  app.serviceManager.contents.addDrive(new ExecutedNotebooksDrive(api, app.serviceManager.serverSettings));
}

/** The absolute URL of a path (with its query) under the e31 API root. */
function apiUrl(settings: ServerConnection.ISettings, path: string): string {
  const [route, query] = path.split('?', 2);
  return URLExt.join(settings.baseUrl, API_ROOT, route) + (query ? `?${query}` : '');
}
