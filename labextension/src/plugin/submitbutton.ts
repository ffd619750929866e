/** The "Submit job" button in every notebook's toolbar. */

import { DocumentRegistry } from '@jupyterlab/docregistry';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ToolbarButton } from '@jupyterlab/ui-components';
import { IDisposable } from '@lumino/disposable';

import { DRIVE_NAME } from '../drive';
import { submitJobIcon } from '../icons';
import { IPluginContext } from './context';
import { submitPanel } from './submit';

export function addSubmitButton(ctx: IPluginContext): void {
  ctx.app.docRegistry.addWidgetExtension('Notebook', {
    createNew(nbPanel: NotebookPanel, context: DocumentRegistry.IContext<any>): IDisposable {
      const button = new ToolbarButton({
        className: 'e31-SubmitButton',
        icon: submitJobIcon,
        label: 'Submit job',
        tooltip: 'Submit this notebook as a GPU job',
        onClick: () => void submitPanel(ctx, nbPanel)
      });
      if (context.path.startsWith(`${DRIVE_NAME}:`)) {
        return button; // a job's executed notebook: resubmit the job from its detail view instead
      }
      if (!nbPanel.toolbar.insertAfter('cellType', 'e31-submit', button)) {
        nbPanel.toolbar.addItem('e31-submit', button);
      }
      return button;
    }
  });
}
