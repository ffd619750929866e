import { dayWindows, gpuHoursToday, gpuSecondsIn, liveGpuHours, meterSeries, niceCeiling } from '../src/model/meter';
import { IMeterReport } from '../src/model/types';
import { job } from './helpers';

const local = (y: number, m: number, d: number, h = 0, min = 0) => new Date(y, m - 1, d, h, min).getTime();
const iso = (ms: number) => new Date(ms).toISOString();

describe('the meter in the browser', () => {
  it('counts granted GPUs x time held within a window, nothing while queued', () => {
    const j = job({
      gpus: ['0', '1'],
      started_at: iso(local(2024, 6, 3, 9)),
      finished_at: iso(local(2024, 6, 3, 11))
    });
    const now = local(2024, 6, 3, 12);
    expect(gpuSecondsIn(j, 0, now, now)).toBe(2 * 2 * 3600);
    expect(gpuSecondsIn(j, local(2024, 6, 3, 10), now, now)).toBe(2 * 3600);
    expect(gpuSecondsIn(job({ gpus: [] }), 0, now, now)).toBe(0);
  });

  it("sums today's GPU-hours from local midnight, running jobs up to now", () => {
    const now = local(2024, 6, 3, 2);
    const yesterdayIntoToday = job({
      state: 'succeeded',
      gpus: ['0'],
      started_at: iso(local(2024, 6, 2, 23)),
      finished_at: iso(local(2024, 6, 3, 1))
    });
    const running = job({
      state: 'running',
      gpus: ['0', '1'],
      started_at: iso(local(2024, 6, 3, 1, 30))
    });
    expect(gpuHoursToday([yesterdayIntoToday, running], now)).toBeCloseTo(1 + 1);
  });

  it("moves a running job's meter on between polls", () => {
    const j = job({
      state: 'running',
      gpus: ['0', '1'],
      meter: { gpu_seconds: 3600, gpu_hours: 1, cost: 0 }
    });
    expect(liveGpuHours(j, 1000, 1000 + 1800 * 1000)).toBeCloseTo(2);
    expect(liveGpuHours({ ...j, state: 'succeeded' }, 1000, 5e6)).toBeCloseTo(1);
  });

  it('cuts the last days at local midnight, today ending now', () => {
    const now = new Date(2024, 5, 3, 15, 30);
    const days = dayWindows(now, 3);
    expect(days.map(d => d.date)).toEqual(['2024-06-01', '2024-06-02', '2024-06-03']);
    expect(days.map(d => d.label)).toEqual(['Sat 1', 'Sun 2', 'Mon 3']);
    expect(days[0].until.getTime()).toBe(days[1].since.getTime());
    expect(days[2].until).toBe(now);
  });

  it('stacks daily reports by team, biggest team first', () => {
    const days = dayWindows(new Date(2024, 5, 3, 12), 2);
    const report = (byTeam: Record<string, number>): IMeterReport => {
      const total = Object.values(byTeam).reduce((a, b) => a + b, 0);
      return {
        since: '',
        until: '',
        gpu_seconds: total * 3600,
        gpu_hours: total,
        cost: total * 2,
        currency: 'EUR',
        by_user: {},
        by_team: Object.fromEntries(
          Object.entries(byTeam).map(([t, h]) => [t, { gpu_seconds: h * 3600, gpu_hours: h, cost: 0 }])
        )
      };
    };
    const series = meterSeries(days, [report({ vision: 1, nlp: 0 }), report({ vision: 2, nlp: 4 })]);
    expect(series.teams).toEqual(['nlp', 'vision']); // 4 GPU-h before 3
    expect(series.hours).toEqual([{ vision: 1 }, { vision: 2, nlp: 4 }]);
    expect(series.maxDay).toBe(6);
    expect(series.totalHours).toBe(7);
    expect(series.totalCost).toBe(14);
    expect(series.currency).toBe('EUR');
  });

  it('rounds axis maxima up to 1, 2, 2.5 or 5 times a power of ten', () => {
    expect([0, 0.3, 0.07, 1, 1.2, 3, 7, 42].map(niceCeiling)).toEqual([1, 0.5, 0.1, 1, 2, 5, 10, 50]);
  });
});
