import {
  changedParameters,
  fieldText,
  fieldValue,
  notebookParameters,
  parseLiteral,
  parseParameters
} from '../src/model/parameters';

describe('parseParameters', () => {
  it('reads typed defaults and their comments', () => {
    const params = parseParameters(
      [
        'epochs = 20  # passes over the data',
        'lr: float = 1e-3',
        'label = "baseline"',
        "mode = 'fast' # '#' in a comment",
        'use_amp = True',
        'seed = None',
        'layers = [64, 64, 10]',
        "opts = {'beta': (0.9, 0.99), 'fused': False,}",
        'steps = 1_000',
        'scale = np.pi'
      ].join('\n')
    );
    expect(params.map(p => [p.name, p.kind, p.value])).toEqual([
      ['epochs', 'int', 20],
      ['lr', 'float', 0.001],
      ['label', 'str', 'baseline'],
      ['mode', 'str', 'fast'],
      ['use_amp', 'bool', true],
      ['seed', 'none', null],
      ['layers', 'json', [64, 64, 10]],
      ['opts', 'json', { beta: [0.9, 0.99], fused: false }],
      ['steps', 'int', 1000],
      ['scale', 'expression', undefined]
    ]);
    expect(params[0].comment).toBe('passes over the data');
    expect(params[3].comment).toBe("'#' in a comment");
  });

  it('follows values over several lines, and skips what is not an assignment', () => {
    const params = parseParameters(
      '# Parameters\nimport os\nsizes = [\n  1,  # small\n  2,\n]\nif x == 1:\n    y = 2\nname = "a # b"\nname = "c"\n'
    );
    expect(params.map(p => [p.name, p.value])).toEqual([
      ['sizes', [1, 2]],
      ['name', 'c']
    ]);
  });

  it('understands string escapes and raw strings', () => {
    expect(parseLiteral(String.raw`"a\tb\"c"`)).toEqual({ kind: 'str', value: 'a\tb"c' });
    expect(parseLiteral(String.raw`r'C:\data'`)).toEqual({ kind: 'str', value: 'C:\\data' });
    expect(parseLiteral(`"a" "b"`).kind).toBe('expression');
    expect(parseLiteral('f(1)').kind).toBe('expression');
    expect(parseLiteral('[x, 1]').kind).toBe('expression');
    expect(parseLiteral('-3').value).toBe(-3);
  });

  it('finds the cell tagged parameters', () => {
    const nb = {
      cells: [
        { cell_type: 'markdown', source: 'x = 1', metadata: { tags: ['parameters'] } },
        { cell_type: 'code', source: 'y = 2', metadata: {} },
        { cell_type: 'code', source: ['a = 1\n', 'b = "two"'], metadata: { tags: ['parameters'] } }
      ]
    };
    expect(notebookParameters(nb).map(p => p.name)).toEqual(['a', 'b']);
    expect(notebookParameters({ cells: [] })).toEqual([]);
  });
});

describe('fields', () => {
  const [epochs, lr, label, amp, seed, layers] = parseParameters(
    'epochs = 20\nlr = 0.1\nlabel = "baseline"\namp = True\nseed = None\nlayers = [1, 2]'
  );

  it('start from the notebook defaults', () => {
    expect([epochs, lr, label, seed, layers].map(fieldText)).toEqual(['20', '0.1', 'baseline', '', '[1,2]']);
  });

  it('check what people type against the default type', () => {
    expect(fieldValue(epochs, '3')).toEqual({ value: 3 });
    expect(fieldValue(epochs, '3.5').error).toBe('epochs must be a whole number.');
    expect(fieldValue(lr, 'abc').error).toBe('lr must be a number.');
    expect(fieldValue(amp, false)).toEqual({ value: false });
    expect(fieldValue(seed, '42')).toEqual({ value: 42 });
    expect(fieldValue(seed, 'hello')).toEqual({ value: 'hello' });
    expect(fieldValue(layers, '[1,').error).toMatch(/must be JSON/);
  });

  it('send only the parameters that differ from the defaults', () => {
    const all = [epochs, lr, label, amp, seed, layers];
    const inputs = { epochs: '20', lr: '0.10', label: 'changed', amp: true, seed: '', layers: '[1, 2, 3]' };
    expect(changedParameters(all, inputs)).toEqual({
      values: { label: 'changed', layers: [1, 2, 3] },
      errors: {}
    });
    expect(changedParameters(all, { epochs: 'x' }).errors).toEqual({
      epochs: 'epochs must be a whole number.'
    });
  });
});
