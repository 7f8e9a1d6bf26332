import { MainAreaWidget } from '@jupyterlab/apputils';
import { ToolbarButton, stopIcon } from '@jupyterlab/ui-components';
import { Panel, TabPanel, Widget } from '@lumino/widgets';

import {
  BLANK_LINE,
  ITerminalLine,
  compareTasks,
  continues,
  element,
  formatElapsed,
  replicaColour,
  sleep,
  stateBadge,
  writeLine
} from './format';
import {
  IJobDetail,
  IJobSummary,
  ILogEntry,
  ILogPage,
  IReplica,
  PYTORCH_VARIABLES,
  jobPath,
  requestAPI,
  withQuery
} from './handler';
import { trainIcon } from './icons';

const ALL = 'all';
/** Lines kept per view: the full log stays on disk and in the log API. */
const MAX_LINES = 2000;
/** After a failed log read; otherwise the server says when to read again (`next_poll_ms`). */
const RETRY_MS = 5000;
const STATE_MS = 2000;
const ERROR_SEVERITIES = new Set(['ERROR', 'CRITICAL', 'ALERT', 'EMERGENCY']);

/** Where a job is: its ID and whether it is local or on Vertex AI. */
export interface IJobRef {
  id: string;
  source: 'local' | 'vertex';
}

/** A line as shown: the entry it started with and its text folded as a terminal shows it. */
interface IShownLine {
  entry: ILogEntry;
  text: string;
}

/** One tab of log lines: all replicas, or one. */
class LogView extends Widget {
  constructor(readonly view: string) {
    super({ node: element('pre', 'jp-VertexTrain-log') });
    this.id = `vertex-train-log-${view}-${Private.nextId++}`;
    this.title.label = view;
    this.node.dataset.replica = view;
    if (view !== ALL) {
      this.title.className = 'jp-VertexTrain-replicaTab';
      this.title.dataset = { replica: view };
    }
    this.node.appendChild(
      element('span', 'jp-VertexTrain-noLines', 'no lines yet')
    );
  }

  get lineCount(): number {
    return this._count;
  }

  add(lines: IShownLine[]): void {
    if (!lines.length) {
      return;
    }
    const pre = this.node;
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    pre.querySelector('.jp-VertexTrain-noLines')?.remove();
    const rows = document.createDocumentFragment();
    for (const line of lines) {
      rows.appendChild(this._row(line));
    }
    pre.appendChild(rows);
    this._count += lines.length;
    while (pre.childElementCount > MAX_LINES) {
      pre.firstElementChild?.remove();
    }
    if (atBottom) {
      pre.scrollTop = pre.scrollHeight;
    }
  }

  /** Show a line's new text in place; pushed out by newer lines meanwhile, it comes back at the end. */
  rewrite(line: IShownLine): void {
    const row = this._rows.get(line);
    if (row?.isConnected) {
      row.querySelector('.jp-VertexTrain-text')!.textContent = line.text;
    } else {
      this.add([line]);
    }
  }

  private _row(shown: IShownLine): HTMLElement {
    const entry = shown.entry;
    const line = element('div', 'jp-VertexTrain-line');
    this._rows.set(shown, line);
    line.dataset.replica = entry.replica;
    line.appendChild(element('span', 'jp-VertexTrain-time', entry.time));
    if (this.view === ALL) {
      const name = element(
        'span',
        'jp-VertexTrain-replica',
        `[${entry.replica}]`
      );
      name.style.color = replicaColour(entry.replica);
      line.appendChild(name);
    }
    const text = element('span', 'jp-VertexTrain-text', shown.text);
    if (ERROR_SEVERITIES.has(entry.severity)) {
      text.classList.add('jp-VertexTrain-errorText');
    }
    line.appendChild(text);
    return line;
  }

  private _count = 0;
  private _rows = new WeakMap<IShownLine, HTMLElement>();
}

/** The TF_CONFIG tab: each replica's TF_CONFIG, PyTorch variables and CLUSTER_SPEC. */
class EnvironmentView extends Widget {
  constructor() {
    super({ node: element('div', 'jp-VertexTrain-env') });
    this.id = `vertex-train-env-${Private.nextId++}`;
    this.title.label = 'TF_CONFIG';
    this.title.className = 'jp-VertexTrain-envTab';
  }

  setDetail(detail: IJobDetail): void {
    const root = this.node;
    root.replaceChildren();
    if (detail.replicas_error) {
      root.appendChild(
        element('div', 'jp-VertexTrain-error', detail.replicas_error)
      );
    }
    const note =
      detail.address_style === 'cloud'
        ? 'Addresses are placeholders: Vertex AI names its machines when it runs the job.'
        : detail.addresses_recorded
          ? 'Addresses are the ones the replicas had on this machine.'
          : `Addresses: ${detail.address_style} style.`;
    root.appendChild(
      element(
        'p',
        'jp-VertexTrain-note',
        `${note} Each replica's "job" (the CustomJobSpec) is shown once, below.`
      )
    );
    const grid = element('div', 'jp-VertexTrain-replicaGrid');
    for (const replica of detail.replicas) {
      grid.appendChild(this._replica(replica));
    }
    root.appendChild(grid);
    const job = detail.replicas.find(r => r.CLUSTER_SPEC)?.CLUSTER_SPEC?.job;
    if (job) {
      const details = element('details', 'jp-VertexTrain-jobSpec');
      details.appendChild(
        element(
          'summary',
          '',
          '"job": the CustomJobSpec in TF_CONFIG and CLUSTER_SPEC'
        )
      );
      details.appendChild(
        element('pre', 'jp-VertexTrain-json', JSON.stringify(job, null, 2))
      );
      root.appendChild(details);
    }
  }

  private _replica(replica: IReplica): HTMLElement {
    const section = element('section', 'jp-VertexTrain-replicaEnv');
    section.dataset.replica = replica.task_name;
    const title = element('h3');
    const name = element('span', 'jp-VertexTrain-replica', replica.task_name);
    name.style.color = replicaColour(replica.task_name);
    title.append(
      name,
      ` ${replica.role}${replica.tf_task ? ` · ${replica.tf_task}` : ''} · ${replica.address}`
    );
    section.appendChild(title);
    const tfConfig = element(
      'pre',
      'jp-VertexTrain-json jp-VertexTrain-tfConfig',
      replica.TF_CONFIG
        ? `TF_CONFIG=${JSON.stringify(withoutJob(replica.TF_CONFIG), null, 2)}`
        : 'no TF_CONFIG (Vertex AI sets it only when a job has more than one replica)'
    );
    if (replica.TF_CONFIG) {
      tfConfig.dataset.tfConfig = JSON.stringify(replica.TF_CONFIG);
    }
    section.appendChild(tfConfig);
    section.appendChild(pytorchVariables(replica));
    const spec = element('details');
    spec.appendChild(element('summary', '', 'CLUSTER_SPEC'));
    spec.appendChild(
      element(
        'pre',
        'jp-VertexTrain-json',
        JSON.stringify(withoutJob(replica.CLUSTER_SPEC ?? {}), null, 2)
      )
    );
    section.appendChild(spec);
    return section;
  }
}

/** MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK as `NAME=value` lines; a replica without a rank says so. */
/** enableWebAccess and enableDashboardAccess: a link per replica or dashboard (Vertex AI), or the
 * `vtrain shell` command (local). */
function accessLine(access: [string, string][], heading: string): HTMLElement {
  const line = element('div', 'jp-VertexTrain-access', `${heading}: `);
  for (const [task, how] of access.sort((a, b) => compareTasks(a[0], b[0]))) {
    if (/^https?:\/\//.test(how)) {
      const link = element('a', '', task);
      link.href = how;
      link.target = '_blank';
      link.rel = 'noopener';
      line.appendChild(link);
    } else {
      line.appendChild(element('code', '', how));
    }
    line.appendChild(document.createTextNode(' '));
  }
  return line;
}

function pytorchVariables(replica: IReplica): HTMLElement {
  const lines = PYTORCH_VARIABLES.filter(name => replica[name] !== null).map(
    name => `${name}=${replica[name]}`
  );
  if (replica.RANK === null) {
    lines.push(
      `no RANK or WORLD_SIZE: ${replica.role.replace(/_/g, ' ')} replicas are not in the training cluster`
    );
  }
  const block = element(
    'pre',
    'jp-VertexTrain-json jp-VertexTrain-pytorch',
    lines.join('\n')
  );
  block.title = 'PyTorch variables';
  block.dataset.rank = replica.RANK ?? '';
  return block;
}

/** TF_CONFIG or CLUSTER_SPEC with its (long, shared) "job" elided. */
function withoutJob(config: Record<string, unknown>): Record<string, unknown> {
  return 'job' in config ? { ...config, job: '…' } : config;
}

/**
 * A job in the main area: its state and duration, a tab per replica plus
 * "all" (following the log with the server's cursor, coloured as in the
 * notebook's job monitor) and a TF_CONFIG tab.
 */
export class JobView extends Panel {
  constructor(readonly job: IJobRef) {
    super();
    this.addClass('jp-VertexTrain-jobView');
    this.node.dataset.jobId = job.id;
    this._header = new Widget({
      node: element('div', 'jp-VertexTrain-jobHeader')
    });
    this._tabs = new TabPanel();
    this._tabs.addClass('jp-VertexTrain-tabs');
    this._env = new EnvironmentView();
    this.addWidget(this._header);
    this.addWidget(this._tabs);
    this._ensureView(ALL);
    this._tabs.addWidget(this._env);
    this._tabs.currentIndex = 0;
  }

  get summary(): IJobSummary | null {
    return this._summary;
  }

  /** Load the job and follow its log and state until it ends or the view closes. */
  start(): void {
    void this._followState();
    void this._followLogs();
  }

  async cancel(): Promise<void> {
    await requestAPI(
      withQuery(jobPath(this.job.id, 'cancel'), { source: this.job.source }),
      {
        method: 'POST'
      }
    );
    await this._refresh();
  }

  /** Show a replica's tab. */
  showReplica(task: string): void {
    this._tabs.currentWidget = this._ensureView(task);
  }

  dispose(): void {
    this._stopped = true;
    super.dispose();
  }

  private _ensureView(view: string): LogView {
    let log = this._views.get(view);
    if (!log) {
      log = new LogView(view);
      this._views.set(view, log);
      const names = [...this._views.keys()]
        .filter(v => v !== ALL)
        .sort(compareTasks);
      this._tabs.insertWidget(view === ALL ? 0 : names.indexOf(view) + 1, log);
    }
    return log;
  }

  private async _refresh(): Promise<IJobDetail> {
    const detail = await requestAPI<IJobDetail>(
      withQuery(jobPath(this.job.id), { source: this.job.source })
    );
    this._summary = detail.summary;
    if (!this._envShown) {
      this._env.setDetail(detail);
      for (const replica of detail.replicas) {
        this._ensureView(replica.task_name);
      }
      this._envShown = true;
    }
    this._renderHeader();
    return detail;
  }

  private _renderHeader(): void {
    const job = this._summary;
    const header = this._header.node;
    header.replaceChildren();
    if (this._failure) {
      header.appendChild(element('div', 'jp-VertexTrain-error', this._failure));
    }
    if (!job) {
      return;
    }
    header.appendChild(stateBadge(job.state));
    header.appendChild(
      element('span', 'jp-VertexTrain-elapsed', formatElapsed(job.duration))
    );
    header.appendChild(
      element('span', 'jp-VertexTrain-jobTitle', job.display_name)
    );
    header.appendChild(element('code', 'jp-VertexTrain-jobName', job.name));
    if (job.console_url) {
      const link = element('a', '', 'Vertex AI console');
      link.href = job.console_url;
      link.target = '_blank';
      link.rel = 'noopener';
      header.appendChild(link);
    }
    const access = Object.entries(job.access ?? {});
    if (access.length) {
      header.appendChild(accessLine(access, job.access_heading));
    }
    if (job.error) {
      header.appendChild(element('pre', 'jp-VertexTrain-error', job.error));
    }
    this.title.label = `${job.display_name} (${job.state.replace(/^JOB_STATE_/, '')})`;
    this.stateChanged();
  }

  /** Called when the state changes, so the toolbar can follow. */
  stateChanged: () => void = () => undefined;

  private async _followState(): Promise<void> {
    while (!this._stopped) {
      try {
        const detail = await this._refresh();
        this._failure = '';
        if (detail.summary.final) {
          return;
        }
      } catch (error) {
        this._failure = (error as Error).message;
        this._renderHeader();
      }
      await sleep(STATE_MS);
    }
  }

  private async _followLogs(): Promise<void> {
    let cursor = '';
    while (!this._stopped) {
      let page: ILogPage;
      try {
        page = await requestAPI<ILogPage>(
          withQuery(jobPath(this.job.id, 'logs'), {
            source: this.job.source,
            cursor
          })
        );
      } catch (error) {
        this._failure = `Logs: ${(error as Error).message}`;
        this._renderHeader();
        await sleep(RETRY_MS);
        continue;
      }
      if (this._stopped) {
        return;
      }
      this._show(page.entries);
      cursor = page.next_cursor;
      if (page.done) {
        this.node.dataset.logsDone = 'true';
        return;
      }
      await sleep(page.next_poll_ms); // the reader's pace: within the read quota on Cloud Logging
    }
  }

  /**
   * Entries into the views, folded as the notebook's monitor folds them (widgets/logbuffer.py):
   * `\r` updates show a line's latest state, and a piece of a line the runner split goes on
   * with the line before it, which is updated in place.
   */
  private _show(entries: ILogEntry[]): void {
    let fresh: IShownLine[] = [];
    const flush = () => {
      this._add(fresh);
      fresh = [];
    };
    for (const entry of entries) {
      const key = `${entry.replica} ${entry.severity}`; // one terminal line per replica and stream
      const before = this._unfinished.get(key);
      this._unfinished.delete(key);
      const state = writeLine(before?.state ?? BLANK_LINE, entry.text);
      const line = before?.line ?? { entry, text: '' };
      line.text = state.text;
      if (!before) {
        fresh.push(line);
      } else if (!fresh.includes(line)) {
        flush();
        this._views.get(ALL)!.rewrite(line);
        this._ensureView(entry.replica).rewrite(line);
      }
      if (continues(entry.text)) {
        this._unfinished.set(key, { line, state });
      }
    }
    flush();
  }

  private _add(lines: IShownLine[]): void {
    this._views.get(ALL)!.add(lines);
    const byReplica = new Map<string, IShownLine[]>();
    for (const line of lines) {
      const list = byReplica.get(line.entry.replica) ?? [];
      list.push(line);
      byReplica.set(line.entry.replica, list);
    }
    for (const [replica, list] of byReplica) {
      this._ensureView(replica).add(list);
    }
  }

  private _header: Widget;
  private _tabs: TabPanel;
  private _env: EnvironmentView;
  private _views = new Map<string, LogView>();
  /** Lines whose last entry was a piece the runner cut: the next one of its replica and stream goes on with it. */
  private _unfinished = new Map<
    string,
    { line: IShownLine; state: ITerminalLine }
  >();
  private _summary: IJobSummary | null = null;
  private _envShown = false;
  private _failure = '';
  private _stopped = false;
}

/** A job view in a main-area frame with a Cancel button. */
export function createJobWidget(job: IJobRef): MainAreaWidget<JobView> {
  const content = new JobView(job);
  const widget = new MainAreaWidget({ content });
  widget.id = `vertex-train-job-${job.source}-${job.id}`;
  widget.title.icon = trainIcon;
  widget.title.label = job.id;
  widget.title.closable = true;
  const cancel = new ToolbarButton({
    icon: stopIcon,
    label: 'Cancel',
    tooltip: 'Cancel this job',
    className: 'jp-VertexTrain-cancelJob',
    onClick: () => {
      cancel.enabled = false;
      content.cancel().catch(error => {
        cancel.enabled = true;
        console.error('vertex-train: cancel failed', error);
      });
    }
  });
  widget.toolbar.addItem('cancel', cancel);
  content.stateChanged = () => {
    widget.title.label = content.title.label;
    cancel.enabled = !(content.summary?.final ?? false);
  };
  content.start();
  return widget;
}

namespace Private {
  export let nextId = 0;
}
