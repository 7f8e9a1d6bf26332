import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  MainAreaWidget,
  Notification,
  WidgetTracker
} from '@jupyterlab/apputils';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import {
  INotebookModel,
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { ToolbarButton } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { trainIcon } from './icons';
import { IJobRef, JobView, createJobWidget } from './jobview';
import { JobsPanel } from './panel';

namespace CommandIDs {
  export const openJob = 'vertex-train:open-job';
  export const openPanel = 'vertex-train:open-panel';
  export const openPoolConfigurator = 'vertex-train:open-pool-configurator';
}

/** The cell the pool configurator command inserts and runs. */
export const POOL_CELL =
  '%reload_ext jupyter_ext\npools = vertex_pools()\npools';

/**
 * Insert the pool configurator cell into a notebook and run it: below the
 * active cell, or in it when it is an empty code cell.
 */
export async function openPoolConfigurator(
  panel: NotebookPanel
): Promise<void> {
  await panel.sessionContext.ready;
  const notebook = panel.content;
  const active = notebook.activeCell;
  const reuse =
    active?.model.type === 'code' &&
    active.model.sharedModel.getSource().trim() === '';
  if (!reuse) {
    NotebookActions.insertBelow(notebook);
    NotebookActions.changeCellType(notebook, 'code');
  }
  notebook.activeCell?.model.sharedModel.setSource(POOL_CELL);
  await NotebookActions.run(notebook, panel.sessionContext);
}

/** The notebook toolbar button: "Pools". */
class PoolsButton implements DocumentRegistry.IWidgetExtension<
  NotebookPanel,
  INotebookModel
> {
  createNew(panel: NotebookPanel): IDisposable {
    const button = new ToolbarButton({
      icon: trainIcon,
      label: 'Pools',
      className: 'jp-VertexTrain-poolsButton',
      tooltip: 'Open the Vertex AI pool configurator in this notebook',
      onClick: () => void openPoolConfigurator(panel)
    });
    panel.toolbar.insertItem(10, 'vertexTrainPools', button);
    return new DisposableDelegate(() => button.dispose());
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-vertex-train:plugin',
  description:
    'Training Jobs panel, job logs with each replica TF_CONFIG, and the pool configurator.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const { commands, shell } = app;
    const tracker = new WidgetTracker<MainAreaWidget<JobView>>({
      namespace: 'vertex-train-job'
    });

    commands.addCommand(CommandIDs.openJob, {
      label: args => `Open Training Job ${args.id ?? ''}`,
      icon: trainIcon,
      execute: args => {
        const job: IJobRef = {
          id: String(args.id),
          source: args.source === 'vertex' ? 'vertex' : 'local'
        };
        const open = tracker.find(
          w =>
            w.content.job.id === job.id && w.content.job.source === job.source
        );
        if (open) {
          shell.activateById(open.id);
          return open;
        }
        const widget = createJobWidget(job);
        void tracker.add(widget);
        shell.add(widget, 'main');
        shell.activateById(widget.id);
        return widget;
      }
    });

    const panel = new JobsPanel({
      openJob: job =>
        void commands.execute(CommandIDs.openJob, {
          id: job.id,
          source: job.source
        })
    });
    shell.add(panel, 'left', { rank: 650 });

    commands.addCommand(CommandIDs.openPanel, {
      label: 'Show Training Jobs',
      icon: trainIcon,
      execute: () => shell.activateById(panel.id)
    });

    commands.addCommand(CommandIDs.openPoolConfigurator, {
      label: 'Open Vertex AI Pool Configurator',
      caption:
        'Insert and run a cell that shows the pool configurator in the current notebook',
      icon: trainIcon,
      isEnabled: () => notebooks.currentWidget !== null,
      execute: async () => {
        const current = notebooks.currentWidget;
        if (!current) {
          Notification.warning(
            'Open a notebook first: the pool configurator runs in its kernel.'
          );
          return;
        }
        shell.activateById(current.id);
        await openPoolConfigurator(current);
      }
    });

    app.docRegistry.addWidgetExtension('Notebook', new PoolsButton());

    if (palette) {
      const category = 'Vertex AI Training';
      palette.addItem({ command: CommandIDs.openPoolConfigurator, category });
      palette.addItem({ command: CommandIDs.openPanel, category });
    }
    if (restorer) {
      restorer.add(panel, 'vertex-train-jobs');
      void restorer.restore(tracker, {
        command: CommandIDs.openJob,
        args: w => ({ id: w.content.job.id, source: w.content.job.source }),
        name: w => `${w.content.job.source}:${w.content.job.id}`
      });
    }
  }
};

export default plugin;
