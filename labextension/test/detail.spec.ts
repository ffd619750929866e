import { JobDetailModel } from '../src/model/detail';
import { IGpuUse } from '../src/model/types';
import { fakeApi, job } from './helpers';

describe('JobDetailModel', () => {
  const ended = {
    state: 'succeeded' as const,
    started_at: '2024-06-03T08:01:00+00:00',
    finished_at: '2024-06-03T09:00:00+00:00'
  };

  it("asks for an ended job's log, files and values", async () => {
    const { api, calls } = fakeApi({
      'GET jobs/j1': () => ({ ...job({ id: 'j1', ...ended }), transitions: [], values: ['model'] }),
      'GET jobs/j1/log': () => ({ text: 'done', offset: 4, final: true }),
      'GET jobs/j1/files': () => ({ files: [{ path: 'out.txt', size: 3 }] }),
      'GET jobs/j1/values': () => ({ values: [{ name: 'model', type: 'dict', size: 10 }] })
    });
    const model = new JobDetailModel(api, 'j1');
    await model.tick();
    expect(calls.map(c => c.split('?')[0]).sort()).toEqual([
      'GET jobs/j1',
      'GET jobs/j1/files',
      'GET jobs/j1/log',
      'GET jobs/j1/values'
    ]);
    expect([model.log, model.files.length, model.values.length]).toEqual(['done', 1, 1]);
    model.dispose();
  });

  it('asks for nothing more once the files are deleted, and forgets what it had', async () => {
    let deleted: unknown = null;
    const { api, calls } = fakeApi({
      'GET jobs/j1': () => ({ ...job({ id: 'j1', ...ended }), transitions: [], files_deleted: deleted }),
      'GET jobs/j1/log': () => ({ text: 'done', offset: 4, final: true }),
      'GET jobs/j1/files': () => ({ files: [{ path: 'out.txt', size: 3 }] })
    });
    const model = new JobDetailModel(api, 'j1');
    await model.tick();
    expect(model.files.length).toBe(1);
    deleted = { at: '2024-06-04T08:00:00+00:00', by: 'ada', bytes: 2048 };
    calls.length = 0;
    expect(await model.tick()).toBe(true); // a change to show
    expect(calls).toEqual(['GET jobs/j1']);
    expect([model.log, model.files, model.values, model.job?.files_deleted]).toEqual(['', [], [], deleted]);
    model.dispose();
  });

  it('forgets the files of a run that ended once the job is resumed, and asks again when it ends', async () => {
    let state: 'failed' | 'queued' | 'succeeded' = 'failed';
    let files = [{ path: 'first.txt', size: 1 }];
    const { api } = fakeApi({
      'GET jobs/j1': () => ({ ...job({ id: 'j1', ...ended, state }), transitions: [] }),
      'GET jobs/j1/log': () => ({ text: '', offset: 0, final: state !== 'queued' }),
      'GET jobs/j1/files': () => ({ files })
    });
    const model = new JobDetailModel(api, 'j1');
    await model.tick();
    expect(model.files.map(f => f.path)).toEqual(['first.txt']);
    state = 'queued';
    await model.tick();
    expect(model.files).toEqual([]);
    state = 'succeeded';
    files = [
      { path: 'first.txt', size: 1 },
      { path: 'second.txt', size: 1 }
    ];
    await model.tick();
    expect(model.files.map(f => f.path)).toEqual(['first.txt', 'second.txt']);
    model.dispose();
  });
});

describe('E31Api.resume', () => {
  it("sends the changes, {} by default, and passes on the server's message when it refuses", async () => {
    const seen: unknown[] = [];
    const { api, calls } = fakeApi({
      'POST jobs/j1/resume': body => {
        seen.push(body);
        return job({ id: 'j1', state: 'queued' });
      },
      'POST jobs/j2/resume': () => [
        409,
        { message: 'Job j2 has no checkpoint to resume from. Start it over from the top: e31 resubmit j2.' }
      ]
    });
    expect((await api.resume('j1')).state).toBe('queued');
    await api.resume('j1', { max_runtime: '2h' });
    expect(seen).toEqual([{}, { max_runtime: '2h' }]);
    await expect(api.resume('j2')).rejects.toMatchObject({
      status: 409,
      message: 'Job j2 has no checkpoint to resume from. Start it over from the top: e31 resubmit j2.'
    });
    expect(calls).toEqual(['POST jobs/j1/resume', 'POST jobs/j1/resume', 'POST jobs/j2/resume']);
  });
});

describe("JobDetailModel and a job's GPU use", () => {
  it('counts an idle warning as a change, but not each new sample of a running job', async () => {
    const use: IGpuUse = {
      available: true,
      why_absent: null,
      sample_s: 5,
      series: [[1000, 50, 1024, 100]],
      util_mean: 50,
      util_peak: 50,
      memory_peak_bytes: 1024,
      power_peak_w: 100,
      used_gpu_hours: 0.01,
      held_gpu_hours: 0.02,
      idle: null,
      returned: []
    };
    const running = { state: 'running' as const, started_at: '2024-06-03T08:01:00+00:00', gpus: ['0'] };
    const { api } = fakeApi({
      'GET jobs/j1': () => ({ ...job({ id: 'j1', ...running }), transitions: [], gpu_use: use }),
      'GET jobs/j1/log': () => ({ text: '', offset: 0, final: false })
    });
    const model = new JobDetailModel(api, 'j1');
    await model.tick();
    use.series = [...use.series, [1005, 1, 1024, 90]];
    expect(await model.tick()).toBe(false);
    expect(model.job?.gpu_use?.series.length).toBe(2); // shown all the same
    use.idle = { devices: ['0'], since: '2024-06-03T08:30:00+00:00', message: 'GPU 0 has been below 5% for 30m' };
    expect(await model.tick()).toBe(true);
    model.dispose();
  });
});

describe('E31Api.deleteFiles', () => {
  it('asks the server to delete the files, and passes on why it refuses', async () => {
    const { api, calls } = fakeApi({
      'DELETE jobs/j1/files': () => job({ id: 'j1' }),
      'DELETE jobs/j2/files': () => [409, { message: 'Job j2 is running, and its files are in use.' }]
    });
    await api.deleteFiles('j1');
    await expect(api.deleteFiles('j2')).rejects.toMatchObject({
      status: 409,
      message: 'Job j2 is running, and its files are in use.'
    });
    expect(calls).toEqual(['DELETE jobs/j1/files', 'DELETE jobs/j2/files']);
  });
});
