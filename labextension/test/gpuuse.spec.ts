import {
  absentWords,
  formatMemory,
  formatPercent,
  formatWatts,
  gpuName,
  gpuUseFigures,
  heldUsedWords,
  outsideWords,
  poolGpuWords,
  readingUtil,
  readingWords,
  returnedWords,
  sparklineSegments,
  svgPoints,
  usedOfHeldWords
} from '../src/model/gpuuse';
import { addUsed, dayWindows, meterSeries, NOTHING_USED } from '../src/model/meter';
import { IGpu, IGpuReading, IGpuUse, IMeterReport, IUsage } from '../src/model/types';

const GiB = 1024 ** 3;

function measured(overrides: Partial<IGpuUse> = {}): IGpuUse {
  return {
    available: true,
    why_absent: null,
    sample_s: 5,
    series: [
      [1000, 10, 2 * GiB, 100],
      [1005, 90, 7.8 * GiB, 250]
    ],
    util_mean: 42.4,
    util_peak: 97.2,
    memory_peak_bytes: Math.round(7.8 * GiB),
    power_peak_w: 245.3,
    used_gpu_hours: 0.42,
    held_gpu_hours: 1,
    idle: null,
    returned: [],
    ...overrides
  };
}

const NO_NVML = 'NVML is not available on this machine (no NVIDIA driver)';

function absent(): IGpuUse {
  return {
    available: false,
    why_absent: NO_NVML,
    sample_s: 5,
    series: [],
    util_mean: null,
    util_peak: null,
    memory_peak_bytes: null,
    power_peak_w: null,
    used_gpu_hours: null,
    held_gpu_hours: 0.5,
    idle: null,
    returned: []
  };
}

describe("a job's GPU use", () => {
  it('formats its figures in human units', () => {
    expect(formatPercent(42.4)).toBe('42%');
    expect(formatWatts(245.3)).toBe('245 W');
    expect(formatMemory(Math.round(7.8 * GiB))).toBe('7.8 GiB');
    expect(formatMemory(512 * 1024 ** 2)).toBe('512 MiB');
    expect(formatMemory(80 * GiB)).toBe('80 GiB');
    expect(formatMemory(900)).toBe('900 B');
  });

  it('lists mean and peak utilisation, peak memory and power, and used of held GPU-hours', () => {
    expect(gpuUseFigures(measured())).toEqual([
      { label: 'Utilisation', value: 'mean 42%, peak 97%' },
      { label: 'Peak memory', value: '7.8 GiB' },
      { label: 'Peak power', value: '245 W' },
      { label: 'GPU-hours', value: 'used 0.42 of 1.00 GPU-h held' }
    ]);
  });

  it('leaves out a figure NVML could not give rather than show it as zero', () => {
    const figures = gpuUseFigures(measured({ power_peak_w: null, util_peak: null, used_gpu_hours: null }));
    expect(figures.map(f => f.label)).toEqual(['Utilisation', 'Peak memory', 'GPU-hours']);
    expect(figures[0].value).toBe('mean 42%');
    expect(figures[2].value).toBe('1.00 GPU-h held, used: not measured');
  });

  it('shows a truly idle GPU as 0%, since it was measured', () => {
    const figures = gpuUseFigures(measured({ util_mean: 0, util_peak: 0, used_gpu_hours: 0 }));
    expect(figures[0].value).toBe('mean 0%, peak 0%');
    expect(figures[3].value).toBe('used 0 of 1.00 GPU-h held');
  });

  it('when absent has no figures, only the reason why', () => {
    const use = absent();
    expect(gpuUseFigures(use)).toEqual([]);
    expect(absentWords(use)).toBe(NO_NVML);
    expect(absentWords(use)).not.toMatch(/\b0(\.0+)?\s*(%|W|B|GiB)/);
    expect(absentWords({ ...use, why_absent: null })).toBe('No figures could be taken for its GPUs.');
  });

  it('names a GPU by its index, or by its UUID or MIG id alone', () => {
    expect(gpuName('1')).toBe('GPU 1');
    expect(gpuName('GPU-aef69e32-bf27')).toBe('GPU-aef69e32-bf27');
    expect(gpuName('MIG-GPU-0a1b/1/0')).toBe('MIG-GPU-0a1b/1/0');
    const at = new Date(2024, 5, 3, 10, 42).toISOString();
    expect(returnedWords({ device: 'GPU-aef6', at }, new Date(2024, 5, 3, 12))).toBe(
      'gave back GPU-aef6 at 10:42, idle'
    );
  });

  it('says which GPUs it gave back, and when', () => {
    const at = new Date(2024, 5, 3, 10, 42).toISOString();
    expect(returnedWords({ device: '1', at }, new Date(2024, 5, 3, 12))).toBe('gave back GPU 1 at 10:42, idle');
  });

  it('says used of held, and not measured where there is no reading', () => {
    expect(usedOfHeldWords(4.1, 12)).toBe('used 4.10 of 12.0 GPU-h held');
    expect(usedOfHeldWords(null, 12)).toBe('12.0 GPU-h held, used: not measured');
  });
});

describe('the utilisation sparkline', () => {
  it('spreads time over the width, 100% at the top', () => {
    const segments = sparklineSegments(
      [
        [100, 0, null, null],
        [110, 50, null, null],
        [120, 100, null, null]
      ],
      200,
      40
    );
    expect(segments).toEqual([
      [
        [0, 40],
        [100, 20],
        [200, 0]
      ]
    ]);
    expect(svgPoints(segments[0])).toBe('0,40 100,20 200,0');
  });

  it('breaks the line where a sample has no utilisation, keeping the gap in time', () => {
    const segments = sparklineSegments(
      [
        [0, 20, 1, 1],
        [10, 40, 1, 1],
        [20, null, 1, 1],
        [30, 60, 1, 1],
        [40, null, null, null]
      ],
      40,
      10
    );
    expect(segments).toEqual([
      [
        [0, 8],
        [10, 6]
      ],
      [[30, 4]]
    ]);
  });

  it('clamps readings outside 0-100%, and draws nothing for no samples or all nulls', () => {
    expect(sparklineSegments([[5, 130, null, null]], 10, 10)).toEqual([[[10, 0]]]);
    expect(sparklineSegments([], 10, 10)).toEqual([]);
    expect(sparklineSegments([[5, null, 1, 1]], 10, 10)).toEqual([]);
  });
});

describe('held against used on the meter', () => {
  it('words held and used GPU-hours', () => {
    expect(heldUsedWords(12, 4.1)).toBe('12.0 GPU-h held, 4.10 used');
    expect(heldUsedWords(12, null)).toBe('12.0 GPU-h held, used: not measured');
    expect(heldUsedWords(12, undefined)).toBe('12.0 GPU-h held, used: not measured');
    expect(heldUsedWords(12, 4.1, true)).toBe('12.0 GPU-h held, 4.10 used where measured');
  });

  it('sums used GPU-hours over readings, null until one was measured', () => {
    const usage = (held: number, used: number | null | undefined): IUsage => ({
      gpu_seconds: held * 3600,
      gpu_hours: held,
      cost: 0,
      used_gpu_hours: used
    });
    expect(addUsed(NOTHING_USED, usage(2, null))).toEqual({ hours: null, missing: true });
    expect(addUsed(addUsed(NOTHING_USED, usage(2, 1)), usage(3, 0.5))).toEqual({ hours: 1.5, missing: false });
    expect(addUsed(addUsed(NOTHING_USED, usage(2, 1)), usage(3, null))).toEqual({ hours: 1, missing: true });
    expect(addUsed(NOTHING_USED, usage(0, null))).toEqual(NOTHING_USED); // held nothing: nothing to measure
  });

  function report(byTeam: Record<string, [number, number | null]>, why: string | null): IMeterReport {
    const entries = Object.entries(byTeam);
    const held = entries.reduce((sum, [, [h]]) => sum + h, 0);
    const used = entries.some(([, [, u]]) => u === null) ? null : entries.reduce((sum, [, [, u]]) => sum + u!, 0);
    return {
      since: '',
      until: '',
      gpu_seconds: held * 3600,
      gpu_hours: held,
      cost: 0,
      currency: '',
      used_gpu_hours: used,
      used_why_absent: why,
      by_user: {},
      by_team: Object.fromEntries(
        entries.map(([team, [h, u]]) => [team, { gpu_seconds: h * 3600, gpu_hours: h, cost: 0, used_gpu_hours: u }])
      )
    };
  }

  it('carries held and used by team through the daily series, and the reason once', () => {
    const days = dayWindows(new Date(2024, 5, 3, 12), 2);
    const series = meterSeries(days, [
      report({ vision: [8, 3], nlp: [2, null] }, 'NVML is not available on the machine that ran nlp'),
      report({ vision: [4, 1.1] }, null)
    ]);
    expect(series.usedReported).toBe(true);
    expect(series.usedByTeam.vision).toEqual({ hours: 3 + 1.1, missing: false });
    expect(series.usedByTeam.nlp).toEqual({ hours: null, missing: true });
    expect(series.totalUsed).toEqual({ hours: 1.1, missing: true });
    expect(series.usedWhyAbsent).toBe('NVML is not available on the machine that ran nlp');
  });

  it('says nothing of used GPU-hours when the server does not report them', () => {
    const days = dayWindows(new Date(2024, 5, 3, 12), 1);
    const old = report({ vision: [8, 3] }, null);
    delete old.used_gpu_hours;
    delete old.used_why_absent;
    expect(meterSeries(days, [old]).usedReported).toBe(false);
  });
});

describe('a GPU busy outside the queue', () => {
  const gpu = (outside: IGpu['outside']): IGpu => ({
    id: '1',
    busy: false,
    job: null,
    job_name: null,
    owner: null,
    busy_outside: true,
    outside,
    reading: null
  });

  it('names who uses it and how much memory', () => {
    expect(
      outsideWords(
        gpu([
          { pid: 4242, user: 'bob', memory_bytes: Math.round(3.2 * GiB) },
          { pid: 4343, user: null, memory_bytes: null }
        ])
      )
    ).toBe('GPU 1 busy outside the queue: bob 3.2 GiB, pid 4343');
    expect(outsideWords(gpu(undefined))).toBe('GPU 1 busy outside the queue');
  });
});

describe("a pool GPU's last reading", () => {
  const reading = (overrides: Partial<IGpuReading> = {}): IGpuReading => ({
    util: 87.4,
    memory_used_bytes: Math.round(30.1 * GiB),
    memory_total_bytes: 80 * GiB,
    power_w: 245.2,
    ...overrides
  });
  const poolGpu = (overrides: Partial<IGpu> = {}): IGpu => ({
    id: '0',
    busy: true,
    job: 'j1',
    job_name: 'train',
    owner: 'alice',
    busy_outside: false,
    outside: [],
    reading: reading(),
    ...overrides
  });

  it('tells each figure NVML gave', () => {
    expect(readingWords(reading())).toBe('87% utilisation, 30.1 GiB of 80 GiB, 245 W');
    expect(readingWords(reading({ util: 0 }))).toBe('0% utilisation, 30.1 GiB of 80 GiB, 245 W');
  });

  it('leaves out a figure NVML did not give, and never says zero for it', () => {
    expect(readingWords(reading({ util: null, power_w: null }))).toBe('30.1 GiB of 80 GiB');
    expect(readingWords(reading({ memory_total_bytes: null }))).toBe('87% utilisation, 30.1 GiB used, 245 W');
    expect(readingWords(reading({ memory_used_bytes: null }))).toBe('87% utilisation, 245 W');
    const none = { util: null, memory_used_bytes: null, memory_total_bytes: null, power_w: null };
    expect(readingWords(none)).toBe('');
    expect(readingWords(null)).toBe('');
    expect(readingWords(undefined)).toBe('');
  });

  it('follows who holds the GPU in its tooltip', () => {
    expect(poolGpuWords(poolGpu())).toBe('GPU 0: busy (train) · 87% utilisation, 30.1 GiB of 80 GiB, 245 W');
    expect(poolGpuWords(poolGpu({ busy: false, job: null, job_name: null, reading: null }))).toBe('GPU 0: free');
    const outside = poolGpu({
      busy: false,
      busy_outside: true,
      outside: [{ pid: 4242, user: 'bob', memory_bytes: 3 * GiB }],
      reading: reading({ util: 12, power_w: null })
    });
    expect(poolGpuWords(outside)).toBe('GPU 0 busy outside the queue: bob 3 GiB · 12% utilisation, 30.1 GiB of 80 GiB');
  });

  it('fills a GPU as busy as it was, only where it was read', () => {
    expect(readingUtil(poolGpu())).toBe(87.4);
    expect(readingUtil(poolGpu({ reading: reading({ util: 130 }) }))).toBe(100);
    expect(readingUtil(poolGpu({ reading: reading({ util: null }) }))).toBeNull();
    expect(readingUtil(poolGpu({ reading: null }))).toBeNull();
  });
});
