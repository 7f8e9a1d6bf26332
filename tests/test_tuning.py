"""Study logic without a service: parsing, validation (`validate.tuning_problems`), sampling, trial jobs,
metrics files, and the TuningMonitor's table and plot."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from google.cloud.aiplatform_v1 import types as v1

from conftest import pool, write_file
from jupyter_ext import tuning, validate
from jupyter_ext.errors import SpecError, ValidationError
from jupyter_ext.spec import JobSpec

ISSUE_PARAMS = "learning_rate=double:1e-4:1e-1:log, units=int:16:128, optimizer=categorical:adam,sgd"


def _resource(study: v1.StudySpec, pools: list[dict] | None = None, **fields: object) -> v1.HyperparameterTuningJob:
    spec = v1.CustomJobSpec.from_json(json.dumps({"workerPoolSpecs": pools or [pool(trainer="hpt_trainer.py")]}))
    return v1.HyperparameterTuningJob(display_name="hpt", study_spec=study, trial_job_spec=spec,
                                      **{"max_trial_count": 4, "parallel_trial_count": 2, **fields})


# ---------------------------------------------------------------- short forms

def test_the_issues_short_form_becomes_a_study_spec() -> None:
    study = tuning.study_spec(ISSUE_PARAMS, "accuracy:maximize")
    lr, units, opt = study.parameters
    assert (lr.parameter_id, lr.double_value_spec.min_value, lr.double_value_spec.max_value) == (
        "learning_rate", 1e-4, 1e-1)
    assert lr.scale_type == tuning.Scale.UNIT_LOG_SCALE
    assert (units.integer_value_spec.min_value, units.integer_value_spec.max_value) == (16, 128)
    assert list(opt.categorical_value_spec.values) == ["adam", "sgd"]
    assert study.metrics[0].metric_id == "accuracy" and study.metrics[0].goal == tuning.Goal.MAXIMIZE
    assert study.algorithm == tuning.Algorithm.ALGORITHM_UNSPECIFIED
    discrete = tuning.parse_parameters("batch=discrete:16,32,64:log")[0]
    assert list(discrete.discrete_value_spec.values) == [16, 32, 64]
    assert discrete.scale_type == tuning.Scale.UNIT_LOG_SCALE


@pytest.mark.parametrize("text, message", [
    ("lr=uniform:0:1", r"--tune: lr: unknown type 'uniform'"),
    ("lr=double:0", r"--tune lr: '0' is not MIN:MAX"),
    ("units=int:a:b", r"--tune units: 'a' and 'b' must be integers"),
    ("lr=double:1:2:cubic", r"--tune lr: unknown scale 'cubic'"),
    ("just-a-name", r"--tune: 'just-a-name' is not NAME=TYPE:SPEC"),
])
def test_short_form_mistakes_name_the_flag(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        tuning.parse_parameters(text)


def test_metric_needs_a_goal() -> None:
    assert tuning.parse_metrics("loss:min")[0].goal == tuning.Goal.MINIMIZE
    with pytest.raises(SpecError, match="--metric: 'accuracy' is not METRIC:GOAL"):
        tuning.parse_metrics("accuracy")


def test_a_rest_body_is_recognised(tmp_path: Path) -> None:
    body = {"displayName": "from-file", "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                                                     "parameters": [{"parameterId": "units", "integerValueSpec": {
                                                         "minValue": "1", "maxValue": "3"}}]},
            "maxTrialCount": 3, "parallelTrialCount": 1,
            "trialJobSpec": {"workerPoolSpecs": [pool(trainer="hpt_trainer.py")]}}
    path = write_file(tmp_path / "hpt.json", body)
    resource = tuning.load_request(path)
    assert resource is not None and resource.max_trial_count == 3
    assert resource.study_spec.parameters[0].integer_value_spec.max_value == 3
    assert tuning.load_request({"workerPoolSpecs": []}) is None


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("params, message", [
    ("lr=double:1e-4:1e-1, b=double:1:0", "studySpec.parameters[1].doubleValueSpec.minValue: must be below maxValue"),
    ("lr=double:0:1:log", "studySpec.parameters[0].doubleValueSpec.minValue: must be positive on a log scale"),
    ("u=int:0:10:log", "studySpec.parameters[0].integerValueSpec.minValue: must be positive on a log scale"),
    ("a=discrete:4,2", "studySpec.parameters[0].discreteValueSpec.values: must be in increasing order"),
    ("a=categorical:x,x", "studySpec.parameters[0].categoricalValueSpec.values: each value may appear once"),
    ("a=int:1:2, a=int:1:3", "studySpec.parameters[1].parameterId: 'a' is listed twice"),
])
def test_study_problems_are_one_line_naming_the_field(params: str, message: str) -> None:
    problems = validate.tuning_problems(_resource(tuning.study_spec(params, "accuracy:maximize")))
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_counts_metrics_and_the_trial_job_are_checked() -> None:
    study = v1.StudySpec(parameters=tuning.parse_parameters("a=int:1:2"))
    bad_pool = pool(2, trainer="hpt_trainer.py")
    problems = validate.tuning_problems(_resource(study, [bad_pool], max_trial_count=0, parallel_trial_count=0,
                                                  max_failed_trial_count=-1))
    assert "maxTrialCount: required, a positive number of trials" in problems
    assert "parallelTrialCount: required, a positive number of trials to run at once" in problems
    assert "maxFailedTrialCount: must not be negative (0: Vertex AI decides; locally, no limit)" in problems
    assert any(p.startswith("studySpec.metrics: at least one metric is required") for p in problems)
    assert any(p.startswith("trialJobSpec.workerPoolSpecs[0].replicaCount:") for p in problems)
    with pytest.raises(ValidationError):
        validate.check_tuning(_resource(study, [bad_pool]))
    valid = _resource(tuning.study_spec("a=int:1:2", "accuracy:maximize"))
    assert validate.check_tuning(valid).display_name == "hpt"  # the trial job


def test_a_long_name_is_reported_once() -> None:
    resource = _resource(tuning.study_spec("a=int:1:2", "accuracy:maximize"))
    resource.display_name = "x" * 129  # the trial job has the same name: one line, not two
    assert validate.tuning_problems(resource) == ["displayName: 129 characters is too long (at most 128)"]


def test_notices_say_what_runs_differently_here() -> None:
    assert tuning.notices(tuning.study_spec("a=int:1:2", "m:max")) == [tuning.BAYESIAN_NOTICE]
    assert tuning.notices(tuning.study_spec("a=int:1:2", "m:max", "random")) == []
    grid = tuning.notices(tuning.study_spec("lr=double:0.1:1", "m:max", "grid"))
    assert len(grid) == 1 and "grid search takes no double parameters (lr)" in grid[0]
    # going to Vertex AI, the search runs there as asked: only what Vertex AI itself does differently
    assert tuning.notices(tuning.study_spec("a=int:1:2", "m:max"), local=False) == []
    assert tuning.notices(tuning.study_spec("lr=double:0.1:1", "m:max", "grid"), local=False) == grid


# ---------------------------------------------------------------- sampling

def test_random_search_is_reproducible_from_the_job_id_and_in_range() -> None:
    study = tuning.study_spec(ISSUE_PARAMS, "accuracy:maximize", "random")
    first = list(tuning.suggestions(study, 200, seed="1234"))
    assert first == list(tuning.suggestions(study, 200, seed="1234"))
    assert first != list(tuning.suggestions(study, 200, seed="1235"))
    lrs = [s["learning_rate"] for s in first]
    assert all(1e-4 <= v <= 1e-1 for v in lrs)
    below_1e_2 = sum(v < 1e-2 for v in lrs) / len(lrs)  # log scale: two of three decades lie below 1e-2
    assert 0.5 < below_1e_2 < 0.8
    assert all(isinstance(s["units"], int) and 16 <= s["units"] <= 128 for s in first)
    assert {s["optimizer"] for s in first} == {"adam", "sgd"}


def test_grid_search_walks_the_cartesian_product() -> None:
    study = tuning.study_spec("units=int:1:3, opt=categorical:adam,sgd", "m:max", "grid")
    grid = list(tuning.suggestions(study, 100, seed="x"))
    assert grid == [{"units": u, "opt": o} for u in (1, 2, 3) for o in ("adam", "sgd")]  # ends with the grid
    spread = list(tuning.suggestions(study, 3, seed="x"))
    assert [s["units"] for s in spread] == [1, 2, 3]  # spread over the grid, not its first corner


def test_grid_doubles_take_evenly_spaced_points_log_spaced_on_a_log_scale() -> None:
    log = list(tuning.suggestions(tuning.study_spec("lr=double:1e-4:1e-1:log", "m:max", "grid"), 4))
    assert [s["lr"] for s in log] == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1])
    linear = list(tuning.suggestions(tuning.study_spec("x=double:0:1, c=categorical:a,b", "m:max", "grid"), 6))
    assert sorted({s["x"] for s in linear}) == pytest.approx([0, 0.5, 1])
    assert len(linear) == 6


@pytest.mark.parametrize("algorithm", ["random", "grid"])
def test_trials_are_made_on_demand_so_max_trial_count_may_be_huge(algorithm: str) -> None:
    study = tuning.study_spec("lr=double:1e-4:1e-1:log, units=int:16:128", "m:max", algorithm)
    started = time.monotonic()
    tracemalloc.start()
    try:
        first = list(itertools.islice(tuning.suggestions(study, 2_000_000_000, seed="x"), 5))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(first) == 5 and all(16 <= s["units"] <= 128 for s in first)
    assert peak < 1_000_000 and time.monotonic() - started < 5  # no list of 2e9 trials or grid points


def test_a_huge_grid_is_still_spread_evenly() -> None:
    study = tuning.study_spec("u=int:0:9999999999, c=categorical:a,b", "m:max", "grid")
    assert list(tuning.suggestions(study, 4)) == [{"u": u, "c": "a"} for u in (0, 2_500_000_000, 5_000_000_000,
                                                                             7_500_000_000)]


def test_parameters_reach_every_pool_as_arguments_but_not_a_reduction_server() -> None:
    reducer = pool(machine="n1-highcpu-16",
                   image="us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest")
    base = JobSpec.load({"workerPoolSpecs": [pool(1, trainer="hpt_trainer.py", args=["--epochs", "2"]),
                                             pool(2, trainer="hpt_trainer.py"), reducer]})
    job = tuning.trial_job(base, {"learning_rate": 0.001, "units": 64, "optimizer": "adam"}, 3)
    pools = job.spec.worker_pool_specs
    assert list(pools[0].container_spec.args) == ["--epochs", "2", "--learning_rate=0.001", "--units=64",
                                                  "--optimizer=adam"]
    assert list(pools[1].container_spec.args)[-1] == "--optimizer=adam"
    assert list(pools[2].container_spec.args) == []
    assert list(base.spec.worker_pool_specs[0].container_spec.args) == ["--epochs", "2"]  # the base is untouched


# ---------------------------------------------------------------- metrics

def _write_with_hypertune(tmp_path: Path, values: list[float]) -> Path:
    """Reports written by the real cloudml-hypertune library, in a process of its own."""
    path = tmp_path / "m" / "output.metrics"
    code = ("import hypertune, sys\nh = hypertune.HyperTune()\n"
            "for i, v in enumerate(map(float, sys.argv[1:]), 1):\n"
            "    h.report_hyperparameter_tuning_metric('accuracy', v, global_step=i)\n")
    env = {**os.environ, "CLOUD_ML_HP_METRIC_FILE": str(path), "CLOUD_ML_TRIAL_ID": "7"}
    subprocess.run([sys.executable, "-c", code, *map(str, values)], check=True, env=env)
    return path


@pytest.mark.skipif(importlib.util.find_spec("hypertune") is None, reason="cloudml-hypertune is not installed")
def test_the_cloudml_hypertune_file_is_read(tmp_path: Path) -> None:
    path = _write_with_hypertune(tmp_path, [0.5, 0.9, 0.7])
    reports = tuning.read_reports(path)
    assert [(r.step, r.values, r.trial) for r in reports] == [
        (1, {"accuracy": 0.5}, "7"), (2, {"accuracy": 0.9}, "7"), (3, {"accuracy": 0.7}, "7")]
    study = tuning.study_spec("a=int:1:2", "accuracy:maximize")
    assert tuning.final_measurement(reports, study).metrics[0].value == 0.7  # unspecified: the last report
    study.measurement_selection_type = tuning.Selection.BEST_MEASUREMENT
    best = tuning.final_measurement(reports, study)
    assert best.metrics[0].value == 0.9 and best.step_count == 2
    study.metrics[0].goal = tuning.Goal.MINIMIZE
    assert tuning.final_measurement(reports, study).metrics[0].value == 0.5


def test_a_file_without_the_metric_gives_no_final_measurement(tmp_path: Path) -> None:
    path = tmp_path / "output.metrics"
    path.write_text('{"checkpoint_path": "", "global_step": "0", "loss": "0.3", "timestamp": 1.0, "trial": "1"}\n'
                    "not json\n")
    reports = tuning.read_reports(path)
    assert [r.values for r in reports] == [{"loss": 0.3}]
    assert tuning.final_measurement(reports, tuning.study_spec("a=int:1:2", "accuracy:maximize")) is None
    assert tuning.read_reports(tmp_path / "missing") == []
    untagged = [tuning.Report(1.0, 5, {tuning.DEFAULT_METRIC_TAG: 0.4})]  # report_...("", 0.4): the default tag
    assert tuning.final_measurement(untagged, tuning.study_spec("a=int:1:2", "accuracy:maximize")).metrics[0].value \
        == 0.4


def _finished(goal: str = "maximize") -> v1.HyperparameterTuningJob:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    resource = _resource(tuning.study_spec("units=int:1:9, opt=categorical:adam,sgd", f"accuracy:{goal}"),
                         state="JOB_STATE_SUCCEEDED", start_time=start, create_time=start)
    for n, (units, value, state) in enumerate([(4, 0.8, "SUCCEEDED"), (7, 0.95, "SUCCEEDED"), (2, None, "INFEASIBLE"),
                                               (9, 0.6, "SUCCEEDED")], 1):
        trial = v1.Trial(id=str(n), state=state, parameters=tuning.trial_parameters({"units": units, "opt": "adam"}),
                         start_time=start + timedelta(seconds=n), end_time=start + timedelta(seconds=n + 2))
        if value is not None:
            trial.final_measurement = v1.Measurement(metrics=[{"metric_id": "accuracy", "value": value}])
            trial.measurements = [v1.Measurement(step_count=s, elapsed_duration={"seconds": s},
                                                 metrics=[{"metric_id": "accuracy", "value": value * s / 2}])
                                  for s in (1, 2)]
        else:
            trial.infeasible_reason = "replica workerpool0-0 (primary) exited with code 1"
        resource.trials.append(trial)
    return resource


def test_the_best_trial_follows_the_goal() -> None:
    assert tuning.best_trial(_finished()).id == "2"
    assert tuning.best_trial(_finished("minimize")).id == "4"
    assert tuning.summary(_finished()) == "best trial 2: accuracy=0.95 (units=7, opt=adam)"


# ---------------------------------------------------------------- the widget's logic

def test_trials_table_has_parameters_state_and_metric_with_the_best_highlighted() -> None:
    from widgets import tuning as view

    resource = _finished()
    frame = view.trials_frame(resource)
    assert list(frame.columns) == ["trial", "units", "opt", "state", "accuracy", "seconds"]
    assert frame["state"].tolist() == ["SUCCEEDED", "SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert frame["accuracy"].tolist()[:2] == [0.8, 0.95] and math.isnan(frame["accuracy"][2])
    table = view.table_html(resource)
    assert table.count('data-best="true"') == 1
    best_row = table.split('data-best="true"')[1].split("</tr>")[0]
    assert ">2<" in best_row and "0.95" in best_row
    assert 'title="replica workerpool0-0 (primary) exited with code 1"' in table


def test_plot_is_an_svg_with_every_trial_and_the_best_marked() -> None:
    from widgets import tuning as view

    svg = view.plot_svg(_finished())
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert all(f'data-trial="{n}"' in svg for n in (1, 2, 4)) and 'data-trial="3"' not in svg  # 3 failed
    assert ">best<" in svg and "trial 2: 0.95" in svg
    assert svg.count("<polyline") == 4  # best so far, and one curve per trial that reported
    empty = view.plot_svg(_resource(tuning.study_spec("a=int:1:2", "accuracy:maximize")))
    assert "no metric reported yet" in empty


def test_the_monitor_updates_from_a_resource_without_a_browser() -> None:
    from widgets.tuning import TuningMonitor

    monitor = TuningMonitor()
    monitor.update(_finished())
    assert monitor.state == "JOB_STATE_SUCCEEDED" and monitor.best_trial == "2"
    assert list(monitor._trials.options) == ["(choose a trial)", "trial 1", "trial 2", "trial 3", "trial 4"]
    assert "best trial 2" in monitor.to_html() and "<svg" in monitor.to_html()
    text = monitor._repr_mimebundle_()["text/plain"].splitlines()  # what a saved notebook keeps
    assert text[0] == "SUCCEEDED" and text[1].split() == ["trial", "units", "opt", "state", "accuracy"]
    assert text[3].split() == ["2", "7", "adam", "SUCCEEDED", "0.95"] and text[-1] == "best trial: 2"
