import { ApiError, E31Api, MAX_IDS } from '../src/model/api';
import { fakeApi, job } from './helpers';

describe('E31Api', () => {
  it('lists jobs and filters by state in the query', async () => {
    const { api, calls } = fakeApi({
      'GET jobs': () => ({ jobs: [job()] }),
      'GET jobs?state=running': () => ({ jobs: [] })
    });
    expect(await api.jobs()).toHaveLength(1);
    expect(await api.jobs('running')).toEqual([]);
    expect(calls).toEqual(['GET jobs', 'GET jobs?state=running']);
  });

  it('asks for jobs by id, at most MAX_IDS a request', async () => {
    const routes: Record<string, () => unknown> = {};
    const { api, calls } = fakeApi(
      new Proxy(routes, {
        get: (_, key: string) => () => ({ jobs: (key.match(/id=/g) ?? []).map(() => job()) })
      })
    );
    const ids = Array.from({ length: MAX_IDS + 2 }, (_, i) => `j ${i}`);
    expect(await api.jobsById(ids)).toHaveLength(MAX_IDS + 2);
    expect(calls).toHaveLength(2);
    expect(calls[1]).toBe(`GET jobs?id=j%20${MAX_IDS}&id=j%20${MAX_IDS + 1}`);
  });

  it("turns a 4xx into an ApiError carrying the server's message", async () => {
    const { api } = fakeApi({
      'POST jobs': () => [400, { message: 'deadline: 2001-01-01 is in the past.' }]
    });
    await expect(api.submit({ path: 'x.ipynb' })).rejects.toEqual(
      new ApiError('deadline: 2001-01-01 is in the past.', 400)
    );
  });

  it('says what happened when the answer has no message', async () => {
    const api = new E31Api(
      async () => new Response('<html>oops</html>', { status: 502, statusText: 'Bad Gateway' }),
      p => p
    );
    await expect(api.gpus()).rejects.toMatchObject({
      status: 502,
      message: 'The server answered 502 Bad Gateway.'
    });
  });

  it('reports an unreachable server as status 0', async () => {
    const api = new E31Api(
      async () => {
        throw new TypeError('Failed to fetch');
      },
      p => p
    );
    await expect(api.jobs()).rejects.toMatchObject({
      status: 0,
      message: 'Cannot reach the Jupyter server (Failed to fetch).'
    });
  });

  it('sends submit, check and resubmit bodies as JSON', async () => {
    const seen: unknown[] = [];
    const { api } = fakeApi({
      'POST jobs': body => {
        seen.push(body);
        return [201, { ...job(), warnings: [] }];
      },
      'POST jobs/abc/resubmit': body => {
        seen.push(body);
        return [201, { ...job(), warnings: [] }];
      },
      'POST check': body => {
        seen.push(body);
        return [200, { submitted: false, queue_position: 2, warnings: ['w'] }];
      },
      'POST jobs/abc/resubmit/check': body => {
        seen.push(body);
        return [200, { submitted: false, queue_position: 1, warnings: [] }];
      }
    });
    await api.submit({ path: 'a.ipynb', gpus: 1, parameters: { lr: 0.1 } });
    await api.resubmit('abc', { deadline: '+2h' });
    const check = await api.check({ path: 'b.ipynb', gpus: 2 });
    await api.checkResubmit('abc', { gpus: 0 });
    expect(seen).toEqual([
      { path: 'a.ipynb', gpus: 1, parameters: { lr: 0.1 } },
      { deadline: '+2h' },
      { path: 'b.ipynb', gpus: 2 },
      { gpus: 0 }
    ]);
    expect([check.queue_position, check.warnings]).toEqual([2, ['w']]);
  });

  it('builds download links with each path segment encoded', () => {
    const { api } = fakeApi({});
    expect(api.fileUrl('j1', 'plots/loss curve.png')).toBe('http://lab/e31/api/jobs/j1/files/plots/loss%20curve.png');
    expect(api.reportUrl('j1')).toBe('http://lab/e31/api/jobs/j1/report');
  });

  it('asks the meter for a window in ISO 8601', async () => {
    const { api, calls } = fakeApi({ 'GET meter': () => ({ by_team: {} }) });
    await api.meter(new Date('2024-06-03T00:00:00Z'), new Date('2024-06-04T00:00:00Z'));
    expect(calls[0]).toBe('GET meter?since=2024-06-03T00%3A00%3A00.000Z&until=2024-06-04T00%3A00%3A00.000Z');
  });
});
