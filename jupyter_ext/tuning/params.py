"""The study's short forms and the names every tuning module shares.

`--tune "lr=double:1e-4:1e-1:log, units=int:16:128, opt=categorical:adam,sgd"`
and `--metric accuracy:maximize` become a `v1.StudySpec` (`study_spec`); a
HyperparameterTuningJob REST body becomes the message (`load_request`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from google.cloud.aiplatform_v1 import types as v1
from google.protobuf import json_format

from ..errors import SpecError

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


def plain_number(value: float) -> int | float:
    """A parameter's value (the API keeps every number a double) as an int when it is whole."""
    return int(value) if float(value).is_integer() else float(value)
