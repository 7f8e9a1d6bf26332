"""Trials' metrics: cloudml-hypertune reports, measurements, the best trial.

Metrics come from Google's `cloudml-hypertune` file format: the library
rewrites `$CLOUD_ML_HP_METRIC_FILE` (default /tmp/hypertune/output.metrics)
with its last 100 reports, one JSON object per line, keys sorted:
`{"checkpoint_path": "", "global_step": "10", "<metric tag>": "0.93",
"timestamp": 1700000000.5, "trial": "3"}` (values are strings; the tag
defaults to `training/hptuning/metric`, read as the study's first metric
when that is not reported by name). The runner gives every replica its own
file; a trial's measurements are its primary replica's reports.

Final measurement (the workbench's choice; Vertex selects it from the
reported measurements by `measurementSelectionType`): BEST_MEASUREMENT takes
the primary's best report of each study metric, LAST_MEASUREMENT and
MEASUREMENT_SELECTION_TYPE_UNSPECIFIED its last report. A trial that
succeeds without reporting the study's first metric is INFEASIBLE, as on
Vertex ("done but missing the final_measurement").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from google.cloud.aiplatform_v1 import types as v1

from .params import Goal, Selection, Study, TrialState
from .trials import format_value, parameters_of

METRIC_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"
DEFAULT_METRIC_TAG = "training/hptuning/metric"
_REPORT_KEYS = {"timestamp", "trial", "global_step", "checkpoint_path"}


@dataclass(frozen=True)
class Report:
    """One line of a cloudml-hypertune metrics file."""

    timestamp: float
    step: int
    values: dict[str, float] = field(default_factory=dict)
    trial: str = ""


def read_reports(path: Path | str) -> list[Report]:
    """A metrics file's reports in file order; unreadable lines are skipped (the file is rewritten in place)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return list(parse_reports(text.splitlines()))


def parse_reports(lines: Iterable[str]) -> Iterator[Report]:
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        values = {}
        for key, value in data.items():
            if key in _REPORT_KEYS:
                continue
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                continue
        if not values:
            continue
        try:
            stamp = float(data.get("timestamp") or 0)
            step = int(float(data.get("global_step") or 0))
        except (TypeError, ValueError):
            stamp, step = 0.0, 0
        yield Report(stamp, step, values, str(data.get("trial", "")))


def measurements(reports: Sequence[Report], start: float) -> list[v1.Measurement]:
    """Reports as Measurements; `elapsed_duration` counts from the trial's start (epoch seconds)."""
    return [v1.Measurement(step_count=r.step, elapsed_duration=_duration(r.timestamp - start),
                           metrics=[{"metric_id": k, "value": v} for k, v in r.values.items()])
            for r in reports]


def _duration(seconds: float) -> dict[str, int]:
    seconds = max(0.0, seconds)
    return {"seconds": int(seconds), "nanos": int((seconds % 1) * 1e9)}


def final_measurement(reports: Sequence[Report], study: Study, start: float = 0.0) -> v1.Measurement | None:
    """The trial's final measurement (see the module notes), or None when the study's first metric is missing."""
    if not study.metrics:
        return None
    best = study.measurement_selection_type == Selection.BEST_MEASUREMENT
    primary = study.metrics[0].metric_id
    if not any(primary in r.values for r in reports):  # reported without a tag: the library's default tag
        reports = [Report(r.timestamp, r.step, {primary: r.values[DEFAULT_METRIC_TAG]}, r.trial)
                   for r in reports if DEFAULT_METRIC_TAG in r.values]
    chosen: dict[str, tuple[Report, float]] = {}
    for metric in study.metrics:
        having = [(r, r.values[metric.metric_id]) for r in reports if metric.metric_id in r.values]
        if not having:
            continue
        if best:
            pick = max if metric.goal != Goal.MINIMIZE else min
            chosen[metric.metric_id] = pick(having, key=lambda rv: rv[1])
        else:
            chosen[metric.metric_id] = having[-1]
    if primary not in chosen:
        return None
    lead = chosen[primary][0]
    return v1.Measurement(step_count=lead.step, elapsed_duration=_duration(lead.timestamp - start if start else 0.0),
                          metrics=[{"metric_id": k, "value": v} for k, (_, v) in chosen.items()])


def metric_value(trial: v1.Trial, metric_id: str) -> float | None:
    for metric in trial.final_measurement.metrics:
        if metric.metric_id == metric_id:
            return metric.value
    return None


def best_trial(resource: v1.HyperparameterTuningJob) -> v1.Trial | None:
    """The succeeded trial with the best value of the study's first metric (ties: the earlier trial)."""
    if not resource.study_spec.metrics:
        return None
    metric = resource.study_spec.metrics[0]
    sign = -1.0 if metric.goal == Goal.MINIMIZE else 1.0
    scored = [(t, metric_value(t, metric.metric_id)) for t in resource.trials if t.state == TrialState.SUCCEEDED]
    scored = [(t, v) for t, v in scored if v is not None]
    if not scored:
        return None
    return max(scored, key=lambda tv: (sign * tv[1], -_trial_number(tv[0])))[0]


def _trial_number(trial: v1.Trial) -> int:
    return int(trial.id) if trial.id.isdigit() else 0


def summary(resource: v1.HyperparameterTuningJob) -> str:
    """One line: the best trial and its metric and parameters."""
    best = best_trial(resource)
    if best is None:
        return "no trial succeeded with a metric yet"
    metric = resource.study_spec.metrics[0].metric_id
    params = ", ".join(f"{k}={format_value(v)}" for k, v in parameters_of(best).items())
    return f"best trial {best.id}: {metric}={metric_value(best, metric):.6g} ({params})"
