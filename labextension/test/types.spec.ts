import {
  ALL_STATES,
  FINAL_STATES,
  isActive,
  isCancellable,
  isFinal,
  isResumable,
  stopUnderWay
} from '../src/model/types';

const saved = { after_cell: 1, saved_at: '2024-06-03T08:06:00Z', bytes: 2048, cannot_save: {} };

describe('job states', () => {
  it('knows every state the server has, each either active or stopped', () => {
    expect([...ALL_STATES].sort()).toEqual(
      ['cancelled', 'expired', 'failed', 'queued', 'running', 'succeeded', 'suspended'].sort()
    );
    for (const state of ALL_STATES) {
      expect(isActive({ state }) !== isFinal({ state })).toBe(true);
    }
  });

  it('counts a suspended job as stopped (it holds no GPUs), cancellable, and resumable with a checkpoint', () => {
    expect(isActive({ state: 'suspended' })).toBe(false);
    expect(FINAL_STATES.has('suspended')).toBe(true);
    expect(ALL_STATES.filter(state => isCancellable({ state }))).toEqual(['queued', 'running', 'suspended']);
    expect(isResumable({ state: 'suspended', last_checkpoint: saved })).toBe(true);
    expect(isResumable({ state: 'failed', last_checkpoint: saved })).toBe(true);
    expect(isResumable({ state: 'suspended', last_checkpoint: null })).toBe(false);
    expect(isResumable({ state: 'failed' })).toBe(false);
    for (const state of ['queued', 'running', 'succeeded', 'cancelled', 'expired'] as const) {
      expect(isResumable({ state, last_checkpoint: saved })).toBe(false);
    }
  });

  it("reads a stop under way from a running job's reason", () => {
    const reason = "suspending: asked by ada; it stops at its cell's end, with a checkpoint";
    expect(stopUnderWay({ state: 'running', reason })).toBe('suspending');
    expect(stopUnderWay({ state: 'running', reason: 'cancelling: cancelled by ada' })).toBe('cancelling');
    expect(stopUnderWay({ state: 'running', reason: null })).toBeNull();
    expect(stopUnderWay({ state: 'running', reason: 'restarted' })).toBeNull();
    expect(stopUnderWay({ state: 'suspended', reason: "suspended by ada at a cell's end" })).toBeNull();
  });
});
