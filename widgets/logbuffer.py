"""What the job monitor shows, as plain data: bounded per-replica log buffers,
filtering, colours and HTML. No widgets here, so it is tested without a browser.

The buffers keep the last `max_lines` lines per replica and for the "all" view:
the full log stays on disk and in the log API, and 100k lines never reach the
browser at once.
"""

from __future__ import annotations

import collections
import html
import re
import threading
from dataclasses import dataclass
from typing import Iterable

ALL = "all"
# distinct, readable on light and dark backgrounds
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22")
STATE_COLOURS = {"SUCCEEDED": "#2e7d32", "FAILED": "#c62828", "CANCELLED": "#6d4c41", "CANCELLING": "#6d4c41",
                 "RUNNING": "#1565c0", "PENDING": "#6a1b9a", "QUEUED": "#6a1b9a"}


@dataclass(frozen=True)
class Line:
    task_name: str
    time: str  # HH:MM:SS.mmm
    text: str
    severity: str = "INFO"


class LogBuffer:
    """Thread-safe: a follower thread adds, the view reads."""

    def __init__(self, max_lines: int = 2000) -> None:
        self.max_lines = max_lines
        self._views: dict[str, collections.deque[Line]] = {ALL: collections.deque(maxlen=max_lines)}
        self._counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self.version = 0  # bumps on every change, so a view knows when to redraw

    def add(self, lines: Iterable[Line]) -> None:
        with self._lock:
            for line in lines:
                view = self._views.get(line.task_name)
                if view is None:
                    view = self._views[line.task_name] = collections.deque(maxlen=self.max_lines)
                view.append(line)
                self._views[ALL].append(line)
                self._counts[line.task_name] += 1
            self.version += 1

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


def fold(text: str) -> str:
    """A line as a terminal shows it: progress bars (Keras, tqdm) rewrite the line with `\r`
    (Keras first backs up with `\b`), so what stays is each column's last character."""
    if "\r" not in text and "\b" not in text and "\x1b" not in text:
        return text
    shown = ""
    for part in _SGR.sub("", text).replace("\b", "").split("\r"):
        shown = part + shown[len(part):]
    return shown


def colour(task_name: str) -> str:
    return PALETTE[sum(task_key(task_name)) % len(PALETTE)]


def render_lines(lines: list[Line], with_names: bool) -> str:
    rows = []
    for line in lines:
        text = html.escape(line.text)
        if line.severity in ("ERROR", "CRITICAL", "ALERT", "EMERGENCY"):
            text = f'<span style="color:#c62828">{text}</span>'
        name = (f'<span style="color:{colour(line.task_name)};font-weight:600">[{line.task_name}]</span> '
                if with_names else "")
        rows.append(f'<span style="opacity:.6">{line.time}</span> {name}{text}')
    body = "\n".join(rows) or '<span style="opacity:.6">no lines yet</span>'
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


def access_html(access: dict[str, str]) -> str:
    """How to open a shell in each replica: Vertex AI's links, or the local `vtrain shell` commands."""
    if not access:
        return ""
    items = []
    for task, how in sorted(access.items(), key=lambda item: task_key(item[0])):
        if how.startswith("https://") or how.startswith("http://"):
            items.append(f'<a href="{html.escape(how)}" target="_blank" rel="noopener">{html.escape(task)}</a>')
        else:
            items.append(f"<code>{html.escape(how)}</code>")
    return f'<div class="vtrain-access">Shell into a replica: {" &nbsp; ".join(items)}</div>'


def format_elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def task_key(task_name: str) -> tuple[int, int]:
    m = re.fullmatch(r"workerpool(\d+)-(\d+)", task_name)
    return (int(m.group(1)), int(m.group(2))) if m else (99, 0)
