import { DEFAULT_BACKOFF, Poller, nextDelay } from '../src/model/poller';
import { flush } from './helpers';

const backoff = { min: 1000, max: 8000, factor: 2, errorMax: 30000 };

describe('nextDelay', () => {
  it('comes back to the shortest delay after a change', () => {
    expect(nextDelay(8000, 'changed', backoff)).toBe(1000);
  });
  it('slows down while nothing changes, up to max', () => {
    const delays = [1000];
    for (let i = 0; i < 5; i++) {
      delays.push(nextDelay(delays[delays.length - 1], 'unchanged', backoff));
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
  });
  it('backs off by doubling after errors, up to errorMax', () => {
    const delays = [1000];
    for (let i = 0; i < 6; i++) {
      delays.push(nextDelay(delays[delays.length - 1], 'error', backoff));
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  });
  it('has defaults that poll within a second after a change', () => {
    expect(nextDelay(60000, 'changed')).toBe(DEFAULT_BACKOFF.min);
    expect(DEFAULT_BACKOFF.min).toBeLessThanOrEqual(1000);
  });
});

describe('Poller', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('polls while wanted and leaves no timer once not wanted', async () => {
    let ticks = 0;
    let wanted = true;
    const poller = new Poller({
      tick: async () => {
        ticks++;
        return false;
      },
      wanted: () => wanted,
      backoff
    });
    poller.wake();
    await flush();
    expect(ticks).toBe(1);
    expect(poller.delay).toBe(2000);
    jest.advanceTimersByTime(2000);
    await flush();
    expect(ticks).toBe(2);
    wanted = false;
    jest.advanceTimersByTime(4000);
    await flush();
    expect(ticks).toBe(3);
    expect(poller.isPolling).toBe(false);
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(60000);
    await flush();
    expect(ticks).toBe(3);
  });

  it('wake() polls at once and from the shortest delay again', async () => {
    let ticks = 0;
    const poller = new Poller({
      tick: async () => {
        ticks++;
        return false;
      },
      wanted: () => true,
      backoff
    });
    poller.wake();
    await flush();
    jest.advanceTimersByTime(2000);
    await flush();
    expect(poller.delay).toBe(4000);
    poller.wake();
    await flush();
    expect(ticks).toBe(3);
    expect(poller.delay).toBe(2000);
    expect(jest.getTimerCount()).toBe(1);
    poller.dispose();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a wake during a tick runs one more tick right after it', async () => {
    let ticks = 0;
    let release: () => void = () => undefined;
    const poller = new Poller({
      tick: () => {
        ticks++;
        return new Promise<boolean>(resolve => {
          release = () => resolve(true);
        });
      },
      wanted: () => false,
      backoff
    });
    poller.wake();
    poller.wake();
    poller.wake();
    expect(ticks).toBe(1);
    release();
    await flush();
    expect(ticks).toBe(2);
    release();
    await flush();
    expect(ticks).toBe(2);
    expect(poller.isPolling).toBe(false);
  });

  it('backs off after failed ticks', async () => {
    let ticks = 0;
    const poller = new Poller({
      tick: async () => {
        ticks++;
        throw new Error('server down');
      },
      wanted: () => true,
      backoff
    });
    poller.wake();
    await flush();
    expect(poller.delay).toBe(2000);
    jest.advanceTimersByTime(2000);
    await flush();
    expect(poller.delay).toBe(4000);
    jest.advanceTimersByTime(4000);
    await flush();
    expect(ticks).toBe(3);
    expect(poller.delay).toBe(8000);
    poller.dispose();
  });

  it('resume() schedules without ticking, and only when wanted', async () => {
    let ticks = 0;
    let wanted = false;
    const poller = new Poller({
      tick: async () => {
        ticks++;
        return false;
      },
      wanted: () => wanted,
      backoff
    });
    poller.resume();
    expect(poller.isPolling).toBe(false);
    wanted = true;
    poller.resume();
    expect(ticks).toBe(0);
    jest.advanceTimersByTime(1000);
    await flush();
    expect(ticks).toBe(1);
    poller.dispose();
  });
});
