"""Hyperparameter tuning studies: parameters, sampling, trial jobs and metrics.

Plain functions over the API's own types (`v1.StudySpec`, `v1.Trial`,
`v1.Measurement`, `v1.HyperparameterTuningJob`); the local service's tuning
manager, the CLI, the magic and the widget all use them.

- Short forms: `--tune "lr=double:1e-4:1e-1:log, units=int:16:128, opt=categorical:adam,sgd"`
  and `--metric accuracy:maximize` become a `StudySpec` (`study_spec`).
- Validation: one line per problem naming the field, e.g.
  `studySpec.parameters[1].doubleValueSpec.minValue: must be below maxValue`;
  the trial job is checked with the same rules as any CustomJob.
- Sampling (`suggestions`): RANDOM_SEARCH draws from a generator seeded with
  the tuning job's ID, so a job's trials are reproducible. GRID_SEARCH walks
  the cartesian product of categorical, discrete and integer values; doubles
  take evenly spaced points (log-spaced on a log scale), as many as make the
  grid at least `maxTrialCount` points. When the grid is larger than
  `maxTrialCount`, the trials are points spread evenly over the whole grid
  (in product order), not its first corner; when smaller, the study ends with
  the grid. ALGORITHM_UNSPECIFIED (Vertex AI's default Bayesian optimization)
  runs as random search, with a notice. Vertex AI's grid search takes no
  doubles; locally they are allowed, with a notice.
- A trial's parameters reach every replica as `--name=value` arguments, after
  the pool's own arguments (a Reduction Server pool gets none).
- Metrics come from Google's `cloudml-hypertune` file format: the library
  rewrites `$CLOUD_ML_HP_METRIC_FILE` (default /tmp/hypertune/output.metrics)
  with its last 100 reports, one JSON object per line, keys sorted:
  `{"checkpoint_path": "", "global_step": "10", "<metric tag>": "0.93",
  "timestamp": 1700000000.5, "trial": "3"}` (values are strings; the tag
  defaults to `training/hptuning/metric`, read as the study's first metric
  when that is not reported by name). The runner gives every replica its own
  file; a trial's measurements are its primary replica's reports.
- Final measurement (the workbench's choice; Vertex selects it from the
  reported measurements by `measurementSelectionType`): BEST_MEASUREMENT takes
  the primary's best report of each study metric, LAST_MEASUREMENT and
  MEASUREMENT_SELECTION_TYPE_UNSPECIFIED its last report. A trial that
  succeeds without reporting the study's first metric is INFEASIBLE, as on
  Vertex ("done but missing the final_measurement").
- `maxFailedTrialCount` (the workbench's reading of the field): the job fails
  once more trials have failed than the count allows; 0 ("Vertex AI decides")
  sets no limit, and the job fails only when no trial succeeded.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from google.cloud.aiplatform_v1 import types as v1
from google.protobuf import json_format

from . import catalog, validate
from .errors import SpecError, ValidationError
from .spec import JobSpec, is_empty_pool, pool_image

METRIC_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"
TRIAL_ID_ENV = "CLOUD_ML_TRIAL_ID"
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"
DEFAULT_METRIC_TAG = "training/hptuning/metric"
_REPORT_KEYS = {"timestamp", "trial", "global_step", "checkpoint_path"}

Study = v1.StudySpec
Param = v1.StudySpec.ParameterSpec
Algorithm = v1.StudySpec.Algorithm
Scale = v1.StudySpec.ParameterSpec.ScaleType
Goal = v1.StudySpec.MetricSpec.GoalType
Selection = v1.StudySpec.MeasurementSelectionType
TrialState = v1.Trial.State

ALGORITHMS = {"random": Algorithm.RANDOM_SEARCH, "grid": Algorithm.GRID_SEARCH,
              "bayesian": Algorithm.ALGORITHM_UNSPECIFIED, "default": Algorithm.ALGORITHM_UNSPECIFIED}
SCALES = {"linear": Scale.UNIT_LINEAR_SCALE, "log": Scale.UNIT_LOG_SCALE, "reverse_log": Scale.UNIT_REVERSE_LOG_SCALE,
          "reverse-log": Scale.UNIT_REVERSE_LOG_SCALE}
KINDS = {"double": "double_value_spec", "float": "double_value_spec", "int": "integer_value_spec",
         "integer": "integer_value_spec", "categorical": "categorical_value_spec", "discrete": "discrete_value_spec"}
_CAMEL = {"double_value_spec": "doubleValueSpec", "integer_value_spec": "integerValueSpec",
          "categorical_value_spec": "categoricalValueSpec", "discrete_value_spec": "discreteValueSpec"}
_LOG_SCALES = (Scale.UNIT_LOG_SCALE, Scale.UNIT_REVERSE_LOG_SCALE)
MAX_NAME = 128
BAYESIAN_NOTICE = ("studySpec.algorithm: Vertex AI's default (Bayesian optimization) runs as random search "
                   "on this machine")


# ---------------------------------------------------------------- short forms

def parse_parameters(text: str) -> list[Param]:
    """`name=type:spec, ...` (types: double, int, categorical, discrete) as ParameterSpecs.

    double:MIN:MAX[:linear|log|reverse_log], int:MIN:MAX[:scale], categorical:a,b,c, discrete:1,2,4[:scale].
    """
    text = text.strip()
    if not text:
        raise SpecError("--tune", "no parameters; e.g. \"lr=double:1e-4:1e-1:log, units=int:16:128\"")
    params = []
    for item in re.split(r",\s*(?=[A-Za-z_][\w.-]*\s*=)", text):
        name, eq, rest = item.partition("=")
        name = name.strip()
        if not eq or not name:
            raise SpecError("--tune", f"{item.strip()!r} is not NAME=TYPE:SPEC")
        kind, _, body = rest.strip().partition(":")
        field_name = KINDS.get(kind.strip().lower())
        if field_name is None:
            raise SpecError("--tune", f"{name}: unknown type {kind.strip()!r} (valid: double, int, categorical, "
                                      "discrete)")
        params.append(_parse_one(name, field_name, body.strip()))
    return params


def _parse_one(name: str, field_name: str, body: str) -> Param:
    where = f"--tune {name}"
    if field_name in ("double_value_spec", "integer_value_spec"):
        parts = [p.strip() for p in body.split(":")]
        if len(parts) not in (2, 3):
            raise SpecError(where, f"{body!r} is not MIN:MAX or MIN:MAX:SCALE")
        number = float if field_name == "double_value_spec" else int
        try:
            low, high = number(parts[0]), number(parts[1])
        except ValueError:
            kind = "numbers" if number is float else "integers"
            raise SpecError(where, f"{parts[0]!r} and {parts[1]!r} must be {kind}") from None
        param = Param(parameter_id=name, **{field_name: {"min_value": low, "max_value": high}})
        if len(parts) == 3:
            param.scale_type = _scale(where, parts[2])
        return param
    values_text, _, scale = body.rpartition(":") if field_name == "discrete_value_spec" and ":" in body else (
        body, "", "")
    values = [v.strip() for v in values_text.split(",") if v.strip()]
    if not values:
        raise SpecError(where, "needs values, e.g. categorical:adam,sgd or discrete:16,32,64")
    if field_name == "categorical_value_spec":
        return Param(parameter_id=name, categorical_value_spec={"values": values})
    try:
        numbers = [float(v) for v in values]
    except ValueError:
        raise SpecError(where, f"discrete values must be numbers: {values_text!r}") from None
    param = Param(parameter_id=name, discrete_value_spec={"values": numbers})
    if scale:
        param.scale_type = _scale(where, scale)
    return param


def _scale(where: str, text: str) -> Scale:
    try:
        return SCALES[text.strip().lower()]
    except KeyError:
        raise SpecError(where, f"unknown scale {text!r} (valid: linear, log, reverse_log)") from None


def parse_metrics(text: str) -> list[v1.StudySpec.MetricSpec]:
    """`accuracy:maximize` (several: `accuracy:maximize,loss:minimize`) as MetricSpecs."""
    metrics = []
    for item in (p.strip() for p in (text or "").split(",")):
        if not item:
            continue
        name, _, goal = item.rpartition(":")
        if not name or goal.lower() not in ("maximize", "minimize", "max", "min"):
            raise SpecError("--metric", f"{item!r} is not METRIC:GOAL, e.g. accuracy:maximize or loss:minimize")
        metrics.append(v1.StudySpec.MetricSpec(metric_id=name, goal="MAXIMIZE" if goal.lower().startswith("max")
                                               else "MINIMIZE"))
    if not metrics:
        raise SpecError("--metric", "the metric to optimize is required, e.g. accuracy:maximize")
    return metrics


def parse_algorithm(text: str | None) -> Algorithm:
    if not text:
        return Algorithm.ALGORITHM_UNSPECIFIED
    try:
        return ALGORITHMS[text.lower()]
    except KeyError:
        raise SpecError("--algorithm", f"unknown algorithm {text!r} (valid: {', '.join(ALGORITHMS)})") from None


def study_spec(parameters: str | Sequence[Param], metric: str | Sequence[v1.StudySpec.MetricSpec],
               algorithm: str | Algorithm | None = None, measurement_selection: str | None = None) -> Study:
    """A StudySpec from the short forms (or ready-made parts)."""
    params = parse_parameters(parameters) if isinstance(parameters, str) else list(parameters)
    metrics = parse_metrics(metric) if isinstance(metric, str) else list(metric)
    algo = algorithm if isinstance(algorithm, Algorithm) else parse_algorithm(algorithm)
    study = Study(metrics=metrics, parameters=params, algorithm=algo)
    if measurement_selection:
        study.measurement_selection_type = {"best": Selection.BEST_MEASUREMENT,
                                            "last": Selection.LAST_MEASUREMENT}[measurement_selection]
    return study


def load_request(source: Any) -> v1.HyperparameterTuningJob | None:
    """A HyperparameterTuningJob REST body (a path, text or dict with `studySpec`/`trialJobSpec`), else None."""
    import yaml

    data = source
    if isinstance(source, (str, Path)):
        try:
            text = Path(source).read_text() if Path(source).is_file() else str(source)
        except OSError:  # text too long to be a file name
            text = str(source)
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
    if not isinstance(data, dict) or not ({"studySpec", "study_spec", "trialJobSpec", "trial_job_spec"} & set(data)):
        return None
    message = v1.HyperparameterTuningJob()
    try:
        json_format.ParseDict(data, message._pb)
    except json_format.ParseError as exc:
        raise SpecError("", f"not a HyperparameterTuningJob: {exc}") from None
    return message


# ---------------------------------------------------------------- validation

def problems(resource: v1.HyperparameterTuningJob) -> list[str]:
    """Every rule the tuning job breaks, one line each naming the field."""
    found = []
    name = resource.display_name
    if not name.strip():
        found.append("displayName: required")
    elif len(name) > MAX_NAME:
        found.append(f"displayName: {len(name)} characters is too long (at most {MAX_NAME})")
    if resource.max_trial_count <= 0:
        found.append("maxTrialCount: required, a positive number of trials")
    if resource.parallel_trial_count <= 0:
        found.append("parallelTrialCount: required, a positive number of trials to run at once")
    if resource.max_failed_trial_count < 0:
        found.append("maxFailedTrialCount: must not be negative (0: no limit)")
    found += study_problems(resource.study_spec)
    if "trial_job_spec" not in resource or not resource.trial_job_spec.worker_pool_specs:
        found.append("trialJobSpec: required, the CustomJobSpec every trial runs")
    else:
        try:
            validate.check(trial_base_job(resource))
        except ValidationError as exc:
            found += [p if p.startswith(("displayName", "labels")) else f"trialJobSpec.{p}" for p in exc.problems]
        except SpecError as exc:
            found.append(f"trialJobSpec.{exc}")
    return found


def check(resource: v1.HyperparameterTuningJob) -> JobSpec:
    """The trial job (validated) of a valid tuning job; raises ValidationError with every problem."""
    found = problems(resource)
    if found:
        raise ValidationError(found)
    return trial_base_job(resource)


def trial_base_job(resource: v1.HyperparameterTuningJob) -> JobSpec:
    """The tuning job's trialJobSpec as a JobSpec (before a trial's arguments are added)."""
    return JobSpec.load(v1.CustomJob(display_name=resource.display_name or "trial", job_spec=resource.trial_job_spec,
                                     labels=dict(resource.labels)))


def study_problems(study: Study) -> list[str]:
    found = []
    if not study.metrics:
        found.append("studySpec.metrics: at least one metric is required, e.g. {metricId: accuracy, goal: MAXIMIZE}")
    seen: set[str] = set()
    for i, metric in enumerate(study.metrics):
        where = f"studySpec.metrics[{i}]"
        if not metric.metric_id:
            found.append(f"{where}.metricId: required")
        elif metric.metric_id in seen:
            found.append(f"{where}.metricId: {metric.metric_id!r} is listed twice")
        seen.add(metric.metric_id)
        if metric.goal not in (Goal.MAXIMIZE, Goal.MINIMIZE):
            found.append(f"{where}.goal: must be MAXIMIZE or MINIMIZE")
    if not study.parameters:
        found.append("studySpec.parameters: at least one parameter is required")
    ids: set[str] = set()
    for i, param in enumerate(study.parameters):
        found += _parameter_problems(param, f"studySpec.parameters[{i}]", ids)
    return found


def _parameter_problems(param: Param, where: str, ids: set[str]) -> list[str]:
    found = []
    pid = param.parameter_id
    if not pid:
        found.append(f"{where}.parameterId: required")
    elif re.search(r"\s|=", pid):
        found.append(f"{where}.parameterId: {pid!r} must not contain whitespace or '=' (it becomes --{pid}=VALUE)")
    elif pid in ids:
        found.append(f"{where}.parameterId: {pid!r} is listed twice")
    ids.add(pid)
    if param.conditional_parameter_specs:
        found.append(f"{where}.conditionalParameterSpecs: not supported by the local service")
    kind = param._pb.WhichOneof("parameter_value_spec")
    if kind is None:
        return found + [f"{where}: one of doubleValueSpec, integerValueSpec, categoricalValueSpec or "
                        "discreteValueSpec is required"]
    spec = getattr(param, kind)
    at = f"{where}.{_CAMEL[kind]}"
    log_scale = param.scale_type in _LOG_SCALES
    if kind in ("double_value_spec", "integer_value_spec"):
        if not spec.min_value < spec.max_value:
            found.append(f"{at}.minValue: must be below maxValue")
        elif log_scale and spec.min_value <= 0:
            found.append(f"{at}.minValue: must be positive on a log scale ({Scale(param.scale_type).name})")
    elif kind == "categorical_value_spec":
        if not spec.values:
            found.append(f"{at}.values: at least one value is required")
        elif len(set(spec.values)) != len(spec.values):
            found.append(f"{at}.values: each value may appear once")
    else:
        values = list(spec.values)
        if not values:
            found.append(f"{at}.values: at least one value is required")
        elif any(b <= a for a, b in zip(values, values[1:])):
            found.append(f"{at}.values: must be in increasing order, each value once")
        elif log_scale and values[0] <= 0:
            found.append(f"{at}.values: must be positive on a log scale")
    return found


def notices(resource_or_study: v1.HyperparameterTuningJob | Study) -> list[str]:
    """What runs differently on this machine than on Vertex AI, one line each."""
    study = resource_or_study.study_spec if isinstance(resource_or_study, v1.HyperparameterTuningJob) \
        else resource_or_study
    found = []
    if study.algorithm == Algorithm.ALGORITHM_UNSPECIFIED:
        found.append(BAYESIAN_NOTICE)
    if study.algorithm == Algorithm.GRID_SEARCH:
        doubles = [p.parameter_id for p in study.parameters if "double_value_spec" in p]
        if doubles:
            found.append(f"studySpec.algorithm: Vertex AI's grid search takes no double parameters "
                         f"({', '.join(doubles)}); locally they take evenly spaced points")
    if any(k in study for k in ("decay_curve_stopping_spec", "median_automated_stopping_spec",
                                "convex_automated_stopping_spec")):
        found.append("studySpec: automated early stopping is not applied on this machine")
    return found


def search_name(study: Study) -> str:
    """The search that runs locally: `grid` or `random`."""
    return "grid" if study.algorithm == Algorithm.GRID_SEARCH else "random"


# ---------------------------------------------------------------- sampling

def suggestions(study: Study, count: int, seed: str | int = 0) -> list[dict[str, Any]]:
    """Up to `count` parameter sets, in trial order (trial 1 first)."""
    if count <= 0:
        return []
    if study.algorithm == Algorithm.GRID_SEARCH:
        return list(_grid(study, count))
    rng = random.Random(str(seed))
    return [{p.parameter_id: _draw(p, rng) for p in study.parameters} for _ in range(count)]


def _draw(param: Param, rng: random.Random) -> Any:
    kind = param._pb.WhichOneof("parameter_value_spec")
    spec = getattr(param, kind)
    if kind == "categorical_value_spec":
        return rng.choice(list(spec.values))
    if kind == "discrete_value_spec":
        return _number(rng.choice(list(spec.values)))
    low, high = spec.min_value, spec.max_value
    u = rng.random()
    value = _scaled(low, high, u, param.scale_type)
    if kind == "integer_value_spec":
        return min(high, max(low, int(round(value))))
    return min(high, max(low, float(f"{value:.6g}")))


def _scaled(low: float, high: float, u: float, scale: Scale) -> float:
    """The point at fraction `u` of [low, high] on the parameter's scale."""
    if scale == Scale.UNIT_LOG_SCALE:
        return math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
    if scale == Scale.UNIT_REVERSE_LOG_SCALE:  # dense near high: the log scale mirrored
        return low + high - math.exp(math.log(low) + (1 - u) * (math.log(high) - math.log(low)))
    return low + u * (high - low)


def _grid(study: Study, count: int) -> Iterator[dict[str, Any]]:
    params = list(study.parameters)
    fixed = [len(_axis(p, 0)) for p in params if "double_value_spec" not in p]
    doubles = sum(1 for p in params if "double_value_spec" in p)
    points = max(2, math.ceil((count / math.prod(fixed)) ** (1 / doubles))) if doubles else 0
    axes = [_axis(p, points) for p in params]
    total = math.prod(len(a) for a in axes)
    picks = range(total) if total <= count else (i * total // count for i in range(count))
    for index in picks:
        values = {}
        for param, axis in zip(reversed(params), reversed(axes)):  # the first parameter is the slowest digit
            index, digit = divmod(index, len(axis))
            values[param.parameter_id] = axis[digit]
        yield {p.parameter_id: values[p.parameter_id] for p in params}


def _axis(param: Param, points: int) -> Sequence[Any]:
    kind = param._pb.WhichOneof("parameter_value_spec")
    spec = getattr(param, kind)
    if kind == "categorical_value_spec":
        return list(spec.values)
    if kind == "discrete_value_spec":
        return [_number(v) for v in spec.values]
    if kind == "integer_value_spec":
        return range(int(spec.min_value), int(spec.max_value) + 1)
    return [float(f"{_scaled(spec.min_value, spec.max_value, i / (points - 1), param.scale_type):.6g}")
            for i in range(points)]


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


# ---------------------------------------------------------------- trials

def format_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def trial_args(params: dict[str, Any]) -> list[str]:
    """The command-line arguments a trial's replicas get: `--name=value`."""
    return [f"--{name}={format_value(value)}" for name, value in params.items()]


def trial_job(base: JobSpec, params: dict[str, Any], trial_id: str | int) -> JobSpec:
    """The trial's job: every pool (not a Reduction Server) gets the parameters as arguments."""
    spec = v1.CustomJobSpec(base.spec)
    args = trial_args(params)
    for pos, pool in enumerate(spec.worker_pool_specs):
        if is_empty_pool(pool) or (pos == 2 and catalog.is_reduction_server_image(pool_image(pool))):
            continue
        target = pool.container_spec.args if "container_spec" in pool else pool.python_package_spec.args
        target.extend(args)
    suffix = f"-trial-{trial_id}"
    name = base.display_name[:MAX_NAME - len(suffix)] + suffix
    return JobSpec(name, spec, dict(base.labels), base.legacy, base.source_dir)


def trial_parameters(params: dict[str, Any]) -> list[v1.Trial.Parameter]:
    return [v1.Trial.Parameter(parameter_id=name, value=value) for name, value in params.items()]


def parameters_of(trial: v1.Trial) -> dict[str, Any]:
    return {p.parameter_id: _plain(p.value) for p in trial.parameters}


def _plain(value: Any) -> Any:
    return _number(value) if isinstance(value, float) else value


# ---------------------------------------------------------------- metrics

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

