import { FORGET_MS, UnseenFailures, failuresKey, statusTooltip } from '../src/model/failures';
import { IJob, JobState } from '../src/model/types';
import { MemoryStorage, job } from './helpers';

const T = Date.parse('2024-06-03T08:00:00Z');
const ended = (state: JobState, at = T, name?: string): IJob =>
  job({ state, finished_at: new Date(at).toISOString(), ...(name ? { name } : {}) });

function tracker(storage = new MemoryStorage(), key = 'k'): UnseenFailures {
  return new UnseenFailures(storage, () => key);
}

describe('UnseenFailures', () => {
  it('counts announced failures only, not successes or failures never announced', () => {
    const failures = tracker();
    const failed = ended('failed');
    const old = ended('failed');
    failures.add([failed, ended('succeeded'), ended('expired')]);
    expect(failures.among([failed, old]).map(j => j.id)).toEqual([failed.id]);
  });

  it('clears every failure when the jobs list is looked at', () => {
    const failures = tracker();
    const jobs = [ended('failed'), ended('failed')];
    failures.add(jobs);
    expect(failures.among(jobs)).toHaveLength(2);
    failures.seeAll();
    expect(failures.among(jobs)).toEqual([]);
  });

  it('clears one failure when its job is opened', () => {
    const failures = tracker();
    const [a, b] = [ended('failed'), ended('failed')];
    failures.add([a, b]);
    failures.see([a.id, 'someone-else']);
    expect(failures.among([a, b])).toEqual([b]);
  });

  it('stops counting a resumed job, and counts it again when it fails again', () => {
    const failures = tracker();
    const failed = ended('failed');
    failures.add([failed]);
    const resumed = { ...failed, state: 'running' as const, finished_at: null };
    expect(failures.among([resumed])).toEqual([]);
    const again = ended('failed', T + 60000);
    failures.add([{ ...again, id: failed.id }]);
    expect(failures.among([{ ...again, id: failed.id }])).toHaveLength(1);
  });

  it('is shared by tabs and survives a reload (the browser storage)', () => {
    const storage = new MemoryStorage();
    const failed = ended('failed');
    tracker(storage).add([failed]);
    const otherTab = tracker(storage);
    expect(otherTab.among([failed])).toHaveLength(1);
    otherTab.see([failed.id]);
    expect(tracker(storage).among([failed])).toEqual([]);
  });

  it('keeps servers and users apart', () => {
    const storage = new MemoryStorage();
    const failed = ended('failed');
    tracker(storage, failuresKey('http://a/', 'ada')).add([failed]);
    expect(tracker(storage, failuresKey('http://a/', 'bob')).among([failed])).toEqual([]);
    expect(tracker(storage, failuresKey('http://a/', 'ada')).isKey(failuresKey('http://a/', 'ada'))).toBe(true);
  });

  it('forgets failures long older than the newest', () => {
    const storage = new MemoryStorage();
    const failures = tracker(storage);
    const old = ended('failed', T);
    const recent = ended('failed', T + FORGET_MS + 1000);
    failures.add([old]);
    failures.add([recent]);
    expect(failures.among([old, recent])).toEqual([recent]);
  });

  it('starts again from a damaged record', () => {
    const storage = new MemoryStorage();
    storage.setItem('k', '{not json');
    const failed = ended('failed');
    expect(tracker(storage).among([failed])).toEqual([]);
    tracker(storage).add([failed]);
    expect(tracker(storage).among([failed])).toHaveLength(1);
  });
});

describe('statusTooltip', () => {
  it('sums up the counts, and names failures not looked at', () => {
    expect(statusTooltip({ running: 2, queued: 1 }, [], '1.5 GPU-h')).toBe(
      'GPU jobs: 2 running, 1 queued; 1.5 GPU-h today.\nClick to open the jobs panel.'
    );
    const text = statusTooltip({ running: 0, queued: 0 }, [ended('failed', T, 'train')], '0 GPU-h');
    expect(text).toContain('1 failed, not looked at yet: “train”.');
  });
});
