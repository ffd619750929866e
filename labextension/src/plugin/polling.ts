/** Polling follows what the user can see, and the server's job events. */

import { JupyterFrontEnd } from '@jupyterlab/application';

import { JobsModel, jobEventOwnerKey } from '../model/jobs';

export function followJobs(app: JupyterFrontEnd, model: JobsModel): void {
  followPageVisibility(model);
  // One look at start: the status bar, and the endings that happened while the browser was closed.
  model.refresh();
  followJobEvents(app, model);
}

function followPageVisibility(model: JobsModel): void {
  document.addEventListener('visibilitychange', () => model.setPageVisible(document.visibilityState === 'visible'));
  model.setPageVisible(document.visibilityState === 'visible');
}

/**
 * Jobs submitted anywhere (a notebook's %%e31, a terminal's e31, a console, another server),
 * started, changed or ended are announced on the server's event bus: look again then.
 */
function followJobEvents(app: JupyterFrontEnd, model: JobsModel): void {
  app.serviceManager.events.stream.connect((_, event) => {
    const ownerKey = jobEventOwnerKey(event);
    if (ownerKey !== null) {
      model.jobChanged(ownerKey);
    }
  });
}
