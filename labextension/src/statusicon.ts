import { LabIcon } from '@jupyterlab/ui-components';

// Path from Material Icons (Apache License 2.0): "playlist_play", jobs in a line, one running.
// Not the chip of gpuJobsIcon: JupyterLab's kernel icon in the status bar is a chip too.
const queue = 'M19 9H2v2h17V9zm0-4H2v2h17V5zM2 15h13v-2H2v2zm15-2v6l5-3-5-3z';

/** The status bar item's icon: a queue of jobs, the themes' icon colour. */
export const jobsQueueIcon = new LabIcon({
  name: 'e31-jupyter:jobs-queue',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" d="${queue}"/></svg>`
});
