import {
  checkTimeFields,
  deadlinePreview,
  initialForm,
  readDeadline,
  readDuration,
  resubmitRequest,
  submitRequest,
  timeFieldNote
} from '../src/model/form';
import { job } from './helpers';

/** Thursday 3 December 2026, 20:00, local time (whatever the machine's time zone). */
const THURSDAY_EVENING = new Date(2026, 11, 3, 20, 0);
const source = { kind: 'path' as const, path: 'train.ipynb' };

function deadline(text: string, now: Date = THURSDAY_EVENING): Date {
  const read = readDeadline(text, now);
  if (!('value' in read)) {
    throw new Error(read.error);
  }
  return read.value;
}

describe('run times', () => {
  it.each([
    ['90m', 5400],
    ['6h', 21600],
    ['1d', 86400],
    ['1h30m', 5400],
    ['1h 30m', 5400],
    ['45s', 45],
    ['2W', 1209600],
    ['5400', 5400],
    ['1.5h', 5400]
  ])('reads %s as the server does', (text, seconds) => {
    expect(readDuration(text)).toEqual({ value: seconds });
  });

  it.each(['forever', 'soon', '90 minutes', '1h30', 'h', '-5m', '∞'])('refuses %s, saying how to write one', text => {
    const read = readDuration(text);
    expect(read).toHaveProperty('error');
    expect((read as { error: string }).error).toContain('90m');
  });

  it('refuses nothing and more than a year, as the server does', () => {
    expect(readDuration('0m')).toEqual({ error: 'A run time must be longer than zero and at most a year.' });
    expect(readDuration('400d')).toHaveProperty('error');
    expect(readDuration('366d')).toEqual({ value: 366 * 86400 });
  });

  it('previews what was read', () => {
    expect(timeFieldNote('maxRuntime', '90m', THURSDAY_EVENING)).toEqual({ value: '1h 30m' });
    expect(timeFieldNote('expectedRuntime', '5400', THURSDAY_EVENING)).toEqual({ value: '1h 30m' });
    expect(timeFieldNote('maxRuntime', '  ', THURSDAY_EVENING)).toBeNull();
  });
});

describe('deadlines', () => {
  it("reads a clock time as the next one, and previews it in the browser's time", () => {
    expect(deadline('08:00')).toEqual(new Date(2026, 11, 4, 8, 0));
    expect(deadlinePreview(deadline('08:00'), THURSDAY_EVENING)).toBe('Fri 08:00, local');
    expect(timeFieldNote('deadline', '08:00', THURSDAY_EVENING)).toEqual({ value: 'Fri 08:00, local' });
    const friday7am = new Date(2026, 11, 4, 7, 0);
    expect(deadline('08:00', friday7am)).toEqual(new Date(2026, 11, 4, 8, 0)); // later today
    expect(deadline('8am', new Date(2026, 11, 4, 8, 0))).toEqual(new Date(2026, 11, 5, 8, 0)); // now is not next
  });

  it('reads the forms the server takes', () => {
    expect(deadline('8:30 pm')).toEqual(new Date(2026, 11, 3, 20, 30));
    expect(deadline('tomorrow 18:00')).toEqual(new Date(2026, 11, 4, 18, 0));
    expect(deadline('Today 8am')).toEqual(new Date(2026, 11, 3, 8, 0));
    expect(deadline('+6h')).toEqual(new Date(2026, 11, 4, 2, 0));
    expect(deadline('2026-12-31T18:00')).toEqual(new Date(2026, 11, 31, 18, 0));
    expect(deadline('2026-12-31 18:00:30')).toEqual(new Date(2026, 11, 31, 18, 0, 30));
    expect(deadline('2026-12-31')).toEqual(new Date(2026, 11, 31));
    expect(deadline('2026-12-31T18:00Z')).toEqual(new Date(Date.UTC(2026, 11, 31, 18)));
    expect(deadline('2026-12-31T18:00+01:00')).toEqual(new Date(Date.UTC(2026, 11, 31, 17)));
  });

  it.each(['8', 'soon', 'forever', '+forever', '25:00', '13pm', 'tomorrow', 'next friday', '2026-02-31T08:00'])(
    'refuses %s, saying what it takes',
    text => {
      const read = readDeadline(text, THURSDAY_EVENING);
      expect((read as { error: string }).error).toMatch(/^Cannot read “.*” as a deadline: use 08:00, 8am/);
    }
  );

  it('dates a deadline a week or more away, and says when it has passed', () => {
    expect(deadlinePreview(new Date(2026, 11, 31, 18, 0), THURSDAY_EVENING)).toBe('Thu 31 Dec 18:00, local');
    expect(deadlinePreview(new Date(2027, 0, 4, 9, 5), THURSDAY_EVENING)).toBe('Mon 4 Jan 2027 09:05, local');
    expect(deadlinePreview(new Date(2001, 0, 1), THURSDAY_EVENING)).toBe('Mon 1 Jan 2001 00:00, local — in the past');
  });
});

describe("the form's time fields", () => {
  it("refuses 'forever' as a run time next to the field, and builds no request", () => {
    const form = { ...initialForm(source, []), maxRuntime: 'forever' };
    const built = submitRequest(form, source, [], 2, THURSDAY_EVENING);
    expect(built.request).toBeUndefined();
    expect(Object.keys(built.errors)).toEqual(['maxRuntime']);
    expect(built.errors.maxRuntime).toContain('“forever”');
  });

  it('takes 90m, and sends the fields as typed', () => {
    const form = { ...initialForm(source, []), maxRuntime: '90m', expectedRuntime: '1h', deadline: '08:00' };
    expect(submitRequest(form, source, [], 2, THURSDAY_EVENING)).toEqual({
      request: {
        path: 'train.ipynb',
        gpus: 1,
        max_runtime: '90m',
        expected_runtime: '1h',
        deadline: '08:00',
        name: 'train'
      },
      errors: {}
    });
  });

  it('leaves a deadline in the past to the server, which says why it refuses it', () => {
    const form = { ...initialForm(source, []), deadline: '2001-01-01T00:00' };
    expect(checkTimeFields(form, THURSDAY_EVENING)).toEqual({});
  });

  it('checks a resubmit the same way', () => {
    const start = initialForm({ kind: 'job', job: job() }, []);
    const built = resubmitRequest({ ...start, expectedRuntime: 'a while', deadline: 'soon' }, start, [], 2);
    expect(Object.keys(built.errors).sort()).toEqual(['deadline', 'expectedRuntime']);
  });
});
