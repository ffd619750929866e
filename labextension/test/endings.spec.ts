import { EndingsTracker, REMEMBER_MS, endingsKey } from '../src/model/endings';
import { planEndingNotices } from '../src/model/summary';
import { MemoryStorage, job } from './helpers';

const iso = (ms: number) => new Date(ms).toISOString();
const T = Date.parse('2024-06-03T08:00:00Z');

describe('EndingsTracker', () => {
  it('announces nothing the first time, and records what had ended', () => {
    const storage = new MemoryStorage();
    const tracker = new EndingsTracker(storage, 'k');
    const old = job({ state: 'succeeded', finished_at: iso(T) });
    expect(tracker.takeNew([old, job({ state: 'running' })])).toEqual([]);
    expect(tracker.hasRecord).toBe(true);
    expect(tracker.takeNew([old])).toEqual([]);
  });

  it('announces each ending once', () => {
    const tracker = new EndingsTracker(new MemoryStorage(), 'k');
    const running = job({ state: 'running' });
    tracker.takeNew([running]);
    const done = { ...running, state: 'succeeded' as const, finished_at: iso(T) };
    expect(tracker.takeNew([done]).map(j => j.id)).toEqual([running.id]);
    expect(tracker.takeNew([done])).toEqual([]);
  });

  it('announces jobs that ended while the browser was closed, once, in a new tab', () => {
    const storage = new MemoryStorage();
    const a = job({ state: 'queued' });
    new EndingsTracker(storage, 'k').takeNew([a]);
    // ... the browser closes; the job fails overnight; a new page loads:
    const failed = { ...a, state: 'failed' as const, finished_at: iso(T) };
    const expired = job({ state: 'expired', finished_at: iso(T + 1000) });
    const tab1 = new EndingsTracker(storage, 'k');
    const tab2 = new EndingsTracker(storage, 'k');
    expect(tab1.takeNew([expired, failed]).map(j => j.state)).toEqual(['expired', 'failed']);
    expect(tab2.takeNew([expired, failed])).toEqual([]);
  });

  it('announces a resumed job when it ends again', () => {
    const tracker = new EndingsTracker(new MemoryStorage(), 'k');
    tracker.takeNew([]);
    const failed = job({ state: 'failed', finished_at: iso(T) });
    expect(tracker.takeNew([failed])).toHaveLength(1);
    expect(tracker.takeNew([{ ...failed, state: 'queued', finished_at: null }])).toEqual([]);
    const again = { ...failed, state: 'succeeded' as const, finished_at: iso(T + 60000) };
    expect(tracker.takeNew([again]).map(j => j.state)).toEqual(['succeeded']);
    expect(tracker.takeNew([again])).toEqual([]);
  });

  it('announces a suspend, then the end of the run it was resumed for', () => {
    const tracker = new EndingsTracker(new MemoryStorage(), 'k');
    tracker.takeNew([]);
    const suspended = job({ state: 'suspended', finished_at: iso(T) });
    expect(tracker.takeNew([suspended]).map(j => j.state)).toEqual(['suspended']);
    expect(tracker.takeNew([suspended])).toEqual([]);
    expect(tracker.takeNew([{ ...suspended, state: 'running', finished_at: null }])).toEqual([]);
    const done = { ...suspended, state: 'succeeded' as const, finished_at: iso(T + 60000) };
    expect(tracker.takeNew([done]).map(j => j.state)).toEqual(['succeeded']);
  });

  it('keeps servers and users apart', () => {
    const storage = new MemoryStorage();
    const a = new EndingsTracker(storage, endingsKey('http://a/', 'ada'));
    const b = new EndingsTracker(storage, endingsKey('http://a/', 'bob'));
    a.takeNew([]);
    b.takeNew([]);
    const done = job({ state: 'succeeded', finished_at: iso(T) });
    expect(a.takeNew([done])).toHaveLength(1);
    expect(b.takeNew([done])).toHaveLength(1);
    expect(storage.data.size).toBe(2);
  });

  it('stays small: old endings fold into a cut-off time', () => {
    const storage = new MemoryStorage();
    const tracker = new EndingsTracker(storage, 'k');
    tracker.takeNew([]);
    const many = Array.from({ length: 50 }, (_, i) => job({ state: 'succeeded', finished_at: iso(T + i * 86400000) }));
    for (const j of many) {
      expect(tracker.takeNew([j])).toHaveLength(1);
    }
    const record = JSON.parse(storage.getItem('k')!);
    expect(Object.keys(record.seen).length).toBeLessThanOrEqual(15);
    expect(record.cutoff).toBe(T + 49 * 86400000 - REMEMBER_MS);
    // none of them is announced again, remembered or folded
    expect(tracker.takeNew(many)).toEqual([]);
  });

  it('survives a damaged record or a storage that throws', () => {
    const storage = new MemoryStorage();
    storage.setItem('k', '{not json');
    const tracker = new EndingsTracker(storage, 'k');
    expect(tracker.takeNew([job({ state: 'failed', finished_at: iso(T) })])).toEqual([]);
    const broken = new EndingsTracker(
      {
        getItem: () => {
          throw new Error('denied');
        },
        setItem: () => {
          throw new Error('denied');
        }
      },
      'k'
    );
    expect(broken.takeNew([job({ state: 'failed', finished_at: iso(T) })])).toEqual([]);
  });

  it('gives the endings of a night away in one batch: one summary, not twenty notices', () => {
    const storage = new MemoryStorage();
    new EndingsTracker(storage, 'k').takeNew([]);
    const night = Array.from({ length: 20 }, (_, i) =>
      job({ state: i === 7 ? 'failed' : 'succeeded', finished_at: iso(T + i * 60000) })
    );
    const batch = new EndingsTracker(storage, 'k').takeNew(night);
    expect(batch).toHaveLength(20);
    const notices = planEndingNotices(batch, true);
    expect(notices.map(n => n.message)).toEqual([
      `While you were away, 20 jobs ended: 19 succeeded, 1 failed (“${night[7].name}”).`
    ]);
  });
});
