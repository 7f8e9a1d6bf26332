"""`JobMonitor`: a live view of a job — state badge and timings, a tab per
replica plus "all", a search box, and a Cancel button.

Two background threads: one follows the job's log entries (through the Cloud
Logging client, as everything else does), one redraws the visible tab at most
a few times a second and refreshes the state. Redraws replace an HTML value
inside `hold_sync()`; nothing writes to an output area from a thread.
"""

from __future__ import annotations

import html
import threading
import time
from datetime import datetime, timezone
from typing import Any

import ipywidgets as w
import traitlets

from jupyter_ext import failure, replica_shell, states

from .logbuffer import (ALL, Line, LogBuffer, access_html, error_html, format_elapsed, render_lines, state_badge,
                        task_key)

REDRAW_EVERY = 0.25
STATE_EVERY = 1.0
RETRY_EVERY = 2.0


class JobMonitor(w.VBox):
    state = traitlets.Unicode("", help="the job's state, e.g. JOB_STATE_RUNNING")
    error = traitlets.Unicode("", help="the job's error message when it failed or was cancelled")
    job_name = traitlets.Unicode("", help="the job's resource name")

    def __init__(self, handle: Any = None, *, max_lines: int = 2000, follow: bool = True, **kwargs: Any) -> None:
        self.buffer = LogBuffer(max_lines)
        self.handle = handle
        self._badge = w.HTML()
        self._title = w.HTML()
        self._search = w.Text(placeholder="filter lines", layout=w.Layout(width="16em"))
        self._cancel = w.Button(description="Cancel", icon="stop", button_style="danger",
                                layout=w.Layout(width="auto"))
        self._error = w.HTML()
        self._access = w.HTML()  # enableWebAccess: how to open a shell in each replica
        self._tabs = w.Tab()
        self._cluster = w.Accordion()
        self._views: dict[str, w.HTML] = {}
        self._drawn: dict[str, tuple[int, str]] = {}
        self._done = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.RLock()  # tabs change from the follower thread and from the kernel
        self._threads: list[threading.Thread] = []
        header = w.HBox([self._badge, self._title, self._search, self._cancel],
                        layout=w.Layout(align_items="center", justify_content="space-between"))
        super().__init__([header, self._error, self._access, self._tabs, self._cluster], **kwargs)
        self._cancel.on_click(lambda _b: self.cancel())
        self._search.observe(lambda _c: self.redraw(force=True), names="value")
        self._tabs.observe(lambda _c: self.redraw(force=True), names="selected_index")
        self._ensure_view(ALL)
        if handle is not None:
            self.job_name = handle.name
            self._title.value = f"<code>{html.escape(handle.name)}</code>"
            self._show_cluster(handle)
            resource = handle.resource  # as submitted or attached: shown (and saved) before the first poll
            self.set_state(resource.state.name, resource.error.message)
            if follow:
                self.start()

    # ---- public ----------------------------------------------------------------
    def start(self) -> None:
        """Follow the job's logs and state in the background."""
        for target, name in ((self._follow_logs, "logs"), (self._tick, "state")):
            thread = threading.Thread(target=target, name=f"monitor-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def cancel(self) -> None:
        if self.handle is not None and not states.is_final(self.state):
            self.handle.cancel()
            self._cancel.disabled = True

    def show_replica(self, task_name: str) -> None:
        self._ensure_view(task_name)
        self._tabs.selected_index = list(self._views).index(task_name)

    @property
    def finished(self) -> bool:
        """The job is final, every line was read and the view drawn."""
        return bool(self._threads) and not any(thread.is_alive() for thread in self._threads)

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job is final and every line was read; the final state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self.state

    def add_lines(self, lines: list[Line]) -> None:
        for line in lines:
            self._ensure_view(line.task_name)
        self.buffer.add(lines)

    def set_state(self, state: str, error: str = "", elapsed: str = "") -> None:
        self.state, self.error = state, error
        self._badge.value = state_badge(state, elapsed)
        self._cancel.disabled = states.is_final(state)
        if state == "JOB_STATE_FAILED" and error:
            self._error.value = error_html(error)
            failing = failure.parse(error)
            if failing:  # its last traceback first
                self.show_replica(failing.task_name)
        elif error:
            self._error.value = error_html(error)

    def close(self) -> None:
        """Stop following (the job goes on) and close the view."""
        self._stop.set()
        super().close()

    def redraw(self, force: bool = False) -> None:
        """Redraw the visible tab when its lines changed."""
        with self._lock:
            self._redraw(force)

    def redraw_all(self) -> None:
        """Every tab, the hidden ones too (once the job ended: a saved notebook keeps each replica's lines)."""
        with self._lock, self.hold_sync():
            key = (self.buffer.version, self._search.value)
            for view, shown in self._views.items():
                shown.value = self._rendered(view)
                self._drawn[view] = key

    def _rendered(self, view: str) -> str:
        search = self._search.value
        empty = "no line matches the filter" if search and self.buffer.count(None if view == ALL else view) else ""
        return render_lines(self.buffer.lines(view, search), with_names=view == ALL, empty=empty or "no lines yet")

    def _redraw(self, force: bool) -> None:
        if self._tabs.selected_index is None:
            return
        view = list(self._views)[self._tabs.selected_index]
        key = (self.buffer.version, self._search.value)
        if not force and self._drawn.get(view) == key:
            return
        self._drawn[view] = key
        with self.hold_sync():
            self._views[view].value = self._rendered(view)

    def to_html(self) -> str:
        parts = [state_badge(self.state), f" <code>{html.escape(self.job_name)}</code>", error_html(self.error)]
        for view in self._views:
            parts.append(f"<details><summary>{html.escape(view)} ({self.buffer.count(None if view == ALL else view)}"
                         f" lines)</summary>{render_lines(self.buffer.lines(view), view == ALL)}</details>")
        return "".join(parts)

    def to_text(self, last: int = 40) -> str:
        lines = self.buffer.lines()[-last:]
        head = f"{self.job_name} {self.state.removeprefix('JOB_STATE_')}"
        tail = [self.error] if self.error else []
        return "\n".join([head, *(f"[{ln.task_name}] {ln.text}" for ln in lines), *tail])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.to_html()
        bundle["text/plain"] = self.to_text()
        return bundle

    def _show_cluster(self, handle: Any) -> None:
        """Every replica's TF_CONFIG and CLUSTER_SPEC, as the job's target gives them."""
        from jupyter_ext.spec import JobSpec

        from .inspector import ClusterInspector

        self.inspector = ClusterInspector(JobSpec.load(handle.resource), style=handle.address_style)
        self._cluster.children = [self.inspector]
        self._cluster.set_title(0, "TF_CONFIG and CLUSTER_SPEC of every replica")
        self._cluster.selected_index = None

    # ---- background work ---------------------------------------------------------
    def _ensure_view(self, view: str) -> None:
        if view in self._views:
            return
        with self._lock:
            if view not in self._views:
                self._add_view(view)

    def _add_view(self, view: str) -> None:
        self._views[view] = w.HTML(render_lines([], view == ALL))
        order = sorted(self._views, key=lambda name: (name != ALL, task_key(name)))
        selected = list(self._views)[self._tabs.selected_index or 0] if self._tabs.children else ALL
        self._views = {name: self._views[name] for name in order}
        self._tabs.children = list(self._views.values())
        for n, name in enumerate(self._views):
            self._tabs.set_title(n, name)
        self._tabs.selected_index = order.index(selected)

    def _follow_logs(self) -> None:
        """Follow the log; after a failed read (the service restarting, a network blip) say so and
        read again from where the reader stopped."""
        from jupyter_ext.launch.logs import time_of_day

        reader = self.handle.log_reader()
        try:
            while not self._stop.is_set():
                try:
                    # the state the view last read (at most a second old): once final, every entry is written
                    for record in reader.follow(lambda: states.is_final(self.state), stop=self._stop):
                        self.add_lines([Line(record.task_name, time_of_day(record.timestamp),
                                             record.text, record.severity)])
                    return
                except Exception as exc:  # noqa: BLE001  (shown in the view; the thread must go on)
                    self._error.value = error_html(f"reading the logs failed, retrying: {exc}")
                    self._stop.wait(RETRY_EVERY)
        finally:
            self._done.set()

    def _tick(self) -> None:
        last_state = 0.0
        while not self._stop.is_set():
            finished = self._done.wait(REDRAW_EVERY)
            if finished or time.monotonic() - last_state >= STATE_EVERY:
                self._refresh_state()
                last_state = time.monotonic()
            self.redraw()
            if finished:
                self.redraw_all()
                return

    def _refresh_state(self) -> None:
        try:
            resource = self.handle.refresh()
        except Exception as exc:  # noqa: BLE001  (shown; the next tick tries again)
            self._error.value = error_html(f"reading the job's state failed, retrying: {exc}")
            return
        start, end = resource.start_time, resource.end_time
        elapsed = format_elapsed(((end or datetime.now(timezone.utc)) - start).total_seconds()) if start else ""
        self.set_state(resource.state.name, resource.error.message, elapsed)
        self._access.value = access_html(replica_shell.links(resource, local=self.handle.target.local))

