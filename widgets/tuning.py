"""`TuningMonitor`: a live view of a hyperparameter tuning job — state badge, the
best trial, a table of trials (parameters, state, metric) with the best row
highlighted, a plot of the metric per trial and over time, and a trial selector
that opens the chosen trial's logs in a `JobMonitor`.

What it shows is computed by plain functions (`trials_frame`, `table_html`,
`plot_svg`, `summary_html`) from the HyperparameterTuningJob resource, so they
are tested without a browser. The plot is a small hand-made SVG: no plotting
library is needed. One background thread polls the job; redraws replace HTML
values inside `hold_sync()`.
"""

from __future__ import annotations

import html
import threading
import time
from datetime import datetime, timezone
from typing import Any

import ipywidgets as w
import pandas as pd
import traitlets

from jupyter_ext import states, tuning

from .logbuffer import PALETTE, STATE_COLOURS, error_html, format_elapsed, state_badge
from .monitor import JobMonitor

POLL_EVERY = 1.0
BEST_BG = "#fff3c4"
NO_TRIAL = "(choose a trial)"


# ---------------------------------------------------------------- plain functions

def trials_frame(resource: Any) -> pd.DataFrame:
    """One row per trial: trial id, a column per parameter, state, the metric, seconds it ran."""
    metric = tuning.metric_name(resource)
    names = [p.parameter_id for p in resource.study_spec.parameters]
    rows = []
    for trial in resource.trials:
        params = tuning.parameters_of(trial)
        start, end = trial.start_time, trial.end_time
        seconds = ((end or datetime.now(timezone.utc)) - start).total_seconds() if start else None
        rows.append({"trial": trial.id, **{n: params.get(n) for n in names},
                     "state": tuning.trial_state_label(trial, resource),
                     metric: tuning.metric_value(trial, metric), "seconds": seconds})
    return pd.DataFrame(rows, columns=["trial", *names, "state", metric, "seconds"])


def best_trial_id(resource: Any) -> str:
    best = tuning.best_trial(resource)
    return best.id if best is not None else ""


def table_html(resource: Any) -> str:
    """The trials table; the best trial's row highlighted, a failed trial's reason as its tooltip."""
    frame = trials_frame(resource)
    if frame.empty:
        return '<span style="opacity:.6">no trials yet</span>'
    best = best_trial_id(resource)
    reasons = {t.id: t.infeasible_reason for t in resource.trials}
    head = "".join(f'<th style="text-align:left;padding:2px 8px">{html.escape(str(c))}</th>' for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row):
            text = _cell(column, value)
            if column == "state":
                colour = STATE_COLOURS.get(str(value), "#555")
                text = f'<span style="color:{colour};font-weight:600">{text}</span>'
            cells.append(f'<td style="padding:2px 8px">{text}</td>')
        trial_id = str(row[0])
        style = f' style="background:{BEST_BG};font-weight:600"' if trial_id == best else ""
        title = f' title="{html.escape(reasons.get(trial_id, ""))}"' if reasons.get(trial_id) else ""
        marker = ' data-best="true"' if trial_id == best else ""
        body.append(f"<tr{style}{title}{marker}>{''.join(cells)}</tr>")
    return (f'<table style="border-collapse:collapse;font-size:12px"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    if column == "seconds":
        return format_elapsed(float(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return html.escape(str(value))


def summary_html(resource: Any) -> str:
    best = tuning.best_trial(resource)
    done = sum(1 for t in resource.trials if tuning.trial_ended(t))
    counts = f"{done}/{resource.max_trial_count} trials done"
    if best is None:
        return f'<span style="opacity:.8">{counts}; no best trial yet</span>'
    return f'<span style="opacity:.8">{counts};</span> <b>{html.escape(tuning.summary(resource))}</b>'


def plot_svg(resource: Any, width: int = 720, height: int = 220) -> str:
    """Two panels: the final metric per trial (best ringed, best-so-far as a step line), and every
    trial's reported metric over the tuning job's time."""
    metric = tuning.metric_name(resource)
    goal_min = bool(resource.study_spec.metrics) and resource.study_spec.metrics[0].goal.name == "MINIMIZE"
    finals = [(int(t.id), v) for t in resource.trials if t.id.isdigit()
              and (v := tuning.metric_value(t, metric)) is not None and t.state.name == "SUCCEEDED"]
    curves = _curves(resource, metric)
    values = [v for _, v in finals] + [v for points in curves.values() for _, v in points]
    title = f'<text x="8" y="14" font-size="12" font-weight="600">{html.escape(metric)}</text>'
    if not values:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="48" font-family="sans-serif">'
                f'{title}<text x="8" y="34" font-size="12" fill="#777">no metric reported yet</text></svg>')
    low, high = min(values), max(values)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    best = best_trial_id(resource)
    half = width // 2
    left = _panel(0, half, height, low, high, "trial", _per_trial(finals, best, goal_min, half, height, low, high,
                                                                  max((int(t.id) for t in resource.trials
                                                                       if t.id.isdigit()), default=1)))
    span = max((x for points in curves.values() for x, _ in points), default=1.0) or 1.0
    right = _panel(half, half, height, low, high, "seconds", _over_time(curves, best, span, half, height, low, high))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
            f'font-size="10">{title}{left}{right}</svg>')


_PAD_L, _PAD_R, _PAD_T, _PAD_B = 44, 12, 24, 26


def _scale(value: float, low: float, high: float, size: float) -> float:
    return (value - low) / (high - low) * size


def _panel(x0: int, width: int, height: int, low: float, high: float, x_label: str, body: str) -> str:
    plot_w, plot_h = width - _PAD_L - _PAD_R, height - _PAD_T - _PAD_B
    ticks = "".join(
        f'<text x="{x0 + _PAD_L - 4}" y="{_PAD_T + plot_h - _scale(v, low, high, plot_h) + 3:.1f}" '
        f'text-anchor="end" fill="#555">{v:.3g}</text>' for v in (low, (low + high) / 2, high))
    return (f'<g><rect x="{x0 + _PAD_L}" y="{_PAD_T}" width="{plot_w}" height="{plot_h}" fill="none" '
            f'stroke="#ccc"/>{ticks}<text x="{x0 + _PAD_L + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle" '
            f'fill="#555">{x_label}</text><g transform="translate({x0 + _PAD_L},{_PAD_T})">{body}</g></g>')


def _per_trial(finals: list[tuple[int, float]], best: str, goal_min: bool, width: int, height: int,
               low: float, high: float, last_trial: int) -> str:
    plot_w, plot_h = width - _PAD_L - _PAD_R, height - _PAD_T - _PAD_B

    def xy(n: int, v: float) -> tuple[float, float]:
        x = plot_w / 2 if last_trial <= 1 else (n - 1) / (last_trial - 1) * plot_w
        return x, plot_h - _scale(v, low, high, plot_h)

    parts, steps, running = [], [], None
    for n, v in sorted(finals):
        running = v if running is None else (min(running, v) if goal_min else max(running, v))
        steps.append(xy(n, running))
    if steps:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in steps)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#999" stroke-dasharray="3,2"/>')
    for n, v in sorted(finals):
        x, y = xy(n, v)
        is_best = str(n) == best
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if is_best else 3}" '
                     f'fill="{"#f9a825" if is_best else PALETTE[0]}" stroke="{"#c62828" if is_best else "none"}" '
                     f'stroke-width="2" data-trial="{n}"><title>trial {n}: {v:.6g}</title></circle>')
        parts.append(f'<text x="{x:.1f}" y="{plot_h + 12}" text-anchor="middle" fill="#555">{n}</text>')
        if is_best:
            parts.append(f'<text x="{x + 7:.1f}" y="{y - 6:.1f}" fill="#c62828" font-weight="600">best</text>')
    return "".join(parts)


def _curves(resource: Any, metric: str) -> dict[str, list[tuple[float, float]]]:
    """Per trial: (seconds since the tuning job started, reported value) of every measurement."""
    origin = resource.start_time or resource.create_time
    curves: dict[str, list[tuple[float, float]]] = {}
    for trial in resource.trials:
        if not trial.start_time or not origin:
            continue
        offset = (trial.start_time - origin).total_seconds()
        points = []
        for m in trial.measurements:
            for item in m.metrics:
                if item.metric_id == metric:
                    points.append((offset + m.elapsed_duration.total_seconds(), item.value))
        if points:
            curves[trial.id] = points
    return curves


def _over_time(curves: dict[str, list[tuple[float, float]]], best: str, span: float, width: int, height: int,
               low: float, high: float) -> str:
    plot_w, plot_h = width - _PAD_L - _PAD_R, height - _PAD_T - _PAD_B
    parts = []
    for n, (trial_id, points) in enumerate(sorted(curves.items(), key=lambda kv: (len(kv[0]), kv[0]))):
        colour = "#c62828" if trial_id == best else PALETTE[n % len(PALETTE)]
        xy = [(x / span * plot_w, plot_h - _scale(v, low, high, plot_h)) for x, v in points]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                     f'stroke-width="{2.5 if trial_id == best else 1.2}" data-trial="{trial_id}">'
                     f"<title>trial {trial_id}</title></polyline>")
        x, y = xy[-1]
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>')
    parts.append(f'<text x="{plot_w}" y="{plot_h + 12}" text-anchor="end" fill="#555">{span:.0f}s</text>')
    return "".join(parts)


# ---------------------------------------------------------------- the widget

class TuningMonitor(w.VBox):
    state = traitlets.Unicode("", help="the tuning job's state, e.g. JOB_STATE_RUNNING")
    error = traitlets.Unicode("", help="the tuning job's error message when it failed or was cancelled")
    job_name = traitlets.Unicode("", help="the tuning job's resource name")
    best_trial = traitlets.Unicode("", help="the ID of the best trial so far")
    selected_trial = traitlets.Unicode("", help="the trial whose logs are shown")

    def __init__(self, handle: Any = None, *, follow: bool = True, **kwargs: Any) -> None:
        self.handle = handle
        self.resource: Any = None
        self._badge = w.HTML()
        self._title = w.HTML()
        self._cancel = w.Button(description="Cancel", icon="stop", button_style="danger", layout=w.Layout(width="auto"))
        self._error = w.HTML()
        self._summary = w.HTML()
        self._table = w.HTML()
        self._plot = w.HTML()
        self._trials = w.Dropdown(options=[NO_TRIAL], value=NO_TRIAL, description="Logs of",
                                  layout=w.Layout(width="18em"))
        self._trial_box = w.VBox()
        self._monitors: dict[str, JobMonitor] = {}
        self._thread: threading.Thread | None = None
        header = w.HBox([self._badge, self._title, self._cancel],
                        layout=w.Layout(align_items="center", justify_content="space-between"))
        super().__init__([header, self._error, self._summary, self._table, self._plot, self._trials,
                          self._trial_box], **kwargs)
        self._cancel.on_click(lambda _b: self.cancel())
        self._trials.observe(self._on_pick, names="value")
        if handle is not None:
            self.job_name = handle.name
            self._title.value = f"<code>{html.escape(handle.name)}</code>"
            self.update(handle.resource)  # as submitted or attached: shown (and saved) before the first poll
            if follow:
                self.start()

    # ---- public ----------------------------------------------------------------
    def start(self) -> None:
        """Poll the tuning job in the background until it ends."""
        self._thread = threading.Thread(target=self._poll, name="tuning-monitor", daemon=True)
        self._thread.start()

    @property
    def finished(self) -> bool:
        """The tuning job is final and drawn."""
        return self._thread is not None and not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> str:
        """Block until the tuning job is final (and drawn); its final state."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.state

    def cancel(self) -> None:
        if self.handle is not None and not states.is_final(self.state):
            self.handle.cancel()
            self._cancel.disabled = True

    def update(self, resource: Any) -> None:
        """Redraw from a HyperparameterTuningJob resource."""
        self.resource = resource
        state = resource.state.name
        elapsed = ""
        if resource.start_time:
            end = resource.end_time or datetime.now(timezone.utc)
            elapsed = format_elapsed((end - resource.start_time).total_seconds())
        options = [NO_TRIAL] + [f"trial {t.id}" for t in resource.trials]
        with self.hold_sync():
            self.state, self.error = state, resource.error.message
            self.best_trial = best_trial_id(resource)
            self._badge.value = state_badge(state, elapsed)
            self._cancel.disabled = states.is_final(state)
            self._error.value = error_html(resource.error.message)
            self._summary.value = summary_html(resource)
            self._table.value = table_html(resource)
            self._plot.value = plot_svg(resource)
            if list(self._trials.options) != options:
                current = self._trials.value
                self._trials.options = options
                self._trials.value = current if current in options else NO_TRIAL

    def show_trial(self, trial_id: str | int) -> JobMonitor:
        """Open a trial's logs (a JobMonitor over that trial, following it while it runs)."""
        trial_id = str(trial_id)
        monitor = self._monitors.get(trial_id)
        if monitor is None:
            monitor = self._monitors[trial_id] = JobMonitor(self.handle.trial(trial_id))
            button = getattr(monitor, "_cancel", None)
            if button is not None:  # one trial cannot be cancelled; this view's Cancel stops the tuning job
                button.layout.display = "none"
        self.selected_trial = trial_id
        self._trial_box.children = [monitor]
        label = f"trial {trial_id}"
        if label in self._trials.options and self._trials.value != label:
            self._trials.value = label
        return monitor

    def to_html(self) -> str:
        if self.resource is None:
            return state_badge(self.state) + f" <code>{html.escape(self.job_name)}</code>"
        r = self.resource
        return "".join([state_badge(r.state.name), f" <code>{html.escape(self.job_name)}</code>",
                        error_html(r.error.message), "<div>", summary_html(r), "</div>", table_html(r),
                        plot_svg(r)])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.to_html()
        bundle["text/plain"] = self.to_text()
        return bundle

    def to_text(self) -> str:
        """The job, its state, its trials and the best one, as plain text (what a saved notebook keeps
        where widgets do not render)."""
        head = " ".join(part for part in (self.job_name, self.state.removeprefix("JOB_STATE_")) if part)
        if self.resource is None:
            return head
        lines = [head, *([self.error] if self.error else [])]
        frame = trials_frame(self.resource)
        if not frame.empty:
            lines.append(frame.drop(columns="seconds").to_string(index=False))
        if self.best_trial:
            lines.append(f"best trial: {self.best_trial}")
        return "\n".join(lines)

    # ---- internals ---------------------------------------------------------------
    def _on_pick(self, change: dict[str, Any]) -> None:
        value = change["new"]
        if value and value != NO_TRIAL:
            self.show_trial(value.removeprefix("trial "))

    def _poll(self) -> None:
        failures = 0
        while True:
            try:
                resource = self.handle.refresh()
            except Exception as exc:  # the service restarting, a network hiccup: say so, try again
                failures += 1
                self._error.value = error_html(f"cannot read the tuning job: {getattr(exc, 'message', exc)}")
                if failures >= 30:
                    return
                time.sleep(POLL_EVERY * 2)
                continue
            failures = 0
            self.update(resource)
            if states.is_final(resource.state):
                return
            time.sleep(POLL_EVERY)
