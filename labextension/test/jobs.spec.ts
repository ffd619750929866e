import { EndingsTracker } from '../src/model/endings';
import { JobDetailModel } from '../src/model/detail';
import {
  JOB_EVENT_SCHEMA,
  JobsModel,
  costWords,
  expectedStartClock,
  failureReason,
  inQueueOrder,
  jobEventOwnerKey,
  jobSections,
  resultsPlace
} from '../src/model/jobs';
import { IJob } from '../src/model/types';
import { MemoryStorage, fakeApi, flush, job } from './helpers';

const backoff = { min: 1000, max: 4000, factor: 2, errorMax: 8000 };

function setup(
  initial: IJob[],
  info: Record<string, unknown> = { user: 'ada' },
  routes: Record<string, () => unknown> = {}
) {
  let jobs = initial;
  const server = fakeApi({
    'GET info': () => ({ version: '0.1.0', ...info }),
    'GET jobs': () => ({ jobs }),
    'GET gpus': () => ({ gpus: [], total: 2, free: 2, queued: 0, running: 0, source: 'configured' }),
    ...routes
  });
  const storage = new MemoryStorage();
  const model = new JobsModel({
    api: server.api,
    endings: user => new EndingsTracker(storage, `k:${user}`),
    backoff
  });
  const ended: string[] = [];
  model.ended.connect((_, jobs) => ended.push(...jobs.map(j => `${j.name}:${j.state}`)));
  return {
    model,
    calls: server.calls,
    ended,
    storage,
    setJobs: (next: IJob[]) => {
      jobs = next;
    },
    jobCalls: () => server.calls.filter(c => c === 'GET jobs').length
  };
}

describe('JobsModel', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("shows the caller's own jobs and counts them", async () => {
    const mine = [job({ state: 'running' }), job({ state: 'queued' }), job({ state: 'failed' })];
    const s = setup([...mine, job({ owner: 'bob', state: 'running' })], { user: 'ada', admin: true });
    s.model.refresh();
    await flush();
    expect(s.model.jobs).toHaveLength(3);
    expect(s.model.visibleJobs).toHaveLength(4);
    expect(s.model.isAdmin).toBe(true);
    expect(s.model.counts()).toEqual({ running: 1, queued: 1 });
    expect(s.model.filter('active')).toHaveLength(2);
    expect(s.model.filter('failed')).toHaveLength(1);
    expect(s.model.countsByFilter()).toMatchObject({ all: 3, active: 2, running: 1, queued: 1, failed: 1 });
    s.model.dispose();
  });

  it('counts a suspended job under its own filter, not as active, and stops polling for it', async () => {
    const running = job({ name: 'train', state: 'running', started_at: '2024-06-03T08:01:00Z' });
    const failed = job({ state: 'failed', finished_at: '2024-06-03T07:00:00Z' });
    const s = setup([running, failed]);
    s.model.refresh();
    await flush();
    expect(s.model.hasActive).toBe(true);
    s.setJobs([{ ...running, state: 'suspended', finished_at: '2024-06-03T08:30:00Z' }, failed]);
    jest.advanceTimersByTime(1000);
    await flush();
    expect(s.model.filter('suspended').map(j => j.name)).toEqual(['train']);
    expect(s.model.filter('active')).toEqual([]);
    expect(s.model.countsByFilter()).toMatchObject({ all: 2, active: 0, suspended: 1, failed: 1 });
    expect(s.model.counts()).toEqual({ running: 0, queued: 0 });
    expect(s.ended).toEqual(['train:suspended']); // announced, as news
    expect(s.model.hasActive).toBe(false);
    expect(s.model.isPolling).toBe(false); // it holds nothing and waits for the user: nothing to follow
    s.model.dispose();
  });

  it('polls nothing when no view watches and no job is active', async () => {
    const s = setup([job({ state: 'succeeded', finished_at: '2024-06-03T08:00:00Z' })]);
    s.model.refresh();
    await flush();
    expect(s.jobCalls()).toBe(1);
    expect(s.model.isPolling).toBe(false);
    jest.advanceTimersByTime(120000);
    await flush();
    expect(s.jobCalls()).toBe(1);
  });

  it("looks again when the server announces a change to the caller's job, and follows it", async () => {
    const s = setup([], { user: 'ada', events_key: 'k-ada' });
    s.model.refresh();
    await flush();
    s.model.jobChanged('k-bob'); // someone else's job: nothing to show
    jest.advanceTimersByTime(60000);
    await flush();
    expect(s.jobCalls()).toBe(1);

    s.setJobs([job({ id: 'j1', state: 'queued' })]); // submitted from a terminal
    s.model.jobChanged('k-ada');
    await flush();
    expect(s.jobCalls()).toBe(2);
    expect(s.model.counts()).toEqual({ running: 0, queued: 1 });
    expect(s.model.isPolling).toBe(true); // active: followed until it ends
    s.model.dispose();
  });

  it("looks again on an admin's page whoever's job changed (the panel can show everyone's)", async () => {
    const s = setup([], { user: 'root', admin: true, events_key: 'k-root' });
    s.model.refresh();
    await flush();
    s.model.jobChanged('k-bob');
    await flush();
    expect(s.jobCalls()).toBe(2);
    s.model.dispose();
  });

  it('polls while a view watches, with backoff, and stops when it is hidden', async () => {
    const s = setup([]);
    const view = s.model.watch({ pool: true });
    await flush();
    expect(s.calls).toContain('GET gpus');
    for (const delay of [1000, 2000, 4000, 4000]) {
      jest.advanceTimersByTime(delay);
      await flush();
    }
    expect(s.jobCalls()).toBe(5);
    view.dispose();
    jest.advanceTimersByTime(4000);
    await flush();
    expect(s.jobCalls()).toBe(6); // the tick already scheduled, then nothing
    jest.advanceTimersByTime(60000);
    await flush();
    expect(s.jobCalls()).toBe(6);
    expect(s.model.isPolling).toBe(false);
  });

  it('polls while a job is active until it ends, then announces the ending once', async () => {
    const running = job({ name: 'train', state: 'running' });
    const s = setup([running]);
    s.model.refresh();
    await flush();
    expect(s.model.isPolling).toBe(true);
    s.setJobs([{ ...running, state: 'succeeded', finished_at: '2024-06-03T09:00:00Z' }]);
    jest.advanceTimersByTime(1000);
    await flush();
    expect(s.ended).toEqual(['train:succeeded']);
    expect(s.model.isPolling).toBe(false);
    s.model.refresh();
    await flush();
    expect(s.ended).toEqual(['train:succeeded']);
  });

  it('follows an active job by id once newer jobs push it off the first page, until it ends', async () => {
    const old = job({ name: 'sweep', state: 'running' });
    let oldNow: IJob = old;
    const newer = [job({ state: 'queued' }), job({ state: 'queued' })];
    const s = setup([old], { user: 'ada' }, { [`GET jobs?id=${old.id}`]: () => ({ jobs: [oldNow] }) });
    s.model.refresh();
    await flush();

    s.setJobs(newer); // the server's first page now holds only newer jobs
    s.model.refresh();
    await flush();
    expect(s.calls).toContain(`GET jobs?id=${old.id}`);
    expect(s.model.counts()).toEqual({ running: 1, queued: 2 });
    expect(s.model.jobs.map(j => j.id)).toEqual([...newer.map(j => j.id), old.id]);

    oldNow = { ...old, state: 'succeeded', finished_at: '2024-06-03T09:00:00Z' };
    s.model.refresh();
    await flush();
    expect(s.ended).toEqual(['sweep:succeeded']);

    const asked = s.calls.length;
    s.model.refresh();
    await flush();
    expect(s.calls.slice(asked)).toEqual(['GET jobs']); // ended: no longer followed
    expect(s.model.jobs.map(j => j.id)).toEqual(newer.map(j => j.id));
    s.model.dispose();
  });

  it('stops polling in a hidden tab and catches up when it is shown', async () => {
    const running = job({ name: 'night', state: 'running' });
    const s = setup([running]);
    s.model.refresh();
    await flush();
    s.model.setPageVisible(false);
    jest.advanceTimersByTime(1000);
    await flush();
    const before = s.jobCalls();
    jest.advanceTimersByTime(600000);
    await flush();
    expect(s.jobCalls()).toBe(before);
    s.setJobs([{ ...running, state: 'expired', finished_at: '2024-06-03T09:00:00Z' }]);
    s.model.setPageVisible(true);
    await flush();
    expect(s.ended).toEqual(['night:expired']);
  });

  it('keeps the last error for the views and retries while wanted', async () => {
    const server = fakeApi({ 'GET info': () => [500, { message: 'Internal error' }] });
    const model = new JobsModel({ api: server.api, backoff });
    const view = model.watch();
    await flush();
    expect(model.error).toBe('Internal error');
    jest.advanceTimersByTime(2000);
    await flush();
    expect(server.calls).toHaveLength(2);
    view.dispose();
    model.dispose();
  });

  it('ticks the live meter and counts GPU-hours since midnight', async () => {
    let now = new Date(2024, 5, 3, 10).getTime();
    const server = fakeApi({
      'GET info': () => ({ user: 'ada' }),
      'GET jobs': () => ({
        jobs: [
          job({
            state: 'running',
            gpus: ['0', '1'],
            started_at: new Date(now - 3600 * 1000).toISOString(),
            meter: { gpu_seconds: 7200, gpu_hours: 2, cost: 0 }
          })
        ]
      })
    });
    const model = new JobsModel({ api: server.api, backoff, clock: () => now });
    model.refresh();
    await flush();
    now += 1800 * 1000;
    expect(model.liveGpuHours(model.jobs[0])).toBeCloseTo(3);
    expect(model.gpuHoursToday()).toBeCloseTo(3);
    model.dispose();
  });
});

describe('JobDetailModel', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('polls while shown and the job runs; fetches files once it has ended', async () => {
    let state = 'running';
    const server = fakeApi({
      'GET jobs/j1': () => ({ ...job({ id: 'j1' }), state, transitions: [] }),
      'GET jobs/j1/log': () => ({ text: `log while ${state}`, offset: 10, final: state !== 'running' }),
      'GET jobs/j1/files': () => ({ files: [{ path: 'result.txt', size: 3 }] })
    });
    const detail = new JobDetailModel(server.api, 'j1', backoff);
    detail.setVisible(true);
    await flush();
    expect(detail.log).toBe('log while running');
    expect(detail.files).toEqual([]);
    expect(detail.isPolling).toBe(true);
    state = 'succeeded';
    jest.advanceTimersByTime(1000);
    await flush();
    expect(detail.job!.state).toBe('succeeded');
    expect(detail.files).toEqual([{ path: 'result.txt', size: 3 }]);
    expect(detail.isPolling).toBe(false);
    expect(server.calls.filter(c => c === 'GET jobs/j1/files')).toHaveLength(1);
  });

  it('stops when hidden', async () => {
    const server = fakeApi({
      'GET jobs/j2': () => ({ ...job({ id: 'j2', state: 'queued' }), transitions: [] }),
      'GET jobs/j2/log': () => ({ text: '', offset: 0, final: false })
    });
    const detail = new JobDetailModel(server.api, 'j2', backoff);
    detail.setVisible(true);
    await flush();
    detail.setVisible(false);
    jest.advanceTimersByTime(60000);
    await flush();
    expect(server.calls.filter(c => c === 'GET jobs/j2')).toHaveLength(2);
    expect(detail.isPolling).toBe(false);
  });
});

describe('jobEventOwnerKey', () => {
  it("reads the owner's key of the server's job events and ignores other events", () => {
    expect(jobEventOwnerKey({ schema_id: JOB_EVENT_SCHEMA, owner_key: 'k-ada', state: 'queued' })).toBe('k-ada');
    expect(
      jobEventOwnerKey({ schema_id: 'https://events.jupyter.org/jupyter_server/kernel_actions/v1', owner_key: 'k' })
    ).toBeNull();
    expect(jobEventOwnerKey({ schema_id: JOB_EVENT_SCHEMA })).toBeNull();
  });
});

describe('jobSections', () => {
  const at = (hour: number, minute = 0) => new Date(2024, 5, 3, hour, minute).toISOString();
  const names = (jobs: IJob[]) => jobs.map(j => j.name);

  it('lists running jobs, then queued ones in line order (#1 first), then ended ones, newest finished first', () => {
    // The server's order: newest submitted first.
    const jobs = [
      job({ name: 'q4', state: 'queued', queue_position: 4, submitted_at: at(9, 4) }),
      job({ name: 'q3', state: 'queued', queue_position: 3, submitted_at: at(9, 3) }),
      job({ name: 'q2', state: 'queued', queue_position: 2, submitted_at: at(9, 2) }),
      job({ name: 'q1', state: 'queued', queue_position: 1, submitted_at: at(9, 1) }),
      job({ name: 'old-end', state: 'failed', submitted_at: at(8, 30), finished_at: at(8, 40) }),
      job({ name: 'run', state: 'running', submitted_at: at(8), started_at: at(8, 1) }),
      job({ name: 'new-end', state: 'succeeded', submitted_at: at(7), started_at: at(7, 1), finished_at: at(8, 50) })
    ];
    const sections = jobSections(jobs);
    expect(names(sections.running)).toEqual(['run']);
    expect(names(sections.queued)).toEqual(['q1', 'q2', 'q3', 'q4']);
    expect(names(sections.ended)).toEqual(['new-end', 'old-end']);
    expect(names(inQueueOrder(jobs))).toEqual(['run', 'q1', 'q2', 'q3', 'q4', 'new-end', 'old-end']);
  });

  it('puts queued jobs with no place yet (waiting for other jobs) after the line, oldest first', () => {
    const jobs = [
      job({ name: 'waits-new', state: 'queued', submitted_at: at(9, 30) }),
      job({ name: 'waits-old', state: 'queued', submitted_at: at(9, 10) }),
      job({ name: 'first', state: 'queued', queue_position: 1, submitted_at: at(9, 20) })
    ];
    expect(names(jobSections(jobs).queued)).toEqual(['first', 'waits-old', 'waits-new']);
  });

  it('lists the longest running first, and counts a suspended job as ended', () => {
    const jobs = [
      job({ name: 'later', state: 'running', started_at: at(9) }),
      job({ name: 'earlier', state: 'running', started_at: at(8) }),
      job({ name: 'paused', state: 'suspended', started_at: at(7), finished_at: at(7, 30) })
    ];
    const sections = jobSections(jobs);
    expect(names(sections.running)).toEqual(['earlier', 'later']);
    expect(names(sections.ended)).toEqual(['paused']);
  });

  it('orders ended jobs that never started by when they were submitted', () => {
    const jobs = [
      job({ name: 'cancelled-early', state: 'cancelled', submitted_at: at(6), finished_at: null }),
      job({ name: 'expired', state: 'expired', submitted_at: at(7), finished_at: at(7, 5) })
    ];
    expect(names(jobSections(jobs).ended)).toEqual(['expired', 'cancelled-early']);
  });
});

describe('expectedStartClock', () => {
  const now = new Date(2024, 5, 3, 9, 0);

  it("reads a queued job's expected start as a local clock time", () => {
    const start = new Date(2024, 5, 3, 10, 42).toISOString();
    expect(expectedStartClock(job({ state: 'queued', expected_start: start }), now)).toBe('~10:42');
  });

  it('names the day when it is not today, and says now once the time has come', () => {
    const tomorrow = new Date(2024, 5, 4, 7, 5);
    const weekday = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][tomorrow.getDay()];
    expect(expectedStartClock(job({ state: 'queued', expected_start: tomorrow.toISOString() }), now)).toBe(
      `~${weekday} 07:05`
    );
    const past = new Date(2024, 5, 3, 8, 59).toISOString();
    expect(expectedStartClock(job({ state: 'queued', expected_start: past }), now)).toBe('~now');
  });

  it('is null without a forecast, for a job that is not queued, and for a time it cannot read', () => {
    expect(expectedStartClock(job({ state: 'queued', expected_start: null }), now)).toBeNull();
    expect(expectedStartClock(job({ state: 'running', expected_start: now.toISOString() }), now)).toBeNull();
    expect(expectedStartClock(job({ state: 'queued', expected_start: 'soon' }), now)).toBeNull();
  });
});

describe('an ended job in the list', () => {
  it('gives its reason when it did not succeed', () => {
    expect(failureReason(job({ state: 'failed', reason: 'ZeroDivisionError in cell 3' }))).toBe(
      'ZeroDivisionError in cell 3'
    );
    expect(failureReason(job({ state: 'cancelled', reason: 'cancelled by ada' }))).toBe('cancelled by ada');
    expect(failureReason(job({ state: 'succeeded', reason: 'done' }))).toBeNull();
    expect(failureReason(job({ state: 'failed', reason: null }))).toBeNull();
    expect(failureReason(job({ state: 'queued', reason: 'waiting' }))).toBeNull();
  });

  it('costs its price where the queue charges one, else its GPU-hours', () => {
    const priced = job({ meter: { gpu_seconds: 7200, gpu_hours: 2, cost: 4.5, currency: 'EUR' } });
    expect(costWords(priced)).toBe('4.50 EUR');
    const free = job({ meter: { gpu_seconds: 5400, gpu_hours: 1.5, cost: 0, currency: 'USD' } });
    expect(costWords(free)).toBe('1.50 GPU-h');
  });

  it('has its results in its executed notebook once it ran and kept its files, else on its page', () => {
    const ran = { state: 'failed' as const, started_at: '2024-06-03T08:00:00Z' };
    expect(resultsPlace(job(ran))).toBe('notebook');
    expect(resultsPlace(job({ ...ran, files_deleted: { at: '2024-06-03T09:00:00Z', by: 'ada', bytes: 10 } }))).toBe(
      'page'
    );
    expect(resultsPlace(job({ state: 'cancelled', started_at: null }))).toBe('page');
  });
});
