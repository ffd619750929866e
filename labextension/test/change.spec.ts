import { changeForm, updateRequest } from '../src/model/change';
import { deadlineInput } from '../src/model/format';
import { job } from './helpers';

describe('change', () => {
  const queued = job({
    state: 'queued',
    name: 'train',
    team: 'vision',
    request: { gpus: 2, max_runtime_s: 7200, expected_runtime_s: 3600, deadline: '2024-06-03T08:00:00Z' }
  });
  const original = changeForm(queued);

  it('starts from the job as it stands', () => {
    expect(original).toEqual({
      gpus: '2',
      maxRuntime: '2h',
      expectedRuntime: '1h',
      deadline: deadlineInput('2024-06-03T08:00:00Z'),
      name: 'train',
      team: 'vision',
      after: []
    });
  });

  it('shows the deadline in local time to the minute, with the offset that makes it the same moment', () => {
    const shown = deadlineInput('2024-06-03T08:00:59.123Z');
    expect(shown).toMatch(/^2024-06-0[23] \d\d:\d\d[+-]\d\d:\d\d$/);
    expect(new Date(shown.replace(' ', 'T')).toISOString()).toBe('2024-06-03T08:00:00.000Z');
    expect(deadlineInput(null)).toBe('');
    expect(deadlineInput('not a time')).toBe('not a time');
  });

  it('sends only what changed, and null for what was cleared', () => {
    expect(updateRequest(original, original, 4)).toEqual({ request: {}, errors: {} });
    const form = { ...original, gpus: '1', expectedRuntime: '', deadline: ' +6h ', name: 'train-small' };
    expect(updateRequest(form, original, 4)).toEqual({
      request: { gpus: 1, expected_runtime: null, deadline: '+6h', name: 'train-small' },
      errors: {}
    });
    expect(updateRequest({ ...original, maxRuntime: '' }, original, 4).request).toEqual({ max_runtime: null });
  });

  it('sends the jobs it runs after as the whole new list, once they differ', () => {
    const waiting = changeForm(job({ ...queued, request: { ...queued.request, after: ['a', 'b'] } }));
    expect(waiting.after).toEqual(['a', 'b']);
    expect(updateRequest({ ...waiting, after: ['b', 'a'] }, waiting, 4).request).toEqual({});
    expect(updateRequest({ ...waiting, after: ['a'] }, waiting, 4).request).toEqual({ after: ['a'] });
    expect(updateRequest({ ...waiting, after: [] }, waiting, 4).request).toEqual({ after: [] });
    expect(updateRequest({ ...original, after: ['c'] }, original, 4).request).toEqual({ after: ['c'] });
  });

  it('says what is wrong with a field and sends nothing', () => {
    expect(updateRequest({ ...original, gpus: 'two' }, original, 4)).toEqual({
      errors: { gpus: 'GPUs must be a whole number (0 for a CPU-only job).' }
    });
    expect(updateRequest({ ...original, gpus: '8' }, original, 4).errors.gpus).toBe(
      'This queue has 4 GPUs; ask for at most 4.'
    );
    expect(updateRequest({ ...original, gpus: ' ' }, original, 4).errors.gpus).toBe(
      'Say how many GPUs the job needs (0 for a CPU-only job).'
    );
    expect(updateRequest({ ...original, name: '' }, original, 4).errors.name).toBe(
      'A job keeps its name; type the new one, or put back "train".'
    );
  });
});
