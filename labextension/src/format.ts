/** Small shared presentation helpers: the same colours and formats as the notebook's job monitor. */

/** Replica colours of the monitor widget (widgets/logbuffer.py PALETTE). */
const PALETTE = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#9467bd',
  '#ff7f0e',
  '#17becf',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22'
];
/** Colours between pools (widgets/logbuffer.py POOL_STRIDE). */
const POOL_STRIDE = 4;

/** (pool, index) of `workerpoolP-I`; other names sort last. */
export function taskKey(taskName: string): [number, number] {
  const m = /^workerpool(\d+)-(\d+)$/.exec(taskName);
  return m ? [Number(m[1]), Number(m[2])] : [99, 0];
}

export function compareTasks(a: string, b: string): number {
  const [pa, ia] = taskKey(a);
  const [pb, ib] = taskKey(b);
  return pa - pb || ia - ib;
}

export function replicaColour(taskName: string): string {
  const [pool, index] = taskKey(taskName);
  return PALETTE[(pool * POOL_STRIDE + index) % PALETTE.length];
}

/** `JOB_STATE_RUNNING` -> `RUNNING`. */
export function shortState(state: string): string {
  return state.replace(/^JOB_STATE_/, '') || '…';
}

/** A coloured state badge; its colour comes from the theme (style/base.css). */
export function stateBadge(state: string): HTMLSpanElement {
  const badge = document.createElement('span');
  const short = shortState(state);
  badge.className = `jp-VertexTrain-state jp-VertexTrain-state-${short.toLowerCase()}`;
  badge.dataset.state = state;
  badge.textContent = short;
  return badge;
}

/** Seconds as m:ss or h:mm:ss, as the monitor shows them. */
export function formatElapsed(seconds: number | null): string {
  if (seconds === null || seconds === undefined) {
    return '';
  }
  const total = Math.max(0, Math.floor(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  return h ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

/** A start time: the time of day today, else the date and time. */
export function formatStart(iso: string | null): string {
  if (!iso) {
    return '';
  }
  const when = new Date(iso);
  const today = new Date();
  const time = when.toLocaleTimeString([], { hour12: false });
  return when.toDateString() === today.toDateString()
    ? time
    : `${when.toLocaleDateString()} ${time}`;
}

export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

export const sleep = (ms: number): Promise<void> =>
  new Promise(resolve => setTimeout(resolve, ms));

/**
 * A log line as a terminal shows it, as the notebook's monitor folds it (widgets/logbuffer.py):
 * progress bars (Keras, tqdm) rewrite their line with `\r` (Keras first backs up with `\b`), so
 * what stays is each column's last character, without colour codes.
 */
export interface ITerminalLine {
  text: string;
  /** the column the cursor is at */
  at: number;
  /** the start of a colour code an entry's end cut short (the next entry goes on with it) */
  escape: string;
}

export const BLANK_LINE: ITerminalLine = { text: '', at: 0, escape: '' };
/** Bytes of text in one entry: the runner splits longer lines (jupyter_ext/runner/logs.py). */
const MAX_LINE = 256 * 1024;
const SGR = /\x1b\[[0-9;]*m/g;
const CUT_SGR = /\x1b(\[[0-9;]*)?$/;
const UTF8 = new TextEncoder();

/** `text` written on `line`: the line then. */
export function writeLine(line: ITerminalLine, text: string): ITerminalLine {
  text = line.escape + text;
  let { text: shown, at } = line;
  if (!/[\r\x08\x1b]/.test(text)) {
    return {
      text: shown.slice(0, at) + text + shown.slice(at + text.length),
      at: at + text.length,
      escape: ''
    };
  }
  const escape = CUT_SGR.exec(text)?.[0] ?? '';
  const parts = text
    .slice(0, text.length - escape.length)
    .replace(SGR, '')
    .replace(/\x08/g, '')
    .split('\r');
  parts.forEach((part, n) => {
    at = n === 0 ? at : 0;
    shown = shown.slice(0, at) + part + shown.slice(at + part.length);
    at += part.length;
  });
  return { text: shown, at, escape };
}

/** Whether an entry is a piece of a longer line: the runner cut it at MAX_LINE bytes (up to 3 before, so as not to cut a character). */
export function continues(text: string): boolean {
  return (
    text.length * 4 >= MAX_LINE - 4 && UTF8.encode(text).length >= MAX_LINE - 4
  );
}
