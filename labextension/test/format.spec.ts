import {
  STATE_LABELS,
  attemptsWords,
  checkpointWords,
  dayMonth,
  durationInput,
  endingNotice,
  expectedWords,
  formatBytes,
  formatDuration,
  formatGpuHours,
  formatTime,
  formatUntil,
  gpuList,
  jobSummary,
  outlookText,
  progressFraction,
  sweepName,
  valueNote
} from '../src/model/format';
import { ALL_STATES, ISubmitCheck } from '../src/model/types';
import { job } from './helpers';

describe('format', () => {
  it('says durations with at most two units', () => {
    expect([0, 42, 60, 5400, 3600, 86400 + 3600 + 61, null].map(formatDuration)).toEqual([
      '0s',
      '42s',
      '1m',
      '1h 30m',
      '1h',
      '1d 1h',
      '—'
    ]);
  });

  it('writes durations back the way the server reads them', () => {
    expect([5400, 3600, 86400, 90, 120, null].map(durationInput)).toEqual(['1h30m', '1h', '1d', '90', '2m', '']);
  });

  it('rounds GPU-hours to what matters', () => {
    expect([0, 0.0004, 0.005, 0.4249, 12.345, 1234.5].map(formatGpuHours)).toEqual([
      '0 GPU-h',
      '<0.001 GPU-h',
      '0.005 GPU-h',
      '0.42 GPU-h',
      '12.3 GPU-h',
      '1,235 GPU-h'
    ]);
  });

  it('shows times near now briefly', () => {
    const now = new Date(2024, 5, 5, 12, 0);
    expect(formatTime(new Date(2024, 5, 5, 8, 3).toISOString(), now)).toBe('08:03');
    expect(formatTime(new Date(2024, 5, 4, 8, 3).toISOString(), now)).toBe('Tue 08:03');
    expect(formatTime(new Date(2024, 4, 1, 8, 3).toISOString(), now)).toBe('2024-05-01 08:03');
    expect(formatTime(null, now)).toBe('—');
  });

  it('says how long until a forecast start, to the minute', () => {
    const now = new Date('2024-06-03T08:00:00Z');
    expect(formatUntil('2024-06-03T09:30:20Z', now)).toBe('in 1h 30m');
    expect(formatUntil('2024-06-03T08:00:20Z', now)).toBe('in under a minute');
    expect(formatUntil('2024-06-03T07:00:00Z', now)).toBe('now');
    expect(formatUntil(null, now)).toBe('—');
  });

  it('says what is expected of a queued job', () => {
    const now = new Date('2024-06-03T08:00:00Z');
    const queued = job({ state: 'queued', expected_start: '2024-06-03T09:00:00Z' });
    expect(expectedWords(queued, now)).toBe('expected to start in 1h');
    expect(expectedWords({ ...queued, expected_end: '2024-06-03T09:30:00Z' }, now)).toBe(
      'expected to start in 1h, to end in 1h 30m'
    );
    expect(expectedWords({ ...queued, expected_start: null, expected_to_expire: true }, now)).toBe(
      'expected to expire: its deadline is out of reach'
    );
    expect(expectedWords(job({ state: 'queued' }), now)).toBe('');
    expect(expectedWords({ ...queued, held_back: 'the last 4 GPUs are kept for short jobs' }, now)).toBe(
      'expected to start in 1h, held back though GPUs are free: the last 4 GPUs are kept for short jobs'
    );
    expect(expectedWords(job({ state: 'queued', held_back: 'long jobs hold their share' }), now)).toBe(
      'held back though GPUs are free: long jobs hold their share'
    );
  });

  it('says where a checked request would wait', () => {
    const now = new Date('2024-06-03T08:00:00Z');
    const check = (fields: Partial<ISubmitCheck>): ISubmitCheck => ({
      submitted: false,
      name: 'train',
      queue_position: 1,
      expected_start: '2024-06-03T08:00:00Z',
      expected_end: null,
      expected_to_expire: false,
      warnings: [],
      ...fields
    });
    expect(outlookText(check({}), now)).toBe('Would start now.');
    expect(
      outlookText(
        check({
          queue_position: 2,
          expected_start: '2024-06-04T08:00:00Z',
          held_back: 'long jobs hold their share'
        }),
        now
      )
    ).toBe(
      'Would wait at position 2, expected to start in 1d. Held back though GPUs are free: long jobs hold their share.'
    );
    expect(outlookText(check({ expected_end: '2024-06-03T08:10:00Z' }), now)).toBe(
      'Would start now, expected to end in 10m.'
    );
    expect(
      outlookText(
        check({ queue_position: 3, expected_start: '2024-06-03T10:00:00Z', expected_end: '2024-06-03T10:30:00Z' }),
        now
      )
    ).toBe('Would wait at position 3, expected to start in 2h, expected to end in 2h 30m.');
    expect(outlookText(check({ queue_position: 2, expected_start: null }), now)).toBe(
      'Would wait at position 2; when it would start cannot be told yet.'
    );
    expect(outlookText(check({ expected_start: null, expected_to_expire: true }), now)).toMatch(
      /^Would expire before it starts: its deadline is out of reach/
    );
    expect(outlookText(check({ queue_position: null, expected_start: null }), now)).toBe(
      "The cluster's scheduler decides when it starts."
    );
    const after = { queue_position: null, waiting_for: ['240603-b90c4400'] };
    expect(outlookText(check({ ...after, expected_start: null }), now)).toBe(
      'Would wait for job b90c4400 to succeed, then join the line.'
    );
    expect(outlookText(check({ ...after, expected_start: '2024-06-03T09:00:00Z' }), now)).toBe(
      'Would wait for job b90c4400 to succeed, then join the line; expected to start in 1h.'
    );
  });

  it('sums up where a job stands in a line', () => {
    const now = Date.parse('2024-06-03T08:10:00Z');
    expect(jobSummary(job({ state: 'queued', queue_position: 2 }), now)).toBe('waiting 10m');
    const due = job({ state: 'queued' });
    due.request.deadline = new Date(2024, 5, 3, 18, 30).toISOString();
    expect(jobSummary(due, new Date(2024, 5, 3, 9, 0).getTime())).toMatch(/^waiting .* · due 18:30$/);
    due.expected_start = new Date(2024, 5, 3, 10, 30).toISOString();
    expect(jobSummary(due, new Date(2024, 5, 3, 9, 0).getTime())).toMatch(
      /^waiting .* · starts in 1h 30m · due 18:30$/
    );
    const hopeless = { ...due, expected_start: null, expected_to_expire: true };
    expect(jobSummary(hopeless, new Date(2024, 5, 3, 9, 0).getTime())).toMatch(
      /^waiting .* · expected to expire · due 18:30$/
    );
    const after = { ...due, expected_start: null, waiting_for: ['240603-b90c4400'] };
    expect(jobSummary(after, new Date(2024, 5, 3, 9, 0).getTime())).toMatch(
      /^waiting .* · after job b90c4400 · due 18:30$/
    );
    expect(expectedWords(after)).toBe('waiting for 240603-b90c4400 to succeed');
    const chained = { ...after, expected_start: new Date(2024, 5, 3, 11, 0).toISOString() };
    expect(jobSummary(chained, new Date(2024, 5, 3, 9, 0).getTime())).toMatch(
      /^waiting .* · after job b90c4400 · starts in 2h · due 18:30$/
    );
    expect(expectedWords(chained, new Date(2024, 5, 3, 9, 0))).toBe(
      'waiting for 240603-b90c4400 to succeed, expected to start in 2h'
    );
    expect(
      jobSummary(
        job({
          state: 'running',
          started_at: '2024-06-03T08:05:00Z',
          progress: { cells_done: 2, cells_total: 5 }
        }),
        now
      )
    ).toBe('cell 3 of 5 · 5m');
    expect(
      jobSummary(
        job({
          state: 'running',
          started_at: '2024-06-03T08:05:00Z',
          expected_end: '2024-06-03T08:50:20Z',
          progress: { cells_done: 2, cells_total: 5 }
        }),
        now
      )
    ).toBe('cell 3 of 5 · 5m · ends in 40m');
    expect(
      jobSummary(
        job({ state: 'succeeded', started_at: '2024-06-03T08:05:00Z', finished_at: '2024-06-03T08:07:30Z' }),
        now
      )
    ).toBe('ran 2m 30s');
    expect(jobSummary(job({ state: 'cancelled', reason: 'cancelled by ada' }), now)).toBe('cancelled by ada');
  });

  it('names every state', () => {
    for (const state of ALL_STATES) {
      expect(STATE_LABELS[state]).toMatch(/^[A-Z][a-z]+$/);
    }
    expect(STATE_LABELS.suspended).toBe('Suspended');
  });

  it('sums up a suspended job, and a running one being suspended or cancelled', () => {
    const now = Date.parse('2024-06-03T08:10:00Z');
    const saved = { after_cell: 1, saved_at: '2024-06-03T08:06:00Z', bytes: 2048, cannot_save: {} };
    const ran = { started_at: '2024-06-03T08:05:00Z', finished_at: '2024-06-03T08:06:00Z' };
    expect(jobSummary(job({ state: 'suspended', last_checkpoint: saved, ...ran }), now)).toBe(
      'suspended after cell 2 · ran 1m'
    );
    expect(jobSummary(job({ state: 'suspended', last_checkpoint: null }), now)).toBe('suspended');
    const running = job({
      state: 'running',
      started_at: '2024-06-03T08:05:00Z',
      expected_end: '2024-06-03T08:50:20Z',
      progress: { cells_done: 1, cells_total: 3 }
    });
    const suspending = {
      ...running,
      reason: "suspending: asked by ada; it stops at its cell's end, with a checkpoint"
    };
    expect(jobSummary(suspending, now)).toBe('cell 2 of 3 · 5m · suspending');
    expect(jobSummary({ ...running, reason: 'cancelling: cancelled by ada' }, now)).toBe(
      'cell 2 of 3 · 5m · cancelling'
    );
    expect(jobSummary({ ...running, reason: 'anything else' }, now)).toBe('cell 2 of 3 · 5m · ends in 40m');
  });

  it('announces each ending in its own words, a suspend as neutral news and a cancel not at all', () => {
    const now = Date.parse('2024-06-03T08:10:00Z');
    const ran = { started_at: '2024-06-03T08:05:00Z', finished_at: '2024-06-03T08:07:30Z' };
    const meter = { gpu_seconds: 150, gpu_hours: 150 / 3600, cost: 0 };
    expect(endingNotice(job({ name: 'a', state: 'succeeded', gpus: ['0'], meter, ...ran }), now)).toEqual({
      message: 'Job “a” succeeded after 2m 30s (0.04 GPU-h).',
      type: 'success'
    });
    expect(endingNotice(job({ name: 'a', state: 'failed', reason: 'a cell raised' }), now)).toEqual({
      message: 'Job “a” failed: a cell raised',
      type: 'error'
    });
    expect(endingNotice(job({ name: 'a', state: 'expired' }), now)).toEqual({
      message: 'Job “a” expired before it could start.',
      type: 'warning'
    });
    const saved = { after_cell: 2, saved_at: '2024-06-03T08:07:00Z', bytes: 2048, cannot_save: {} };
    expect(endingNotice(job({ name: 'a', state: 'suspended', last_checkpoint: saved, ...ran }), now)).toEqual({
      message: 'Job “a” is suspended after cell 3, its GPUs given back; resume it from its page.',
      type: 'info'
    });
    expect(endingNotice(job({ name: 'a', state: 'suspended', reason: 'suspended by ada: stopped' }), now)).toEqual({
      message: 'Job “a” is suspended, its GPUs given back: suspended by ada: stopped',
      type: 'info'
    });
    expect(endingNotice(job({ state: 'cancelled', reason: 'cancelled by ada' }), now)).toBeNull();
    expect(endingNotice(job({ state: 'running' }), now)).toBeNull();
  });

  it('lists devices by id', () => {
    expect([gpuList(['0']), gpuList(['0', '1'])]).toEqual(['GPU 0', 'GPUs 0, 1']);
  });

  it('knows progress only when the cell count is known', () => {
    expect(progressFraction(job({ progress: { cells_done: 1, cells_total: 4 } }))).toBe(0.25);
    expect(progressFraction(job({ progress: { cells_done: 0, cells_total: null } }))).toBeNull();
  });

  it("splits a sweep's job name into its base and its point", () => {
    expect(sweepName('train[lr=0.1,batch=32]')).toEqual({ base: 'train', point: 'lr=0.1, batch=32' });
    expect(sweepName('train')).toEqual({ base: 'train', point: null });
    expect(sweepName('[lr=0.1]')).toEqual({ base: '[lr=0.1]', point: null });
    expect(sweepName('a[b]c')).toEqual({ base: 'a[b]c', point: null });
  });

  it('sizes files', () => {
    expect([12, 2048, 5 * 1024 * 1024].map(formatBytes)).toEqual(['12 B', '2.0 KB', '5.0 MB']);
  });

  it('says what a returned value is: type and size, the module it brings back, or why it is missing', () => {
    expect(
      [
        { name: 'scores', type: 'numpy.ndarray', size: 2048 },
        { name: 'np', type: 'module', size: 0, module: 'numpy' },
        { name: 'f', type: 'function', size: 0, skipped: 'it cannot be pickled' }
      ].map(valueNote)
    ).toEqual([
      'numpy.ndarray, 2.0 KB',
      'module numpy, imported again when collected',
      'not returned: it cannot be pickled'
    ]);
  });

  it("says a job's last checkpoint, counting cells from 1, and what it could not save", () => {
    const saved = { after_cell: 0, saved_at: '2024-06-03T08:00:00Z', bytes: 2048, cannot_save: {} };
    expect(checkpointWords(saved)).toBe('checkpoint after cell 1, 2.0 KB');
    const some = { ...saved, after_cell: 2, cannot_save: { log: 'an open file', lock: 'a lock' } };
    expect(checkpointWords(some)).toBe('checkpoint after cell 3, 2.0 KB; not saved: log, lock');
  });

  it('says how often a job was resumed and how its earlier runs ended', () => {
    const run = { started_at: null, finished_at: null, gpus_released_at: null, gpus: ['0'] };
    expect(attemptsWords([])).toBe('');
    expect(attemptsWords(undefined)).toBe('');
    expect(attemptsWords([{ ...run, state: 'failed', reason: 'timeout: ran longer than max_runtime (6s)' }])).toBe(
      'resumed 1 time; earlier run: failed (timeout: ran longer than max_runtime (6s))'
    );
    expect(
      attemptsWords([
        { ...run, state: 'failed', reason: 'lost' },
        { ...run, state: 'failed', reason: '' }
      ])
    ).toBe('resumed 2 times; earlier runs: failed (lost), failed');
  });
});

describe('dayMonth', () => {
  it("says a chart's day with its month", () => {
    expect(dayMonth('2024-12-03')).toBe('3 Dec');
    expect(dayMonth('2025-01-31')).toBe('31 Jan');
  });

  it('leaves what is not a date as it is', () => {
    expect(dayMonth('yesterday')).toBe('yesterday');
    expect(dayMonth('2024-13-01')).toBe('2024-13-01');
  });
});
