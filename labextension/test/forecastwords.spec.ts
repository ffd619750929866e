import {
  checkedRequest,
  costSentence,
  estimateCost,
  forecastSentence,
  jobNames,
  jobsWords,
  rateFromInfo,
  rateFromUsage,
  withJobNames
} from '../src/model/forecastwords';
import { ISubmitCheck } from '../src/model/types';

const NOW = new Date('2026-12-04T08:00:00Z');
const inMinutes = (m: number) => new Date(NOW.getTime() + m * 60000).toISOString();
const names = jobNames([
  { id: '261204-b90c4400', name: 'resnet-baseline' },
  { id: '261204-0a1b2c3d', name: 'prep' }
]);

function check(overrides: Partial<ISubmitCheck> = {}): ISubmitCheck {
  return {
    submitted: false,
    name: 'train',
    queue_position: 2,
    expected_start: inMinutes(11),
    expected_end: inMinutes(71),
    expected_to_expire: false,
    warnings: [],
    ...overrides
  };
}

describe("the forecast's sentences", () => {
  it('say where the job would wait, and when it would start and end', () => {
    expect(forecastSentence(check(), names, NOW)).toBe(
      'Would wait at position 2, expected to start in 11m, expected to end in 1h 11m.'
    );
    expect(forecastSentence(check({ expected_start: inMinutes(0), expected_end: null }), names, NOW)).toBe(
      'Would start now.'
    );
  });

  it('name the jobs it would wait for by their names', () => {
    const after = check({ waiting_for: ['261204-b90c4400'], queue_position: null, expected_start: inMinutes(30) });
    expect(forecastSentence(after, names, NOW)).toBe(
      'Would wait for resnet-baseline to succeed, then join the line; expected to start in 30m.'
    );
  });

  it("shorten the id of a job whose name is not known (another user's)", () => {
    expect(jobsWords(['261204-b90c4400', '261204-deadbeef'], names)).toBe('resnet-baseline and job deadbeef');
    expect(jobsWords(['261204-b90c4400', '261204-0a1b2c3d', '261204-deadbeef'], names)).toBe(
      'resnet-baseline, prep and job deadbeef'
    );
    expect(jobsWords(['261204-b90c4400', '261204-0a1b2c3d', 'x-1', 'x-2'], names)).toBe(
      'resnet-baseline, prep and 2 more'
    );
  });

  it("put names for the ids in the server's reason for holding it back", () => {
    const held = check({
      held_back:
        'it would still be running when 261204-b90c4400, first in line, is due to start, on GPUs that job needs'
    });
    expect(forecastSentence(held, names, NOW)).toBe(
      'Would wait at position 2, expected to start in 11m, expected to end in 1h 11m. Held back though GPUs are ' +
        'free: it would still be running when “resnet-baseline”, first in line, is due to start, on GPUs that job needs.'
    );
    expect(withJobNames('behind 261204-deadbeef', names)).toBe('behind job deadbeef');
  });

  it('say when the cluster decides, or when the deadline is out of reach', () => {
    expect(forecastSentence(check({ queue_position: null }), names, NOW)).toBe(
      "The cluster's scheduler decides when it starts."
    );
    expect(forecastSentence(check({ expected_to_expire: true }), names, NOW)).toMatch(/^Would expire before it starts/);
  });
});

describe('the cost of a queued job', () => {
  const rate = { perGpuHour: 2.5, currency: 'EUR' };

  it("is GPUs x the expected run time x the meter's rate", () => {
    const estimate = estimateCost({ gpus: 2, max_runtime_s: 86400, expected_runtime_s: 5400 }, rate);
    expect(estimate).toMatchObject({ gpuHours: 3, cost: 7.5, basis: 'expected', currency: 'EUR' });
    expect(costSentence(estimate!)).toBe('Estimated cost: 7.50 EUR (~3.00 GPU-h: 2 GPUs × 1h 30m expected).');
  });

  it('is at most GPUs x the max run time when no run time is expected', () => {
    const estimate = estimateCost({ gpus: 1, max_runtime_s: 86400, expected_runtime_s: null }, rate);
    expect(costSentence(estimate!)).toBe('Estimated cost: up to 60.00 EUR (~24.0 GPU-h: 1 GPU × 1d at most).');
  });

  it('is told in GPU-hours while the rate is not known', () => {
    const estimate = estimateCost({ gpus: 1, max_runtime_s: 21600, expected_runtime_s: null }, null);
    expect(costSentence(estimate!)).toBe('Estimated use: ~6.00 GPU-h: 1 GPU × 6h at most (the rate is not known yet).');
  });

  it('is nothing without GPUs', () => {
    const estimate = estimateCost({ gpus: 0, max_runtime_s: 3600, expected_runtime_s: null }, rate);
    expect(costSentence(estimate!)).toBe('Estimated cost: none, a job without GPUs is not charged.');
  });

  it("reads the request from the server's check, which fills in its defaults", () => {
    const request = { gpus: 1, max_runtime_s: 86400, expected_runtime_s: null };
    expect(checkedRequest({ ...check(), request } as ISubmitCheck)).toEqual(request);
    expect(checkedRequest(check())).toBeNull();
  });

  it("takes the rate from the meter's largest usage, once it is large enough to tell", () => {
    const usage = (gpu_hours: number, cost: number) => ({
      gpu_seconds: gpu_hours * 3600,
      gpu_hours,
      cost,
      currency: 'EUR'
    });
    expect(rateFromUsage([usage(0.0003, 0.0008), usage(4, 10), usage(1, 2.5)])).toEqual(rate);
    expect(rateFromUsage([usage(0.0003, 0.0008)])).toBeNull();
    expect(rateFromUsage([usage(2, 0)])).toEqual({ perGpuHour: 0, currency: 'EUR' });
    expect(rateFromUsage([])).toBeNull();
  });

  it('takes the rate the server says it charges, and none from a server that does not say', () => {
    expect(rateFromInfo({ version: '1', gpu_hour_rate: 2.5, currency: 'EUR' })).toEqual(rate);
    expect(rateFromInfo({ version: '1', gpu_hour_rate: 0, currency: 'USD' })).toEqual({
      perGpuHour: 0,
      currency: 'USD'
    });
    expect(rateFromInfo({ version: '1' })).toBeNull();
  });
});
