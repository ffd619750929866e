import {
  AwayTracker,
  SUCCESS_CLOSE_MS,
  autoCloseFor,
  planEndingNotices,
  quotedNames,
  summaryText,
  summaryType
} from '../src/model/summary';
import { IJob, JobState } from '../src/model/types';
import { job } from './helpers';

const ended = (state: JobState, name?: string): IJob =>
  job({
    state,
    ...(name ? { name } : {}),
    started_at: '2024-06-03T08:00:00Z',
    finished_at: '2024-06-03T09:00:00Z'
  });

const many = (n: number, state: JobState) => Array.from({ length: n }, () => ended(state));

describe('planEndingNotices', () => {
  it('groups the endings found on return into one summary', () => {
    const jobs = [...many(5, 'succeeded'), ended('failed', 'train')];
    const notices = planEndingNotices(jobs, true);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({
      kind: 'summary',
      message: 'While you were away, 6 jobs ended: 5 succeeded, 1 failed (“train”).',
      type: 'error',
      autoClose: false
    });
    expect(notices[0].openJob?.name).toBe('train');
  });

  it('keeps one notice for a single ending: a success closes, a failure stays', () => {
    const [success] = planEndingNotices([ended('succeeded', 'fit')], false);
    expect(success).toMatchObject({ kind: 'single', type: 'success', autoClose: SUCCESS_CLOSE_MS });
    expect(success.message).toMatch(/^Job “fit” succeeded/);
    const [failure] = planEndingNotices([ended('failed', 'fit')], true);
    expect(failure).toMatchObject({ kind: 'single', type: 'error', autoClose: false });
  });

  it('tells nothing of cancellations alone, and counts them in a summary', () => {
    expect(planEndingNotices(many(3, 'cancelled'), true)).toEqual([]);
    const [single] = planEndingNotices([ended('failed', 'x'), ...many(4, 'cancelled')], true);
    expect(single.kind).toBe('single');
    const [summary] = planEndingNotices([...many(2, 'succeeded'), ...many(3, 'cancelled')], true);
    expect(summary.message).toBe('While you were away, 5 jobs ended: 2 succeeded, 3 cancelled.');
    expect(summary.autoClose).toBe(SUCCESS_CLOSE_MS);
  });

  it('says nothing of being away for endings found while the page is on screen', () => {
    const [summary] = planEndingNotices(many(2, 'succeeded'), false);
    expect(summary.message).toBe('2 jobs ended: 2 succeeded.');
  });

  it('offers to open the failed job only when exactly one failed', () => {
    const [two] = planEndingNotices([ended('failed'), ended('failed'), ended('succeeded')], true);
    expect(two.openJob).toBeNull();
    const [none] = planEndingNotices(many(3, 'succeeded'), true);
    expect(none.openJob).toBeNull();
  });
});

describe('summaryText', () => {
  it('names the states in a fixed order, and at most three failed jobs', () => {
    const jobs = [
      ended('expired'),
      ended('failed', 'a'),
      ended('failed', 'b'),
      ended('suspended'),
      ended('failed', 'c'),
      ended('failed', 'd'),
      ended('succeeded'),
      ended('failed', 'e')
    ];
    expect(summaryText(jobs, true)).toBe(
      'While you were away, 8 jobs ended: 1 succeeded, 5 failed (“a”, “b”, “c” and 2 more), 1 expired, 1 suspended.'
    );
  });

  it('counts twenty endings', () => {
    const jobs = [...many(4, 'succeeded'), ended('failed', 'broken'), ...many(15, 'cancelled')];
    expect(summaryText(jobs, true)).toBe(
      'While you were away, 20 jobs ended: 4 succeeded, 1 failed (“broken”), 15 cancelled.'
    );
  });
});

describe('which notices close on their own', () => {
  it('closes successes and cancellations; keeps failures, expiries and suspends', () => {
    expect(autoCloseFor([ended('succeeded'), ended('cancelled')])).toBe(SUCCESS_CLOSE_MS);
    for (const state of ['failed', 'expired', 'suspended'] as JobState[]) {
      expect(autoCloseFor([ended('succeeded'), ended(state)])).toBe(false);
    }
  });

  it('colours a summary by its worst ending', () => {
    expect(summaryType([ended('succeeded'), ended('expired'), ended('failed')])).toBe('error');
    expect(summaryType([ended('succeeded'), ended('expired')])).toBe('warning');
    expect(summaryType([ended('succeeded'), ended('suspended')])).toBe('info');
    expect(summaryType([ended('succeeded'), ended('cancelled')])).toBe('success');
  });
});

describe('quotedNames', () => {
  it('quotes every name up to the limit', () => {
    expect(quotedNames([ended('failed', 'a')])).toBe('“a”');
    expect(quotedNames([ended('failed', 'a'), ended('failed', 'b')], 1)).toBe('“a” and 1 more');
  });
});

describe('AwayTracker', () => {
  it('calls the first look after the page opens, and after the tab comes back, a return', () => {
    const away = new AwayTracker();
    expect(away.away).toBe(true);
    away.looked(1000);
    expect(away.away).toBe(true); // the page's first look
    away.looked(1000); // a change without a new poll (an error cleared): no new look
    expect(away.away).toBe(true);
    away.looked(2000);
    expect(away.away).toBe(false);
    away.left();
    away.looked(9000);
    expect(away.away).toBe(true);
    away.looked(10000);
    expect(away.away).toBe(false);
  });
});
