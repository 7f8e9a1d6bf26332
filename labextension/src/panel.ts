import { Notification } from '@jupyterlab/apputils';
import {
  SidePanel,
  ToolbarButton,
  refreshIcon
} from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import { Panel, Widget } from '@lumino/widgets';

import {
  element,
  formatElapsed,
  formatStart,
  shortState,
  stateBadge
} from './format';
import {
  IJobList,
  IJobPage,
  IJobSummary,
  jobPath,
  requestAPI,
  withQuery
} from './handler';
import { trainIcon } from './icons';

/** How often the panel refreshes while it is visible. */
const REFRESH_MS = 2000;

/** What the panel asks of the application. */
export interface IJobsPanelOptions {
  /** Open a job's view in the main area. */
  openJob: (job: IJobSummary) => void;
}

/**
 * The "Training Jobs" sidebar: every job, local and on Vertex AI, with its
 * display name, state, replica count, start time and duration, refreshed
 * every two seconds while it is visible. Vertex AI's jobs come a page at a
 * time: the first with every refresh, the next ones from "Load more Vertex AI
 * jobs" (kept as loaded: older jobs, which rarely change).
 */
export class JobsPanel extends SidePanel {
  constructor(options: IJobsPanelOptions) {
    super({ content: new Panel() });
    this._openJob = options.openJob;
    this.id = 'vertex-train-jobs';
    this.addClass('jp-VertexTrain-panel');
    this.title.icon = trainIcon;
    this.title.caption = 'Training Jobs';
    this.title.label = '';
    this.header.addWidget(
      new Widget({
        node: element('h2', 'jp-VertexTrain-panelTitle', 'Training Jobs')
      })
    );
    this.toolbar.addItem(
      'refresh',
      new ToolbarButton({
        icon: refreshIcon,
        tooltip: 'Refresh the job list',
        onClick: () => void this.refresh().catch(() => undefined)
      })
    );
    this._body = new Widget({
      node: element('div', 'jp-VertexTrain-panelBody')
    });
    this.addWidget(this._body);
    this._poll = new Poll({
      auto: false,
      factory: () => this.refresh(),
      frequency: { interval: REFRESH_MS, backoff: true, max: 30 * 1000 },
      name: 'vertex-train:jobs',
      standby: () => (this.isVisible ? 'when-hidden' : true)
    });
    this._render();
  }

  /** The jobs the panel shows now, newest first. */
  get jobs(): ReadonlyArray<IJobSummary> {
    const listed = new Set(this._jobs.map(jobKey));
    return [
      ...this._jobs,
      ...this._moreJobs.filter(job => !listed.has(jobKey(job)))
    ].sort(newestFirst);
  }

  /** Fetch the job list and redraw. */
  async refresh(): Promise<void> {
    try {
      const list = await requestAPI<IJobList>('jobs');
      this._jobs = list.jobs;
      this._errors = list.errors.map(e => `${e.source}: ${e.message}`);
      this._truncated = list.truncated;
      this._failure = '';
      const vertex = list.sources.find(s => s.source === 'vertex');
      if (!vertex) {
        this._moreJobs = [];
        this._nextPage = '';
      } else if (!this._moreJobs.length && !this._loadingMore) {
        this._nextPage = vertex.next_page_token ?? '';
      }
    } catch (error) {
      this._failure = `Cannot list jobs: ${(error as Error).message}`;
    }
    this._render();
    if (this._failure) {
      throw new Error(this._failure); // the poll backs off
    }
  }

  /** Cancel a running job from its row. */
  async cancel(job: IJobSummary): Promise<void> {
    try {
      await requestAPI(
        withQuery(jobPath(job.id, 'cancel'), { source: job.source }),
        {
          method: 'POST'
        }
      );
      Notification.info(`Cancelling ${job.display_name} (${job.id})`, {
        autoClose: 3000
      });
    } catch (error) {
      Notification.error(`Cancel failed: ${(error as Error).message}`);
    }
    await this.refresh().catch(() => undefined);
  }

  /** Fetch the next page of Vertex AI's jobs and add it to the list. */
  async loadMore(): Promise<void> {
    if (!this._nextPage || this._loadingMore) {
      return;
    }
    this._loadingMore = true;
    this._render();
    try {
      const page = await requestAPI<IJobPage>(
        withQuery('jobs', { source: 'vertex', page_token: this._nextPage })
      );
      this._moreJobs = [...this._moreJobs, ...page.jobs];
      this._nextPage = page.next_page_token;
      this._moreFailure = '';
    } catch (error) {
      this._moreFailure = `Cannot load more Vertex AI jobs: ${(error as Error).message}`;
    } finally {
      this._loadingMore = false;
    }
    this._render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    super.dispose();
  }

  protected onAfterShow(): void {
    void this._poll.start();
    void this._poll.refresh();
  }

  private _render(): void {
    const body = this._body.node;
    body.replaceChildren();
    const messages = [this._failure, ...this._errors, this._moreFailure];
    for (const message of messages.filter(Boolean)) {
      body.appendChild(element('div', 'jp-VertexTrain-error', message));
    }
    const jobs = this.jobs;
    if (this._truncated) {
      body.appendChild(
        element(
          'div',
          'jp-VertexTrain-note',
          `Showing the newest ${this._jobs.length} jobs; \`vtrain jobs\` lists them all.`
        )
      );
    }
    if (!jobs.length) {
      body.appendChild(
        element(
          'div',
          'jp-VertexTrain-empty',
          'No training jobs yet. Run a %%vertex_train cell or `vtrain submit` to start one.'
        )
      );
    } else {
      const list = element('ul', 'jp-VertexTrain-jobs');
      for (const job of jobs) {
        list.appendChild(this._row(job));
      }
      body.appendChild(list);
    }
    if (this._nextPage) {
      body.appendChild(this._loadMoreButton());
    }
  }

  private _loadMoreButton(): HTMLButtonElement {
    const button = element(
      'button',
      'jp-Button jp-mod-styled jp-VertexTrain-loadMore',
      this._loadingMore ? 'Loading Vertex AI jobs…' : 'Load more Vertex AI jobs'
    );
    button.disabled = this._loadingMore;
    button.title = 'The next page of Vertex AI jobs, older than those shown';
    button.addEventListener('click', () => void this.loadMore());
    return button;
  }

  /** Two lines: name and state; replicas, start time, duration (and Cancel while it runs). */
  private _row(job: IJobSummary): HTMLLIElement {
    const row = element('li', 'jp-VertexTrain-jobRow');
    row.dataset.jobId = job.id;
    row.dataset.state = job.state;
    row.dataset.source = job.source;
    row.tabIndex = 0;
    row.title = `${job.name}\nClick to open its logs and TF_CONFIG${job.error ? `\n\n${job.error}` : ''}`;

    const top = element('div', 'jp-VertexTrain-jobLine');
    top.appendChild(
      element('span', 'jp-VertexTrain-jobName', job.display_name || job.id)
    );
    top.appendChild(stateBadge(job.state));
    const bottom = element(
      'div',
      'jp-VertexTrain-jobLine jp-VertexTrain-jobMeta'
    );
    const replicas = element(
      'span',
      'jp-VertexTrain-replicas',
      `${job.replicas} ${job.replicas === 1 ? 'replica' : 'replicas'}`
    );
    replicas.dataset.count = String(job.replicas);
    const started = element(
      'span',
      'jp-VertexTrain-started',
      formatStart(job.start_time)
    );
    started.title = job.start_time ?? '';
    const duration = element(
      'span',
      'jp-VertexTrain-duration',
      formatElapsed(job.duration)
    );
    duration.title = 'duration';
    bottom.append(replicas, started, duration);
    if (job.source === 'vertex') {
      bottom.appendChild(element('span', 'jp-VertexTrain-source', 'Vertex AI'));
    }
    if (!job.final) {
      const cancel = element(
        'button',
        'jp-Button jp-mod-styled jp-mod-warn jp-VertexTrain-cancel',
        'Cancel'
      );
      cancel.title = `Cancel ${job.display_name} (${shortState(job.state)})`;
      cancel.addEventListener('click', event => {
        event.stopPropagation();
        cancel.disabled = true;
        void this.cancel(job);
      });
      bottom.appendChild(cancel);
    }
    row.append(top, bottom);
    row.addEventListener('click', () => this._openJob(job));
    row.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        this._openJob(job);
      }
    });
    return row;
  }

  private _openJob: (job: IJobSummary) => void;
  private _body: Widget;
  private _poll: Poll;
  /** The last refresh's jobs: local ones and Vertex AI's first page. */
  private _jobs: IJobSummary[] = [];
  /** Vertex AI's further pages, as "Load more" fetched them. */
  private _moreJobs: IJobSummary[] = [];
  /** The token of Vertex AI's next page; '' when there is none. */
  private _nextPage = '';
  private _loadingMore = false;
  private _errors: string[] = [];
  /** The server listed only the newest jobs. */
  private _truncated = false;
  private _failure = '';
  private _moreFailure = '';
}

/** By creation time, newest first (RFC 3339 UTC times sort as text). */
function newestFirst(a: IJobSummary, b: IJobSummary): number {
  const [x, y] = [a.create_time ?? '', b.create_time ?? ''];
  return x < y ? 1 : x > y ? -1 : 0;
}

/** A job's identity across sources. */
function jobKey(job: IJobSummary): string {
  return `${job.source}/${job.id}`;
}
