"""What the job monitor shows, as plain data: bounded per-replica log buffers,
filtering, colours and HTML. No widgets here, so it is tested without a browser.

The buffers keep the last `max_lines` lines per replica and for the "all" view:
the full log stays on disk and in the log API, and 100k lines never reach the
browser at once.

Lines are shown as a terminal would show them: progress bars (Keras, tqdm)
rewrite their line with `\r`, so one epoch is one line. The runner splits a line
longer than MAX_LINE bytes into several entries (`jupyter_ext.runner.logs`), and
an epoch of thousands of updates is such a line; entries carry no mark of it, so
an entry of (nearly) MAX_LINE bytes is taken as unfinished: its replica's next
entry of the same stream goes on with it. Until then the line shows its latest
state, and is replaced in place as it goes on.
"""

from __future__ import annotations

import collections
import html
import re
import threading
from dataclasses import dataclass, replace
from typing import Iterable, NamedTuple

from jupyter_ext import replica_shell
from jupyter_ext.runner.logs import MAX_LINE

ALL = "all"
# distinct, readable on light and dark backgrounds
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
POOL_STRIDE = 4  # colours between pools: a chief, four workers, two parameter servers, evaluators all differ
STATE_COLOURS = {"SUCCEEDED": "#2e7d32", "FAILED": "#c62828", "CANCELLED": "#6d4c41", "CANCELLING": "#6d4c41",
                 "RUNNING": "#1565c0", "PENDING": "#6a1b9a", "QUEUED": "#6a1b9a"}


@dataclass(frozen=True)
class Line:
    task_name: str
    time: str  # HH:MM:SS.mmm
    text: str
    severity: str = "INFO"


class _Unfinished(NamedTuple):
    """A line whose end has not come yet: as shown, where the terminal's cursor is, and the start of an
    escape sequence that the last entry was cut in."""
    line: Line
    at: int
    escape: str


class LogBuffer:
    """Thread-safe: a follower thread adds, the view reads."""

    def __init__(self, max_lines: int = 2000) -> None:
        self.max_lines = max_lines
        self._views: dict[str, collections.deque[Line]] = {ALL: collections.deque(maxlen=max_lines)}
        self._counts: collections.Counter[str] = collections.Counter()
        self._unfinished: dict[tuple[str, str], _Unfinished] = {}  # by replica and stream (severity)
        self._lock = threading.Lock()
        self.version = 0  # bumps on every change, so a view knows when to redraw

    def add(self, lines: Iterable[Line]) -> None:
        """Add log entries as read (raw text): each is shown folded, a piece of a split line with the
        pieces before it."""
        with self._lock:
            for line in lines:
                key = (line.task_name, line.severity)
                before = self._unfinished.pop(key, None)
                start = before or _Unfinished(replace(line, text=""), 0, "")
                text, at, escape = _write(start.line.text, start.at, start.escape + line.text)
                shown = replace(start.line, text=text)
                if before:  # goes on in place, with the time it started
                    self._replace(before.line, shown)
                else:
                    self._append(shown)
                if _continues(line.text):
                    self._unfinished[key] = _Unfinished(shown, at, escape)
            self.version += 1

    def _append(self, line: Line) -> None:
        view = self._views.get(line.task_name)
        if view is None:
            view = self._views[line.task_name] = collections.deque(maxlen=self.max_lines)
        view.append(line)
        self._views[ALL].append(line)
        self._counts[line.task_name] += 1

    def _replace(self, old: Line, new: Line) -> None:
        for view in (self._views[old.task_name], self._views[ALL]):
            for n in range(len(view) - 1, -1, -1):
                if view[n] is old:
                    view[n] = new
                    break
            else:  # pushed out by newer lines meanwhile: its latest state comes back at the end
                view.append(new)

    def lines(self, view: str = ALL, search: str = "") -> list[Line]:
        with self._lock:
            lines = list(self._views.get(view, ()))
        if search:
            needle = search.lower()
            lines = [ln for ln in lines if needle in ln.text.lower() or needle in ln.task_name]
        return lines

    def count(self, task_name: str | None = None) -> int:
        with self._lock:
            return sum(self._counts.values()) if task_name is None else self._counts[task_name]


_SGR = re.compile(r"\x1b\[[0-9;]*m")  # colours and bold, which Keras 3 writes even to files
_CUT_SGR = re.compile(r"\x1b(\[[0-9;]*)?\Z")  # one that an entry's end cut short


def _write(shown: str, at: int, text: str) -> tuple[str, int, str]:
    """`text` written on a terminal line that shows `shown` with the cursor at column `at`: the line
    then, the cursor, and an escape sequence cut short at the end (to go on with the next entry)."""
    escape = ""
    if "\r" not in text and "\b" not in text and "\x1b" not in text:
        parts = [text]
    else:
        cut = _CUT_SGR.search(text)
        escape = cut.group() if cut else ""
        parts = _SGR.sub("", text[:len(text) - len(escape)]).replace("\b", "").split("\r")
    for n, part in enumerate(parts):
        at = at if n == 0 else 0
        shown = shown[:at] + part + shown[at + len(part):]
        at += len(part)
    # a line that never ends (dots, no newline) must not grow the view: the log file has it all
    return shown[:MAX_LINE], at, escape


def _continues(text: str) -> bool:
    """Whether an entry is a piece of a longer line: the runner cuts at MAX_LINE bytes, up to 3 before
    so as not to cut a character, and drops a `\r` a piece ends with."""
    return len(text) * 4 >= MAX_LINE - 4 and len(text.encode("utf-8", "replace")) >= MAX_LINE - 4


def colour(task_name: str) -> str:
    """A replica's colour: pools POOL_STRIDE apart, so a chief, four workers, two parameter servers and
    evaluators differ (labextension/src/format.ts colours them the same way)."""
    pool, index = task_key(task_name)
    return PALETTE[(pool * POOL_STRIDE + index) % len(PALETTE)]


def render_lines(lines: list[Line], with_names: bool, empty: str = "no lines yet") -> str:
    rows = []
    for line in lines:
        text = html.escape(line.text)
        if line.severity in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY"):
            text = f'<span style="color:#c62828">{text}</span>'
        name = (f'<span style="color:{colour(line.task_name)};font-weight:600">[{line.task_name}]</span> '
                if with_names else "")
        rows.append(f'<span style="opacity:.6">{line.time}</span> {name}{text}')
    body = "\n".join(rows) or f'<span style="opacity:.6">{html.escape(empty)}</span>'
    return f'<pre style="max-height:28em;overflow:auto;margin:0;font-size:12px">{body}</pre>'


def state_badge(state: str, elapsed: str = "") -> str:
    short = state.removeprefix("JOB_STATE_") or "…"
    bg = STATE_COLOURS.get(short, "#455a64")
    timing = f' <span style="opacity:.7">{html.escape(elapsed)}</span>' if elapsed else ""
    return (f'<span style="background:{bg};color:white;padding:2px 8px;border-radius:10px;'
            f'font-weight:600">{short}</span>{timing}')


def error_html(error: str) -> str:
    return (f'<pre style="color:#c62828;white-space:pre-wrap;margin:0 0 6px 0;font-size:12px">'
            f"{html.escape(error)}</pre>") if error else ""


def access_html(links: list[replica_shell.Link]) -> str:
    """How to open a shell in each replica or its dashboard: Vertex AI's links, or the local `vtrain shell`
    commands."""
    if not links:
        return ""
    items = []
    for link in links:
        if link.target.startswith(("https://", "http://")):
            items.append(f'<a href="{html.escape(link.target)}" target="_blank" rel="noopener">'
                         f'{html.escape(link.label)}</a>')
        else:
            items.append(f"<code>{html.escape(link.target)}</code>")
    return (f'<div class="vtrain-access">{html.escape(replica_shell.heading(links))}: '
            f'{" &nbsp; ".join(items)}</div>')


def format_elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def task_key(task_name: str) -> tuple[int, int]:
    m = re.fullmatch(r"workerpool(\d+)-(\d+)", task_name)
    return (int(m.group(1)), int(m.group(2))) if m else (99, 0)
