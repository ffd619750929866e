import { endStepLabel, lastPrintedLine, progressWords, stoppedWords } from '../src/model/detail';
import { IJob } from '../src/model/types';
import { job } from './helpers';

const started = { started_at: '2024-06-03T08:01:00+00:00', finished_at: '2024-06-03T08:05:00+00:00' };

function ended(state: IJob['state'], progress: IJob['progress']): IJob {
  return job({ ...started, state, progress, reason: 'cell 3 raised ZeroDivisionError: division by zero' });
}

describe('progressWords', () => {
  it('says where a failed job stopped, not "3 of 3 cells"', () => {
    // papermill counts the cell a job failed in as done, and the current cell is cleared
    const failed = ended('failed', { cells_done: 3, cells_total: 3, current_cell: null });
    expect(progressWords(failed)).toEqual({ text: 'stopped in cell 3 of 3', stopped: true });
  });

  it('takes the cell it was running when the progress still names it', () => {
    const cancelled = ended('cancelled', { cells_done: 1, cells_total: 4, current_cell: 1 });
    expect(progressWords(cancelled)).toEqual({ text: 'stopped in cell 2 of 4', stopped: true });
  });

  it('says a job stopped before its first cell, and with no count of cells', () => {
    expect(progressWords(ended('failed', { cells_done: 0, cells_total: 5 })).text).toBe('stopped before cell 1 of 5');
    expect(progressWords(ended('expired', { cells_done: 2, cells_total: null })).text).toBe('stopped in cell 2');
  });

  it('counts cells for a job that succeeded, runs or is suspended', () => {
    expect(progressWords(ended('succeeded', { cells_done: 3, cells_total: 3 }))).toEqual({
      text: '3 of 3 cells',
      stopped: false
    });
    const running = job({
      state: 'running',
      started_at: started.started_at,
      progress: { cells_done: 1, cells_total: 3 }
    });
    expect(progressWords(running).text).toBe('1 of 3 cells');
    expect(progressWords(ended('suspended', { cells_done: 2, cells_total: 3 })).stopped).toBe(false);
  });

  it('says a job that never ran did not start, though it was cancelled or expired', () => {
    expect(progressWords(job({ state: 'queued' }))).toEqual({ text: 'not started', stopped: false });
    expect(progressWords(job({ state: 'cancelled', finished_at: started.finished_at }))).toEqual({
      text: 'not started',
      stopped: false
    });
    expect(progressWords(job({ state: 'running', started_at: started.started_at })).text).toBe('—');
  });
});

describe('stoppedWords', () => {
  it('counts cells from 1', () => {
    expect(stoppedWords({ cells_done: 0, cells_total: 2, current_cell: 0 })).toBe('stopped in cell 1 of 2');
  });
});

describe('endStepLabel', () => {
  it('names how a job ended when it did not succeed, "Finished" when it did', () => {
    expect(endStepLabel(job({ state: 'failed' }))).toBe('Failed');
    expect(endStepLabel(job({ state: 'cancelled' }))).toBe('Cancelled');
    expect(endStepLabel(job({ state: 'expired' }))).toBe('Expired');
    expect(endStepLabel(job({ state: 'suspended' }))).toBe('Suspended');
    expect(endStepLabel(job({ state: 'succeeded' }))).toBe('Finished');
    expect(endStepLabel(job({ state: 'running' }))).toBe('Finished');
  });
});

describe('lastPrintedLine', () => {
  const printing = (state: IJob['state'], last_line: string | null | undefined) =>
    job({ state, progress: { cells_done: 1, cells_total: 3, last_line } });

  it("shows a running job's latest printed line", () => {
    expect(lastPrintedLine(printing('running', 'epoch 7/12'))).toBe('epoch 7/12');
    expect(lastPrintedLine(printing('running', '  loss 0.31 \n'))).toBe('loss 0.31');
  });

  it('shows none when it printed nothing, and none once it is not running', () => {
    expect(lastPrintedLine(printing('running', null))).toBeNull();
    expect(lastPrintedLine(printing('running', undefined))).toBeNull();
    expect(lastPrintedLine(printing('running', '   '))).toBeNull();
    expect(lastPrintedLine(printing('succeeded', 'epoch 12/12'))).toBeNull();
  });
});
