import { E31Api, Fetcher } from '../src/model/api';
import { IJob } from '../src/model/types';

/** A fake server: routes "METHOD path" to a handler returning [status, body]. */
export type Route = (body: any) => [number, unknown] | unknown;

export function fakeApi(routes: Record<string, Route>): {
  api: E31Api;
  calls: string[];
} {
  const calls: string[] = [];
  const fetcher: Fetcher = async (path, init = {}) => {
    const key = `${init.method ?? 'GET'} ${path}`;
    calls.push(key);
    const route = routes[key] ?? routes[key.split('?')[0]];
    if (!route) {
      return response(404, { message: `no route ${key}` });
    }
    const result = route(init.body ? JSON.parse(String(init.body)) : undefined);
    const [status, body] =
      Array.isArray(result) && typeof result[0] === 'number' ? (result as [number, unknown]) : [200, result];
    return response(status, body);
  };
  return { api: new E31Api(fetcher, p => `http://lab/e31/api/${p}`), calls };
}

/** A minimal Response: only microtasks, so fake timers and flush() are enough. */
function response(status: number, body: unknown): Response {
  return {
    ok: status >= 200 && status < 300,
    status,
    statusText: '',
    text: async () => JSON.stringify(body)
  } as Response;
}

let counter = 0;

export function job(overrides: Partial<IJob> = {}): IJob {
  counter++;
  return {
    id: `job${counter}`,
    name: `job ${counter}`,
    owner: 'ada',
    team: null,
    state: 'queued',
    reason: null,
    queue_position: null,
    request: { gpus: 1, max_runtime_s: 86400, expected_runtime_s: null, deadline: null },
    gpus: [],
    meter: { gpu_seconds: 0, gpu_hours: 0, cost: 0, currency: 'USD' },
    progress: { cells_done: 0, cells_total: null },
    submitted_at: '2024-06-03T08:00:00+00:00',
    started_at: null,
    finished_at: null,
    ...overrides
  };
}

export class MemoryStorage {
  data = new Map<string, string>();
  getItem(key: string): string | null {
    return this.data.has(key) ? this.data.get(key)! : null;
  }
  setItem(key: string, value: string): void {
    this.data.set(key, value);
  }
}

/** Let pending promise callbacks run (with fake timers too). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
}
