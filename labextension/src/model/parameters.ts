/**
 * Papermill parameters: read from the notebook's cell tagged `parameters`, shown as fields,
 * and turned back into the JSON values the job is submitted with.
 *
 * Only simple literals become typed fields (numbers, booleans, strings, None, and lists or
 * dicts of those); any other expression (`np.pi`, `range(3)`) is shown but left to the notebook.
 */

export type ParameterKind = 'int' | 'float' | 'bool' | 'str' | 'none' | 'json' | 'expression';

export interface IParameter {
  name: string;
  kind: ParameterKind;
  /** The default as written in the notebook. */
  literal: string;
  /** The default as a JSON value (undefined for an expression). */
  value: unknown;
  /** The comment at the end of the line, if any (often a hint: "# learning rate"). */
  comment: string;
}

interface INotebookLike {
  cells?: Array<{
    cell_type?: string;
    source?: string | string[];
    metadata?: { tags?: unknown };
  }>;
}

/** The source of the first code cell tagged `parameters`, or null. */
export function parametersCellSource(notebook: INotebookLike): string | null {
  for (const cell of notebook.cells ?? []) {
    const tags = cell.metadata?.tags;
    if (cell.cell_type === 'code' && Array.isArray(tags) && tags.includes('parameters')) {
      const source = cell.source ?? '';
      return Array.isArray(source) ? source.join('') : source;
    }
  }
  return null;
}

/** The parameters of a notebook, in the order the cell assigns them (later assignments win). */
export function notebookParameters(notebook: INotebookLike): IParameter[] {
  const source = parametersCellSource(notebook);
  return source === null ? [] : parseParameters(source);
}

const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*[^=]+?)?\s*=(?!=)\s*(.*)$/;

/** Top-level `name = literal` assignments of a parameters cell. */
export function parseParameters(source: string): IParameter[] {
  const found = new Map<string, IParameter>();
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const match = /^\s/.test(line) ? null : ASSIGNMENT.exec(line);
    i++;
    if (!match) {
      continue;
    }
    const name = match[1];
    let { code, comment } = splitComment(match[2]);
    // A value may span lines while brackets are open (a list or dict written over lines).
    while (bracketDepth(code) > 0 && i < lines.length) {
      const more = splitComment(lines[i]);
      code += '\n' + more.code;
      comment = comment || more.comment;
      i++;
    }
    const literal = code.trim();
    const { kind, value } = parseLiteral(literal);
    found.delete(name);
    found.set(name, { name, kind, literal, value, comment });
  }
  return Array.from(found.values());
}

/**
 * The characters of a line of Python that are code, not inside a string literal, with their
 * index; stops early when `visit` returns true.
 */
function eachCodeChar(line: string, visit: (c: string, i: number) => boolean | void): void {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === '\\') {
        i++;
      } else if (c === quote) {
        quote = null;
      }
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (visit(c, i)) {
      return;
    }
  }
}

/** Split a line into code and its trailing `#` comment, ignoring `#` inside strings. */
function splitComment(line: string): { code: string; comment: string } {
  let split = { code: line, comment: '' };
  eachCodeChar(line, (c, i) => {
    if (c === '#') {
      split = { code: line.slice(0, i), comment: line.slice(i + 1).trim() };
      return true;
    }
  });
  return split;
}

function bracketDepth(code: string): number {
  let depth = 0;
  eachCodeChar(code, c => {
    if ('([{'.includes(c)) {
      depth++;
    } else if (')]}'.includes(c)) {
      depth--;
    }
  });
  return depth;
}

/** A Python literal as a JSON value, with the kind of field that edits it. */
export function parseLiteral(literal: string): {
  kind: ParameterKind;
  value: unknown;
} {
  const text = literal.trim();
  if (/^[-+]?\d+(_\d+)*$/.test(text)) {
    return { kind: 'int', value: Number(text.replace(/_/g, '')) };
  }
  if (/^[-+]?(\d+(_\d+)*\.\d*|\.\d+|\d+(_\d+)*)([eE][-+]?\d+)?$/.test(text)) {
    return { kind: 'float', value: Number(text.replace(/_/g, '')) };
  }
  if (text === 'True' || text === 'False') {
    return { kind: 'bool', value: text === 'True' };
  }
  if (text === 'None') {
    return { kind: 'none', value: null };
  }
  const str = pythonString(text);
  if (str !== null) {
    return { kind: 'str', value: str };
  }
  if (/^[[{(]/.test(text)) {
    const json = pythonContainerToJson(text);
    if (json !== undefined) {
      return { kind: 'json', value: json };
    }
  }
  return { kind: 'expression', value: undefined };
}

/** The value of a single Python string literal ('...', "...", r'...'), or null. */
function pythonString(text: string): string | null {
  const m = /^([rRuU]?)(['"])([\s\S]*)\2$/.exec(text);
  if (!m) {
    return null;
  }
  const raw = m[1].toLowerCase() === 'r';
  const body = m[3];
  // Reject two literals side by side ("a" "b") or an unescaped closing quote inside.
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '\\' && !raw) {
      i++;
    } else if (body[i] === m[2]) {
      return null;
    }
  }
  if (raw) {
    return body;
  }
  return body.replace(/\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[\s\S])/g, (_, e: string) => {
    switch (e[0]) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case '0':
        return '\0';
      case 'u':
      case 'x':
        return String.fromCharCode(parseInt(e.slice(1), 16));
      default:
        return e;
    }
  });
}

/**
 * A list, tuple or dict literal of plain values as JSON, or undefined when it holds anything
 * else. Python's spelling is rewritten token by token (quotes, True/False/None, tuples).
 */
function pythonContainerToJson(text: string): unknown {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"' || c === "'") {
      let j = i + 1;
      let body = '';
      while (j < text.length && text[j] !== c) {
        if (text[j] === '\\') {
          body += text[j] + (text[j + 1] ?? '');
          j += 2;
        } else {
          body += text[j];
          j++;
        }
      }
      if (j >= text.length) {
        return undefined;
      }
      const value = pythonString(c + body + c);
      if (value === null) {
        return undefined;
      }
      out += JSON.stringify(value);
      i = j + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i))![0];
      const mapped = { True: 'true', False: 'false', None: 'null' }[word];
      if (!mapped) {
        return undefined; // a name or a call: not a literal
      }
      out += mapped;
      i += word.length;
    } else if (c === '(') {
      out += '[';
      i++;
    } else if (c === ')') {
      out += ']';
      i++;
    } else {
      out += c;
      i++;
    }
  }
  // Python allows a trailing comma; JSON does not.
  out = out.replace(/,(\s*[\]}])/g, '$1');
  try {
    return JSON.parse(out);
  } catch {
    return undefined;
  }
}

/** The text a field starts with for a parameter. */
export function fieldText(parameter: IParameter): string {
  switch (parameter.kind) {
    case 'str':
      return parameter.value as string;
    case 'none':
      return '';
    case 'json':
      return JSON.stringify(parameter.value);
    case 'expression':
      return parameter.literal;
    default:
      return String(parameter.value);
  }
}

/**
 * The JSON value a field's input stands for, or an error message for the user.
 * Booleans come from checkboxes (`true`/`false`), everything else from text.
 */
export function fieldValue(parameter: IParameter, input: string | boolean): { value?: unknown; error?: string } {
  if (parameter.kind === 'bool') {
    return { value: input === true || input === 'true' };
  }
  const text = String(input);
  switch (parameter.kind) {
    case 'int':
      if (!/^\s*[-+]?\d+\s*$/.test(text)) {
        return { error: `${parameter.name} must be a whole number.` };
      }
      return { value: parseInt(text, 10) };
    case 'float': {
      const n = Number(text);
      if (text.trim() === '' || !isFinite(n)) {
        return { error: `${parameter.name} must be a number.` };
      }
      return { value: n };
    }
    case 'str':
      return { value: text };
    case 'none':
      // No type to go by: JSON if it reads as JSON, else the text itself; empty stays None.
      if (text.trim() === '') {
        return { value: null };
      }
      try {
        return { value: JSON.parse(text) };
      } catch {
        return { value: text };
      }
    case 'json':
      try {
        return { value: JSON.parse(text) };
      } catch {
        return {
          error: `${parameter.name} must be JSON, e.g. ${JSON.stringify(parameter.value)}.`
        };
      }
    default:
      return {};
  }
}

/** Deep equality of JSON values. */
export function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The parameters to submit: only those whose field differs from the notebook's default
 * (the notebook keeps its own defaults, including ones JSON cannot express).
 */
export function changedParameters(
  parameters: IParameter[],
  inputs: Record<string, string | boolean>
): { values: Record<string, unknown>; errors: Record<string, string> } {
  const values: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  for (const parameter of parameters) {
    if (!(parameter.name in inputs) || parameter.kind === 'expression') {
      continue;
    }
    const { value, error } = fieldValue(parameter, inputs[parameter.name]);
    if (error) {
      errors[parameter.name] = error;
    } else if (!sameValue(value, parameter.value)) {
      values[parameter.name] = value;
    }
  }
  return { values, errors };
}

/** A parameter for a value given to an earlier job (JSON), for resubmitting it. */
export function parameterFromValue(name: string, value: unknown): IParameter {
  let kind: ParameterKind;
  if (value === null) {
    kind = 'none';
  } else if (typeof value === 'boolean') {
    kind = 'bool';
  } else if (typeof value === 'number') {
    kind = Number.isInteger(value) ? 'int' : 'float';
  } else if (typeof value === 'string') {
    kind = 'str';
  } else {
    kind = 'json';
  }
  return { name, kind, literal: JSON.stringify(value), value, comment: '' };
}
