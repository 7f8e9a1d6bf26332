"""The study's short forms and the names every tuning module shares.

`--tune "lr=double:1e-4:1e-1:log, units=int:16:128, opt=categorical:adam,sgd"`
and `--metric accuracy:maximize` become a `v1.StudySpec` (`study_spec`); a
HyperparameterTuningJob REST body becomes the message (`load_request`).

A legacy AI Platform `trainingInput.hyperparameters` (HyperparameterSpec)
becomes the study and trial counts of a HyperparameterTuningJob
(`from_legacy_hyperparameters`) and back (`to_legacy_hyperparameters`):
`goal` + `hyperparameterMetricTag` (default `training/hptuning/metric`, the tag
cloudml-hypertune reports by default) -> the one MetricSpec; `params[]` ->
ParameterSpecs (`parameterName` -> `parameterId`, `minValue`/`maxValue`,
`categoricalValues`, `discreteValues`, `scaleType` NONE -> unset); `algorithm`
(same names); `maxTrials`, `maxParallelTrials`, `maxFailedTrials` (0: the
service decides, on both) -> `maxTrialCount`, `parallelTrialCount`,
`maxFailedTrialCount`. Two fields have no Vertex AI equivalent and are refused,
one line naming the field, so nobody believes they took effect:
`resumePreviousJobId` (Vertex cannot continue an AI Platform study) and
`enableTrialEarlyStopping: true` (Vertex stops trials early only with a stopping
spec the user chooses; `false`, the default, is accepted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from google.cloud.aiplatform_v1 import types as v1

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
    """A HyperparameterTuningJob REST body (a path, text or dict with `studySpec`/`trialJobSpec`), else None.
    A file that cannot be read is one SpecError (spec.read_job_file)."""
    from ..spec import parse_job_text, parse_message, read_job_file

    data = source
    if isinstance(source, (str, Path)):
        try:
            is_file = Path(source).is_file()
        except (OSError, ValueError):  # text too long to be a file name, or holding a NUL
            is_file = False
        text = read_job_file(Path(source)) if is_file else str(source)
        try:
            data = parse_job_text(text, "job")
        except SpecError:
            return None
    if not isinstance(data, dict) or not ({"studySpec", "study_spec", "trialJobSpec", "trial_job_spec"} & set(data)):
        return None
    return parse_message(data, v1.HyperparameterTuningJob)  # one line naming the field's path


def plain_number(value: float) -> int | float:
    """A parameter's value (the API keeps every number a double) as an int when it is whole."""
    return int(value) if float(value).is_integer() else float(value)


# AI Platform HyperparameterSpec / ParameterSpec field names
_LEGACY_SPEC = {"goal", "params", "maxTrials", "maxParallelTrials", "maxFailedTrials", "hyperparameterMetricTag",
                "algorithm", "enableTrialEarlyStopping", "resumePreviousJobId"}
# legacy parameter type -> (the ParameterSpec field it fills, the legacy keys that hold its values)
_LEGACY_KINDS = {"DOUBLE": ("double_value_spec", ("minValue", "maxValue")),
                 "INTEGER": ("integer_value_spec", ("minValue", "maxValue")),
                 "CATEGORICAL": ("categorical_value_spec", ("categoricalValues",)),
                 "DISCRETE": ("discrete_value_spec", ("discreteValues",))}
_LEGACY_VALUE_KEYS = {"minValue", "maxValue", "categoricalValues", "discreteValues"}
_LEGACY_PARAM = {"parameterName", "type", "scaleType", *_LEGACY_VALUE_KEYS}
_LEGACY_REFUSED = {
    "resumePreviousJobId": "Vertex AI cannot continue an AI Platform study; remove it to start a new one",
    "enableTrialEarlyStopping": "no Vertex AI equivalent (Vertex stops trials early only with a studySpec stopping "
                                "spec you choose, e.g. medianAutomatedStoppingSpec); remove it",
}


def from_legacy_hyperparameters(spec: Any, where: str = "hyperparameters") -> v1.HyperparameterTuningJob:
    """AI Platform's HyperparameterSpec as a HyperparameterTuningJob holding only the study and
    the trial counts (the caller adds the trial job). A field Vertex cannot do is a SpecError."""
    from .metrics import DEFAULT_METRIC_TAG  # imported here: metrics imports this module

    spec = _legacy_mapping(spec, _LEGACY_SPEC, where)
    for key, why in _LEGACY_REFUSED.items():
        if spec.get(key):
            raise SpecError(f"{where}.{key}", why)
    goal = _legacy_enum(spec, "goal", ("MAXIMIZE", "MINIMIZE"), where, default="MAXIMIZE",
                        unset="GOAL_TYPE_UNSPECIFIED", first_number=1)
    algorithm = _legacy_enum(spec, "algorithm", tuple(Algorithm.__members__), where, default="ALGORITHM_UNSPECIFIED")
    params = spec.get("params") or []
    if not isinstance(params, list) or not params:
        raise SpecError(f"{where}.params", "required: a list of at least one parameter")
    study = Study(metrics=[v1.StudySpec.MetricSpec(metric_id=str(spec.get("hyperparameterMetricTag")
                                                                 or DEFAULT_METRIC_TAG), goal=goal)],
                  parameters=[_from_legacy_param(p, f"{where}.params[{i}]") for i, p in enumerate(params)],
                  algorithm=algorithm)
    return v1.HyperparameterTuningJob(study_spec=study, max_trial_count=_legacy_whole(spec, "maxTrials", 1, where),
                                      parallel_trial_count=_legacy_whole(spec, "maxParallelTrials", 1, where),
                                      max_failed_trial_count=_legacy_whole(spec, "maxFailedTrials", 0, where))


def to_legacy_hyperparameters(resource: v1.HyperparameterTuningJob) -> dict[str, Any]:
    """The AI Platform HyperparameterSpec of a tuning job's study and trial counts; a study
    feature AI Platform did not have is a SpecError naming it."""
    study = resource.study_spec
    extra = [f.json_name for f, _ in study._pb.ListFields() if f.name not in ("metrics", "parameters", "algorithm")]
    if extra or len(study.metrics) != 1 or "safety_config" in study.metrics[0]:
        what = f"studySpec.{extra[0]}" if extra else "studySpec.metrics"
        raise SpecError(what, "AI Platform's hyperparameters cannot hold it (one metric, no stopping or noise "
                              "settings)")
    metric = study.metrics[0]
    out: dict[str, Any] = {"goal": metric.goal.name, "hyperparameterMetricTag": metric.metric_id,
                           "params": [_to_legacy_param(p, f"studySpec.parameters[{i}]")
                                      for i, p in enumerate(study.parameters)],
                           "maxTrials": resource.max_trial_count, "maxParallelTrials": resource.parallel_trial_count,
                           "maxFailedTrials": resource.max_failed_trial_count}
    if study.algorithm:
        out["algorithm"] = study.algorithm.name
    return out


def _from_legacy_param(param: Any, where: str) -> Param:
    param = _legacy_mapping(param, _LEGACY_PARAM, where)
    if not param.get("parameterName"):
        raise SpecError(f"{where}.parameterName", "required")
    kind = _legacy_enum(param, "type", tuple(_LEGACY_KINDS), where, first_number=1)
    field_name, keys = _LEGACY_KINDS[kind]
    if unused := sorted(_LEGACY_VALUE_KEYS & set(param) - set(keys)):
        raise SpecError(f"{where}.{unused[0]}", f"not used by a {kind} parameter")
    for key in keys:
        if param.get(key) is None or param.get(key) == []:
            raise SpecError(f"{where}.{key}", f"required for a {kind} parameter")
    if kind in ("DOUBLE", "INTEGER"):
        number = _legacy_int if kind == "INTEGER" else _legacy_float
        values: dict[str, Any] = {"min_value": number(param["minValue"], f"{where}.minValue"),
                                  "max_value": number(param["maxValue"], f"{where}.maxValue")}
    elif kind == "CATEGORICAL":
        values = {"values": [str(v) for v in _legacy_list(param, "categoricalValues", where)]}
    else:
        values = {"values": [_legacy_float(v, f"{where}.discreteValues") for v in
                             _legacy_list(param, "discreteValues", where)]}
    result = Param(parameter_id=str(param["parameterName"]), **{field_name: values})
    scale = _legacy_enum(param, "scaleType", ("NONE", *list(Scale.__members__)[1:]), where, default="NONE",
                         first_number=0)
    if scale != "NONE":
        result.scale_type = Scale[scale]
    return result


def _to_legacy_param(param: Param, where: str) -> dict[str, Any]:
    if param.conditional_parameter_specs:
        raise SpecError(f"{where}.conditionalParameterSpecs", "AI Platform's hyperparameters cannot hold it")
    out: dict[str, Any] = {"parameterName": param.parameter_id}
    if "double_value_spec" in param:
        out.update(type="DOUBLE", minValue=plain_number(param.double_value_spec.min_value),
                   maxValue=plain_number(param.double_value_spec.max_value))
    elif "integer_value_spec" in param:
        out.update(type="INTEGER", minValue=int(param.integer_value_spec.min_value),
                   maxValue=int(param.integer_value_spec.max_value))
    elif "categorical_value_spec" in param:
        out.update(type="CATEGORICAL", categoricalValues=list(param.categorical_value_spec.values))
    else:
        out.update(type="DISCRETE", discreteValues=[plain_number(v) for v in param.discrete_value_spec.values])
    if param.scale_type:
        out["scaleType"] = param.scale_type.name
    return out


def _legacy_mapping(data: Any, fields: set[str], where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SpecError(where, "must be a mapping")
    for key in data:
        if key not in fields:
            raise SpecError(where, f"unknown field {key!r}")
    return data


def _legacy_enum(data: dict[str, Any], key: str, valid: Sequence[str], where: str, default: str = "",
                 unset: str = "", first_number: int | None = None) -> str:
    """An AI Platform enum by name, or, with `first_number`, by its number: `valid` in the order of their
    numbers from `first_number` (googleapis' google/cloud/ml/v1/job_service.proto)."""
    raw = data.get(key)
    if first_number is not None and isinstance(raw, int) and not isinstance(raw, bool) \
            and 0 <= raw - first_number < len(valid):
        raw = valid[raw - first_number]
    value = str(raw or default).upper()
    if value == unset and default:
        value = default
    if value not in valid:
        shown = f"invalid value {data.get(key)!r}" if data.get(key) else "required"
        raise SpecError(f"{where}.{key}", f"{shown} (valid: {', '.join(valid)})")
    return value


def _legacy_list(data: dict[str, Any], key: str, where: str) -> list[Any]:
    if not isinstance(data[key], list):
        raise SpecError(f"{where}.{key}", "must be a list")
    return data[key]


def _legacy_float(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SpecError(where, f"not a number: {value!r}") from None


def _legacy_int(value: Any, where: str) -> int:
    number = _legacy_float(value, where)
    if not number.is_integer():
        raise SpecError(where, f"not a whole number: {value!r}")
    return int(number)


def _legacy_whole(data: dict[str, Any], key: str, default: int, where: str) -> int:
    value = _legacy_int(data.get(key, default), f"{where}.{key}")
    if value < 0:
        raise SpecError(f"{where}.{key}", "must not be negative")
    return value
