/**
 * Polling with backoff that stops by itself.
 *
 * A `Poller` calls `tick()` over and over while `wanted()` says so:
 * - right after a change it polls again soon (`min`);
 * - while nothing changes it slows down by `factor` up to `max`;
 * - after an error it backs off by doubling up to `errorMax`;
 * - when `wanted()` is false after a tick it stops: no timer is left behind.
 * `wake()` polls now and starts again from `min` (a submit, a panel shown, the tab back in view).
 */

export interface IBackoff {
  /** Delay after a change, in ms. */
  min: number;
  /** Longest delay while nothing changes, in ms. */
  max: number;
  /** Growth of the delay while nothing changes. */
  factor: number;
  /** Longest delay after errors, in ms. */
  errorMax: number;
}

export const DEFAULT_BACKOFF: IBackoff = {
  min: 1000,
  max: 10000,
  factor: 1.5,
  errorMax: 60000
};

export type TickOutcome = 'changed' | 'unchanged' | 'error';

/** The delay before the next tick, given the last delay and how the last tick went. */
export function nextDelay(previous: number, outcome: TickOutcome, backoff: IBackoff = DEFAULT_BACKOFF): number {
  switch (outcome) {
    case 'changed':
      return backoff.min;
    case 'unchanged':
      return Math.min(backoff.max, Math.max(backoff.min, Math.round(previous * backoff.factor)));
    case 'error':
      return Math.min(backoff.errorMax, Math.max(backoff.min, previous) * 2);
  }
}

export interface IPollerOptions {
  /** One poll; resolves true when something changed. A rejection counts as an error. */
  tick: () => Promise<boolean>;
  /** Whether polling should go on. Checked after every tick. */
  wanted: () => boolean;
  backoff?: IBackoff;
}

export class Poller {
  constructor(private readonly options: IPollerOptions) {
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
    this._delay = this.backoff.min;
  }

  readonly backoff: IBackoff;

  /** The delay before the next scheduled tick, in ms. */
  get delay(): number {
    return this._delay;
  }

  /** Whether a tick is scheduled or running. */
  get isPolling(): boolean {
    return this._timer !== null || this._running;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Tick now (or right after the tick in flight) and poll from the shortest delay again. */
  wake(): void {
    if (this._disposed) {
      return;
    }
    this._delay = this.backoff.min;
    if (this._running) {
      this._again = true;
      return;
    }
    this.clearTimer();
    void this.run();
  }

  /**
   * Make sure polling goes on if it is wanted, without an immediate tick.
   * For a change of `wanted()` that needs no fresh data (a panel shown again).
   */
  resume(): void {
    if (this._disposed || this.isPolling || !this.options.wanted()) {
      return;
    }
    this.schedule(this.backoff.min);
  }

  dispose(): void {
    this._disposed = true;
    this.clearTimer();
  }

  private async run(): Promise<void> {
    this._running = true;
    let outcome: TickOutcome;
    try {
      outcome = (await this.options.tick()) ? 'changed' : 'unchanged';
    } catch {
      outcome = 'error';
    }
    this._running = false;
    if (this._disposed) {
      return;
    }
    if (this._again) {
      this._again = false;
      void this.run();
      return;
    }
    this._delay = nextDelay(this._delay, outcome, this.backoff);
    if (this.options.wanted()) {
      this.schedule(this._delay);
    }
  }

  private schedule(delay: number): void {
    this.clearTimer();
    this._delay = delay;
    this._timer = setTimeout(() => {
      this._timer = null;
      void this.run();
    }, delay);
  }

  private clearTimer(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _delay: number;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _running = false;
  private _again = false;
  private _disposed = false;
}
