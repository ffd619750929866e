import { LabIcon } from '@jupyterlab/ui-components';

// Paths from Material Icons (Apache License 2.0): "memory" and "schedule_send".
const chip =
  'M15 9H9v6h6V9zm-2 4h-2v-2h2v2zm8-2V9h-2V7c0-1.1-.9-2-2-2h-2V3h-2v2h-2V3H9v2H7c-1.1 0-2 .9-2 2v2H3v2h2v2H3v2h2v2c0 1.1.9 2 2 2h2v2h2v-2h2v2h2v-2h2c1.1 0 2-.9 2-2v-2h2v-2h-2v-2h2zm-4 6H7V7h10v10z';
const send =
  'M16.5 12.5H15v4l3 2 .75-1.23-2.25-1.52V12.5zM16 9L2 3v7l9 2-9 2v7l7.27-3.11C10.09 20.83 12.79 23 16 23c3.86 0 7-3.14 7-7s-3.14-7-7-7zm0 12c-2.75 0-4.98-2.22-5-4.97v-.07c.02-2.74 2.25-4.97 5-4.97 2.76 0 5 2.24 5 5S18.76 21 16 21z';

const svg = (path: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" d="${path}"/></svg>`;

export const gpuJobsIcon = new LabIcon({
  name: 'e31-jupyter:gpu-jobs',
  svgstr: svg(chip)
});

export const submitJobIcon = new LabIcon({
  name: 'e31-jupyter:submit-job',
  svgstr: svg(send)
});
