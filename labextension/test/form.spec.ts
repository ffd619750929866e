import {
  AFTER_CHOICES,
  afterChoiceText,
  afterChoices,
  initialForm,
  jobParameters,
  listedAfterChoices,
  requestToCheck,
  resubmitRequest,
  submitRequest
} from '../src/model/form';
import { parseParameters } from '../src/model/parameters';
import { IJob } from '../src/model/types';
import { job } from './helpers';

const params = parseParameters('epochs = 3\nlabel = "baseline"');

describe('the submit form', () => {
  it('starts from the notebook: its name, its parameters, the last team used', () => {
    const form = initialForm({ kind: 'path', path: 'work/train.ipynb' }, params, { team: 'vision' });
    expect(form).toMatchObject({
      name: 'train',
      team: 'vision',
      gpus: '1',
      parameters: { epochs: '3', label: 'baseline' }
    });
  });

  it('names a kernel only when one is typed in: else the notebook says', () => {
    const form = initialForm({ kind: 'path', path: 'train.ipynb' }, []);
    expect(form.kernel).toBe('');
    expect(submitRequest(form, { kind: 'path', path: 'train.ipynb' }, [], 2).request).not.toHaveProperty('kernel');
    form.kernel = 'python3';
    expect(submitRequest(form, { kind: 'path', path: 'train.ipynb' }, [], 2).request?.kernel).toBe('python3');
  });

  it('becomes a request with only the fields that were filled in', () => {
    const form = initialForm({ kind: 'path', path: 'train.ipynb' }, params);
    form.parameters.label = 'changed';
    form.deadline = ' 08:00 ';
    form.outputs = 'model.pt, plots/*.png\n';
    expect(submitRequest(form, { kind: 'path', path: 'train.ipynb' }, params, 2)).toEqual({
      request: {
        path: 'train.ipynb',
        gpus: 1,
        deadline: '08:00',
        name: 'train',
        outputs: ['model.pt', 'plots/*.png'],
        parameters: { label: 'changed' }
      },
      errors: {}
    });
  });

  it("asks for checkpoints when ticked, and leaves them to the queue's default when not", () => {
    const source = { kind: 'path' as const, path: 'train.ipynb' };
    const form = initialForm(source, params);
    expect(form.checkpoint).toBe(false);
    expect(submitRequest(form, source, params, 2).request).not.toHaveProperty('checkpoint');
    form.checkpoint = true;
    expect(submitRequest(form, source, params, 2).request?.checkpoint).toBe(true);
  });

  it('sends the jobs ticked to run after, and none when none is', () => {
    const source = { kind: 'path' as const, path: 'train.ipynb' };
    const form = initialForm(source, params);
    expect(submitRequest(form, source, params, 2).request?.after).toBeUndefined();
    form.after = ['240603-b90c4400', '240603-0a1b2c3d'];
    expect(submitRequest(form, source, params, 2).request?.after).toEqual(['240603-b90c4400', '240603-0a1b2c3d']);
  });

  it('offers the active jobs to run after, newest first', () => {
    const at = (i: number) => `2024-06-03T08:${String(i).padStart(2, '0')}:00Z`;
    const jobs = [
      job({ id: '240603-00000001', name: 'done', state: 'succeeded', submitted_at: at(1) }),
      job({ id: '240603-00000002', name: 'prep', state: 'running', submitted_at: at(2) }),
      job({ id: '240603-00000003', name: 'next', state: 'queued', submitted_at: at(3) }),
      // suspended: to be resumed, so the jobs after it wait on
      job({ id: '240603-00000004', name: 'paused', state: 'suspended', submitted_at: at(0) }),
      job({ id: '240603-00000005', name: 'gone', state: 'cancelled', submitted_at: at(4) })
    ];
    expect(afterChoices(jobs).map(j => j.name)).toEqual(['next', 'prep', 'paused']);
    expect(afterChoiceText(jobs[1])).toBe('prep · running · job 00000002');
    // A change lists the jobs the job already runs after, ended ones too (shown ticked).
    expect(afterChoices(jobs, ['240603-00000001']).map(j => j.name)).toEqual(['next', 'prep', 'done', 'paused']);
    expect(afterChoiceText(jobs[0])).toBe('done · succeeded · job 00000001');
  });

  it('lists the newest jobs to run after, every one ticked, and all once asked', () => {
    const at = (i: number) => `2024-06-03T08:${String(i).padStart(2, '0')}:00Z`;
    const many = Array.from({ length: 12 }, (_, i) => job({ id: `240603-${i}`, state: 'queued', submitted_at: at(i) }));
    const choices = afterChoices(many);
    expect(choices).toHaveLength(12);
    expect(choices[0].id).toBe('240603-11');
    const ids = (jobs: IJob[]) => jobs.map(j => j.id);
    expect(ids(listedAfterChoices(choices, [], false))).toEqual(ids(choices.slice(0, AFTER_CHOICES)));
    const ticked = listedAfterChoices(choices, ['240603-0'], false);
    expect(ticked).toHaveLength(AFTER_CHOICES + 1);
    expect(ticked[AFTER_CHOICES].id).toBe('240603-0');
    expect(listedAfterChoices(choices, [], true)).toHaveLength(12);
  });

  it('sends an open notebook as content', () => {
    const content = { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 };
    const source = { kind: 'content' as const, name: 'a.ipynb', content };
    const result = submitRequest(initialForm(source, []), source, [], 2);
    expect(result.request).toMatchObject({ notebook: content, notebook_name: 'a.ipynb' });
  });

  it('checks an open notebook without its outputs, and leaves the notebook itself alone', () => {
    const code = { cell_type: 'code', source: 'x = 1', metadata: {}, outputs: [{ output_type: 'stream' }] };
    const text = { cell_type: 'markdown', source: '# x', metadata: {} };
    const content = { cells: [code, text], metadata: {}, nbformat: 4, nbformat_minor: 5 };
    const request = { notebook: content, notebook_name: 'a.ipynb', gpus: 1 };
    expect(requestToCheck(request)).toEqual({
      ...request,
      notebook: { ...content, cells: [{ ...code, outputs: [] }, text] }
    });
    expect(code.outputs).toHaveLength(1);
    const byPath = { path: 'a.ipynb' };
    expect(requestToCheck(byPath)).toBe(byPath);
  });

  it('sends data next to the notebook, and the folder of an open notebook', () => {
    const path = { kind: 'path' as const, path: 'work/train.ipynb' };
    const form = initialForm(path, []);
    form.data = 'data, labels.csv\n/datasets/imagenet';
    expect(submitRequest(form, path, [], 2).request?.data).toEqual([
      'work/data',
      'work/labels.csv',
      '/datasets/imagenet'
    ]);
    const content = { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 };
    const open = { kind: 'content' as const, name: 'a.ipynb', content, folder: '' };
    const atRoot = initialForm(open, []);
    atRoot.data = 'data';
    expect(submitRequest(atRoot, open, [], 2).request).toMatchObject({ folder: '', data: ['data'] });
    expect(submitRequest(initialForm(path, []), path, [], 2).request).not.toHaveProperty('data');
  });

  it('keeps the GPUs within the inventory', () => {
    const source = { kind: 'path' as const, path: 'a.ipynb' };
    const form = initialForm(source, []);
    form.gpus = '3';
    expect(submitRequest(form, source, [], 2).errors.gpus).toBe('This queue has 2 GPUs; ask for at most 2.');
    form.gpus = '1.5';
    expect(submitRequest(form, source, [], 2).errors.gpus).toMatch(/whole number/);
    form.gpus = '1';
    expect(submitRequest(form, source, [], 0).errors.gpus).toMatch(/no GPUs/);
  });

  it('reports a bad parameter under its name', () => {
    const source = { kind: 'path' as const, path: 'a.ipynb' };
    const form = initialForm(source, params);
    form.parameters.epochs = 'many';
    expect(submitRequest(form, source, params, 2)).toEqual({
      errors: { 'parameters.epochs': 'epochs must be a whole number.' }
    });
  });
});

describe('the resubmit form', () => {
  const original = job({
    name: 'sweep',
    team: 'nlp',
    request: { gpus: 2, max_runtime_s: 5400, expected_runtime_s: null, deadline: '2024-01-01T00:00:00Z' },
    work: { notebook: 'sweep.ipynb', parameters: { lr: 0.1, tag: 'a' } },
    output: { files: ['*.pt'] }
  });

  it("starts from the job's request and parameters, without its old deadline", () => {
    const form = initialForm({ kind: 'job', job: original }, jobParameters(original));
    expect(form).toEqual({
      gpus: '2',
      deadline: '',
      maxRuntime: '1h30m',
      expectedRuntime: '',
      name: 'sweep',
      team: 'nlp',
      kernel: '',
      outputs: '*.pt',
      data: '',
      parameters: { lr: '0.1', tag: 'a' },
      after: [],
      checkpoint: false
    });
  });

  it('starts on the kernel the job ran on and sends another one typed in', () => {
    const ran = job({ ...original, work: { ...original.work, kernel: 'python3' } });
    const p = jobParameters(ran);
    const start = initialForm({ kind: 'job', job: ran }, p);
    expect(start.kernel).toBe('python3');
    expect(resubmitRequest({ ...start, kernel: ' conda-py311 ' }, start, p, 2)).toEqual({
      request: { kernel: 'conda-py311' },
      errors: {}
    });
  });

  it('sends only what changed', () => {
    const p = jobParameters(original);
    const start = initialForm({ kind: 'job', job: original }, p);
    const form = { ...start, parameters: { ...start.parameters, lr: '0.05' }, deadline: '+6h' };
    expect(resubmitRequest(form, start, p, 2)).toEqual({
      request: { deadline: '+6h', parameters: { lr: 0.05 } },
      errors: {}
    });
    expect(resubmitRequest(start, start, p, 2)).toEqual({ request: {}, errors: {} });
    const after = { ...start, after: ['240603-b90c4400'] };
    expect(resubmitRequest(after, start, p, 2)).toEqual({ request: { after: ['240603-b90c4400'] }, errors: {} });
  });

  it("starts from the job's checkpoints and sends them only when changed", () => {
    const saving = job({ ...original, request: { ...original.request, checkpoint: true } });
    const start = initialForm({ kind: 'job', job: saving }, []);
    expect(start.checkpoint).toBe(true);
    expect(resubmitRequest(start, start, [], 2).request).toEqual({});
    expect(resubmitRequest({ ...start, checkpoint: false }, start, [], 2).request).toEqual({ checkpoint: false });
  });
});
