"""The local search: which trials a study runs, made one at a time.

RANDOM_SEARCH draws from a generator seeded with the tuning job's ID, so a
job's trials are reproducible. GRID_SEARCH walks the cartesian product of
categorical, discrete and integer values; doubles take evenly spaced points
(log-spaced on a log scale), as many as make the grid at least `count`
points. When the grid is larger than `count`, the trials are points spread
evenly over the whole grid (in product order), not its first corner; when
smaller, the study ends with the grid. ALGORITHM_UNSPECIFIED (Vertex AI's
default Bayesian optimization) runs as random search, with a notice. Vertex
AI's grid search takes no doubles; locally they are allowed, with a notice.

`suggestions` is lazy: each trial's parameters are computed when asked for
(the k-th grid point arithmetically), so `maxTrialCount` may be huge.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Iterator, NamedTuple

from google.cloud.aiplatform_v1 import types as v1

from .params import Algorithm, Param, Scale, Study, plain_number

BAYESIAN_NOTICE = ("studySpec.algorithm: Vertex AI's default (Bayesian optimization) runs as random search "
                   "on this machine")


def notices(resource_or_study: v1.HyperparameterTuningJob | Study, local: bool = True) -> list[str]:
    """What runs differently on this machine than on Vertex AI, one line each (with `local` False, for a
    study going to Vertex AI: only what Vertex AI itself does differently than asked)."""
    study = resource_or_study.study_spec if isinstance(resource_or_study, v1.HyperparameterTuningJob) \
        else resource_or_study
    found = []
    if local and study.algorithm == Algorithm.ALGORITHM_UNSPECIFIED:
        found.append(BAYESIAN_NOTICE)
    if study.algorithm == Algorithm.GRID_SEARCH:
        doubles = [p.parameter_id for p in study.parameters if "double_value_spec" in p]
        if doubles:
            found.append(f"studySpec.algorithm: Vertex AI's grid search takes no double parameters "
                         f"({', '.join(doubles)}); locally they take evenly spaced points")
    if local and any(k in study for k in ("decay_curve_stopping_spec", "median_automated_stopping_spec",
                                          "convex_automated_stopping_spec")):
        found.append("studySpec: automated early stopping is not applied on this machine")
    return found


def search_name(study: Study) -> str:
    """The search that runs locally: `grid` or `random`."""
    return "grid" if study.algorithm == Algorithm.GRID_SEARCH else "random"


def suggestions(study: Study, count: int, seed: str | int = 0) -> Iterator[dict[str, Any]]:
    """Up to `count` parameter sets, in trial order (trial 1 first), each made when it is asked for."""
    if count <= 0:
        return iter(())
    if study.algorithm == Algorithm.GRID_SEARCH:
        return _grid(study, count)
    return _random(study, count, random.Random(str(seed)))


def _random(study: Study, count: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    params = list(study.parameters)
    for _ in range(count):
        yield {p.parameter_id: _draw(p, rng) for p in params}


def _draw(param: Param, rng: random.Random) -> Any:
    kind = param._pb.WhichOneof("parameter_value_spec")
    spec = getattr(param, kind)
    if kind == "categorical_value_spec":
        return rng.choice(list(spec.values))
    if kind == "discrete_value_spec":
        return plain_number(rng.choice(list(spec.values)))
    low, high = spec.min_value, spec.max_value
    value = _scaled(low, high, rng.random(), param.scale_type)
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


class _Axis(NamedTuple):
    """One parameter's grid values, by position: never listed, so an axis may be huge."""

    size: int
    value_at: Callable[[int], Any]


def _grid(study: Study, count: int) -> Iterator[dict[str, Any]]:
    params = list(study.parameters)
    fixed = [_axis(p, 0).size for p in params if "double_value_spec" not in p]
    doubles = sum(1 for p in params if "double_value_spec" in p)
    points = max(2, math.ceil((count / math.prod(fixed)) ** (1 / doubles))) if doubles else 0
    axes = [_axis(p, points) for p in params]
    total = math.prod(axis.size for axis in axes)
    picks = range(total) if total <= count else (i * total // count for i in range(count))
    for index in picks:
        values = {}
        for param, axis in zip(reversed(params), reversed(axes)):  # the first parameter is the slowest digit
            index, digit = divmod(index, axis.size)
            values[param.parameter_id] = axis.value_at(digit)
        yield {p.parameter_id: values[p.parameter_id] for p in params}


def _axis(param: Param, points: int) -> _Axis:
    kind = param._pb.WhichOneof("parameter_value_spec")
    spec = getattr(param, kind)
    if kind == "categorical_value_spec":
        values = list(spec.values)
        return _Axis(len(values), values.__getitem__)
    if kind == "discrete_value_spec":
        numbers = [plain_number(v) for v in spec.values]
        return _Axis(len(numbers), numbers.__getitem__)
    if kind == "integer_value_spec":
        low = int(spec.min_value)
        return _Axis(int(spec.max_value) - low + 1, lambda i: low + i)
    low, high, scale = spec.min_value, spec.max_value, param.scale_type
    return _Axis(points, lambda i: float(f"{_scaled(low, high, i / (points - 1), scale):.6g}"))
