/**
 * A React widget that shows the jobs model: it redraws when the model changes while it is on
 * screen, and has the model poll while it is (`JobsModel.watch`).
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';

import { IDisposableLike, JobsModel } from '../model/jobs';

export abstract class WatchingWidget extends ReactWidget {
  constructor(
    protected readonly model: JobsModel,
    private readonly watchOptions: { pool?: boolean } = {}
  ) {
    super();
    model.changed.connect(this._onModelChanged, this);
  }

  /** Counts the model's changes: a prop that makes React redraw. */
  protected get version(): number {
    return this._version;
  }

  /** Whether it is on screen (and the model polls for it). */
  protected get watching(): boolean {
    return this._watching !== null;
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._watch();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this._watch();
    }
  }

  protected onBeforeHide(msg: Message): void {
    this._unwatch();
    super.onBeforeHide(msg);
  }

  protected onBeforeDetach(msg: Message): void {
    this._unwatch();
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    this._unwatch();
    this.model.changed.disconnect(this._onModelChanged, this);
    super.dispose();
  }

  private _onModelChanged(): void {
    this._version++;
    if (this.isVisible) {
      this.update();
    }
  }

  private _watch(): void {
    if (!this._watching) {
      this._watching = this.model.watch(this.watchOptions);
      this.update();
    }
  }

  private _unwatch(): void {
    this._watching?.dispose();
    this._watching = null;
  }

  private _version = 0;
  private _watching: IDisposableLike | null = null;
}
