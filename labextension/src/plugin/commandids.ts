/** The plugin's command ids and its command palette category. */

export namespace CommandIDs {
  export const submitNotebook = 'e31:submit-notebook';
  export const submitSelected = 'e31:submit-selected-notebook';
  export const showJobs = 'e31:show-jobs';
  export const showMeter = 'e31:show-meter';
  export const openJob = 'e31:open-job';
  export const openResults = 'e31:open-executed-notebook';
  export const openReport = 'e31:open-report';
  export const openJobsTable = 'e31:open-jobs-table';
}

export const CATEGORY = 'GPU Jobs';
