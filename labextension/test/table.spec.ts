import { ApiError } from '../src/model/api';
import { applicable, ariaSort, bulkSummary, jobGpus, nextSort, runBulk, sortJobs, whyNot } from '../src/model/table';
import { IJob } from '../src/model/types';
import { job } from './helpers';

const names = (jobs: IJob[]) => jobs.map(j => j.name);
const meter = (gpu_hours: number, cost = 0) => ({ gpu_seconds: gpu_hours * 3600, gpu_hours, cost, currency: 'USD' });

describe('sorting the jobs table', () => {
  const jobs = [
    job({ name: 'beta', state: 'queued', queue_position: 2, request: { ...job().request, gpus: 2 } }),
    job({ name: 'Alpha', state: 'queued', queue_position: 1 }),
    job({
      name: 'gamma',
      state: 'succeeded',
      gpus: ['0', '1', '2'],
      meter: meter(3, 6),
      started_at: '2024-06-03T07:00:00Z',
      finished_at: '2024-06-03T08:00:00Z'
    }),
    job({ name: 'delta', state: 'running', gpus: ['3'], meter: meter(0.5, 1), started_at: '2024-06-03T08:30:00Z' })
  ];

  it("keeps the queue's order until a column is chosen", () => {
    expect(names(sortJobs(jobs, null))).toEqual(['delta', 'Alpha', 'beta', 'gamma']);
  });

  it('sorts by a column ascending, then descending on a second click', () => {
    const byName = nextSort(null, 'name');
    expect(byName).toEqual({ key: 'name', direction: 'ascending' });
    expect(names(sortJobs(jobs, byName))).toEqual(['Alpha', 'beta', 'delta', 'gamma']);
    const back = nextSort(byName, 'name');
    expect(back).toEqual({ key: 'name', direction: 'descending' });
    expect(names(sortJobs(jobs, back))).toEqual(['gamma', 'delta', 'beta', 'Alpha']);
    expect(nextSort(back, 'gpus')).toEqual({ key: 'gpus', direction: 'ascending' });
  });

  it('says which column sorts, and which way, as aria-sort', () => {
    const sort = nextSort(null, 'cost');
    expect(ariaSort(sort, 'cost')).toBe('ascending');
    expect(ariaSort(nextSort(sort, 'cost'), 'cost')).toBe('descending');
    expect(ariaSort(sort, 'name')).toBe('none');
    expect(ariaSort(null, 'name')).toBe('none');
  });

  it('puts jobs without a value (no place in line, not started) last, whichever the direction', () => {
    const ascending = { key: 'position' as const, direction: 'ascending' as const };
    expect(names(sortJobs(jobs, ascending))).toEqual(['Alpha', 'beta', 'delta', 'gamma']);
    expect(names(sortJobs(jobs, { ...ascending, direction: 'descending' }))).toEqual([
      'beta',
      'Alpha',
      'delta',
      'gamma'
    ]);
    expect(names(sortJobs(jobs, { key: 'time', direction: 'descending' }))).toEqual([
      'delta',
      'gamma',
      'Alpha',
      'beta'
    ]);
  });

  it('sorts by GPUs held or asked for, by the live meter, and by cost', () => {
    expect(jobGpus(jobs[0])).toBe(2);
    expect(jobGpus(jobs[2])).toBe(3);
    expect(names(sortJobs(jobs, { key: 'gpus', direction: 'descending' }))).toEqual([
      'gamma',
      'beta',
      'delta',
      'Alpha'
    ]);
    const live = (j: IJob) => (j.name === 'delta' ? 5 : j.meter.gpu_hours);
    expect(names(sortJobs(jobs, { key: 'meter', direction: 'descending' }, live))).toEqual([
      'delta',
      'gamma',
      'Alpha',
      'beta'
    ]);
    expect(names(sortJobs(jobs, { key: 'cost', direction: 'descending' }))).toEqual([
      'gamma',
      'delta',
      'Alpha',
      'beta'
    ]);
  });

  it('sorts states by their names', () => {
    expect(names(sortJobs(jobs, { key: 'state', direction: 'ascending' }))).toEqual([
      'Alpha',
      'beta',
      'delta',
      'gamma'
    ]);
  });
});

describe('bulk actions', () => {
  const queued = job({ name: 'waits', state: 'queued' });
  const running = job({ name: 'runs', state: 'running' });
  const succeeded = job({ name: 'done', state: 'succeeded', started_at: '2024-06-03T07:00:00Z' });
  const failed = job({ name: 'broke', state: 'failed' });
  const emptied = job({
    name: 'emptied',
    state: 'succeeded',
    files_deleted: { at: '2024-06-03T09:00:00Z', by: 'ada', bytes: 1 }
  });
  const all = [queued, running, succeeded, failed, emptied];

  it('apply to the jobs they can act on: cancel to active ones, delete files to ended ones, collect to successes', () => {
    expect(names(applicable('cancel', all))).toEqual(['waits', 'runs']);
    expect(names(applicable('deleteFiles', all))).toEqual(['done', 'broke']);
    expect(names(applicable('collect', all))).toEqual(['done']);
  });

  it('say why they leave a job alone', () => {
    expect(whyNot('cancel', succeeded)).toBe('already succeeded');
    expect(whyNot('deleteFiles', running)).toBe('still running');
    expect(whyNot('deleteFiles', emptied)).toBe('files already deleted');
    expect(whyNot('collect', failed)).toBe('failed, not succeeded');
    expect(whyNot('collect', emptied)).toBe('its files were deleted');
  });

  it('act on each job they apply to, and report job by job what the server answered', async () => {
    const acted: string[] = [];
    const report = await runBulk('cancel', [queued, running, succeeded], async j => {
      acted.push(j.name);
      if (j.name === 'runs') {
        throw new ApiError('The job ended meanwhile.', 409);
      }
    });
    expect(acted).toEqual(['waits', 'runs']);
    expect(report.outcomes.map(o => [o.job.name, o.done, o.why])).toEqual([
      ['waits', true, ''],
      ['runs', false, 'The job ended meanwhile.'],
      ['done', false, 'already succeeded']
    ]);
    expect(bulkSummary(report)).toBe(
      'Cancelled 1 job. Not cancelled: “runs” (The job ended meanwhile.), “done” (already succeeded).'
    );
  });

  it('say all went well in a few words', async () => {
    const report = await runBulk('deleteFiles', [succeeded, failed], async () => undefined);
    expect(bulkSummary(report)).toBe('Deleted the files of 2 jobs.');
    expect(bulkSummary(await runBulk('collect', [succeeded], async () => undefined))).toBe(
      'Opened the results of 1 job.'
    );
    expect(bulkSummary({ action: 'cancel', outcomes: [] })).toBe('No job selected.');
  });
});
