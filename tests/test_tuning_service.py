"""Hyperparameter tuning jobs on the local service, through the real google-cloud-aiplatform SDK (REST),
the Cloud Logging client, `vtrain tune` and `%%vertex_train --tune`."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as api_exceptions
from google.cloud import aiplatform
from google.cloud.aiplatform import hyperparameter_tuning as hpt

from conftest import (TRAINERS, job_id, kill_service, pool, processes_of_job, restart_service, vtrain, wait_for,
                      wait_state, write_spec)
from jupyter_ext import launch, tuning

sys.path.insert(0, str(TRAINERS))
from hpt_trainer import expected_accuracy  # noqa: E402

TRAINER = str(TRAINERS / "hpt_trainer.py")
hpt_pool = functools.partial(pool, trainer="hpt_trainer.py", form="sdk")  # every SDK pool here runs it


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, fast_sdk_polling: None) -> Path:  # one service for the whole module
    return module_home


def _sdk_job(name: str, pools: list[dict], parameter_spec: dict, **kwargs: Any) -> aiplatform.HyperparameterTuningJob:
    custom = aiplatform.CustomJob(display_name=name, worker_pool_specs=pools)
    return aiplatform.HyperparameterTuningJob(display_name=name, custom_job=custom,
                                              metric_spec={"accuracy": "maximize"}, parameter_spec=parameter_spec,
                                              **kwargs)


def _params(trial: Any) -> dict[str, Any]:
    return tuning.parameters_of(trial)


def test_sdk_tuning_job_runs_four_trials_two_at_a_time(service: dict) -> None:
    job = _sdk_job("sdk-hpt", [hpt_pool(1), hpt_pool(1)], {
        "learning_rate": hpt.DoubleParameterSpec(min=1e-4, max=1e-1, scale="log"),
        "units": hpt.IntegerParameterSpec(min=16, max=128, scale="linear"),
        "optimizer": hpt.CategoricalParameterSpec(values=["adam", "sgd"])},
        max_trial_count=4, parallel_trial_count=2)
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    trials = job.trials
    assert [t.id for t in trials] == ["1", "2", "3", "4"]
    scores = {}
    for trial in trials:
        params = _params(trial)
        assert trial.state.name == "SUCCEEDED"
        assert 1e-4 <= params["learning_rate"] <= 1e-1 and 16 <= params["units"] <= 128
        assert params["optimizer"] in ("adam", "sgd")
        expected = expected_accuracy(params["learning_rate"], params["units"], params["optimizer"])
        # the primary's report (workers report 0.0), best of steps 1..3 as the SDK asks (measurement_selection "best")
        assert trial.final_measurement.metrics[0].metric_id == "accuracy"
        assert trial.final_measurement.metrics[0].value == pytest.approx(expected)
        assert [m.step_count for m in trial.measurements] == [1, 2, 3]
        scores[trial.id] = expected
    best = max(scores, key=lambda k: scores[k])
    assert tuning.best_trial(job.gca_resource).id == best
    # never more than two trials at once
    spans = [(t.start_time, t.end_time) for t in trials]
    for start, _ in spans:
        assert sum(1 for s, e in spans if s <= start < e) <= 2
    again = aiplatform.HyperparameterTuningJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_SUCCEEDED" and len(again.trials) == 4
    assert again.gca_resource.labels["vtrain-search"] == "random"  # Bayesian default runs as random search
    assert job.resource_name in [j.resource_name for j in aiplatform.HyperparameterTuningJob.list()]
    # the same seed (the job's ID) gives the same trials
    study = again.gca_resource.study_spec
    assert [_params(t) for t in trials] == [{k: pytest.approx(v) for k, v in s.items()}
                                            for s in tuning.suggestions(study, 4, seed=job_id(job.resource_name))]

    # the notebook's view: table, best trial, a trial's logs through the job monitor
    from widgets.tuning import TuningMonitor

    monitor = TuningMonitor(launch.attach_tuning(job_id(job.resource_name)))
    assert monitor.wait(30) == "JOB_STATE_SUCCEEDED" and monitor.best_trial == best
    assert monitor.to_html().count('data-best="true"') == 1
    trial_view = monitor.show_trial(best)
    assert trial_view.wait(30) == "JOB_STATE_SUCCEEDED"
    assert {line.task_name for line in trial_view.buffer.lines()} == {"workerpool0-0", "workerpool1-0"}
    assert all(json.loads(line.text)["trial"] == best for line in trial_view.buffer.lines())
    job.delete()
    with pytest.raises(api_exceptions.NotFound):
        aiplatform.HyperparameterTuningJob.get(job.resource_name)


def test_every_replica_of_trial_3_sees_its_trial_and_writes_under_base_3(service: dict, tmp_path: Path) -> None:
    base = tmp_path / "out"
    spec = {"workerPoolSpecs": [pool(1, trainer="hpt_trainer.py", image="x"),
                                pool(2, trainer="hpt_trainer.py", image="x")],
            "baseOutputDirectory": {"outputUriPrefix": str(base)}}
    study = tuning.study_spec("units=int:16:18", "accuracy:maximize", "grid")
    handle = launch.submit_tuning(launch.tuning_request(spec, study, max_trials=3, parallel=3,
                                                       display_name="trial-env"))
    assert handle.wait(60) == "JOB_STATE_SUCCEEDED", handle.error
    seen = {}
    for record in handle.trial(3).logs():  # the Logging API, filtered by the trial label
        seen[record.task_name] = json.loads(record.text)
    assert set(seen) == {"workerpool0-0", "workerpool1-0", "workerpool1-1"}
    for task, out in seen.items():
        assert out["trial"] == "3"  # CLOUD_ML_TRIAL_ID
        assert out["tf_config"]["task"]["trial"] == "3"
        assert out["cluster_spec"]["task"]["trial"] == "3"
        assert out["argv"][-1] == "--units=18"
        assert out["model_dir"] == f"{base}/3/model/"
        assert out["metric_file"].endswith(f"/trials/3/metrics/{task}.metrics")
        assert (base / "3" / "model" / f"{task}.txt").read_text() == f"trial 3 {task}\n"
    assert {out["tf_config"]["task"]["type"] for out in seen.values()} == {"chief", "worker"}
    assert sorted(p.name for p in base.iterdir()) == ["1", "2", "3"]
    # all trials' logs together: task names carry the trial
    names = {r.task_name for r in handle.logs()}
    assert {"1/workerpool0-0", "3/workerpool1-1"} <= names


def test_failed_trials_past_max_failed_trial_count_fail_the_job(service: dict) -> None:
    job = _sdk_job("failing", [hpt_pool(1, args=["--fail-on", "2,3,4"])],
                   {"units": hpt.IntegerParameterSpec(min=1, max=6, scale="linear")},
                   max_trial_count=6, parallel_trial_count=1, max_failed_trial_count=2, search_algorithm="grid")
    with pytest.raises(RuntimeError, match="2 trials failed, as many as maxFailedTrialCount 2 allows"):
        job.run()
    resource = job.gca_resource
    assert resource.state.name == "JOB_STATE_FAILED"
    message = resource.error.message
    assert message.startswith("2 trials failed, as many as maxFailedTrialCount 2 allows; last failure: trial 3: "
                              "replica workerpool0-0 (primary) exited with code 1")
    assert "trial 3 breaks on purpose" in message
    assert [(t.id, t.state.name) for t in resource.trials] == [
        ("1", "SUCCEEDED"), ("2", "INFEASIBLE"), ("3", "INFEASIBLE")]  # the 2nd failure ends it: 4 to 6 never ran
    assert "exited with code 1" in resource.trials[1].infeasible_reason


def test_with_no_limit_the_job_fails_only_when_no_trial_succeeded(service: dict) -> None:
    study = tuning.study_spec("units=int:1:2", "accuracy:maximize", "grid")
    ok = launch.submit_tuning(launch.tuning_request([hpt_pool(1, args=["--fail-on", "1"])], study, max_trials=2,
                                                   parallel=2, display_name="some-fail"))
    assert ok.wait(60) == "JOB_STATE_SUCCEEDED"
    assert [t.state.name for t in ok.trials] == ["INFEASIBLE", "SUCCEEDED"]
    bad = launch.submit_tuning(launch.tuning_request([hpt_pool(1, args=["--fail-on", "1", "--no-metric"])], study,
                                                    max_trials=2, parallel=2, display_name="all-fail"))
    assert bad.wait(60) == "JOB_STATE_FAILED"
    assert bad.error.startswith("all 2 trials failed; last failure: trial ")
    reasons = {t.id: t.infeasible_reason for t in bad.trials}
    assert "reported no value for metric 'accuracy'" in reasons["2"] and "cloudml-hypertune" in reasons["2"]


def test_a_bad_study_or_trial_job_is_a_400_naming_the_field(service: dict) -> None:
    job = _sdk_job("bad", [hpt_pool(1)], {"lr": hpt.DoubleParameterSpec(min=1e-4, max=1e-1, scale="log"),
                                          "x": hpt.DoubleParameterSpec(min=1, max=0, scale="linear")},
                   max_trial_count=2, parallel_trial_count=1)
    with pytest.raises(api_exceptions.BadRequest,
                       match=r"studySpec\.parameters\[1\]\.doubleValueSpec\.minValue: must be below maxValue"):
        job.run()
    job = _sdk_job("bad", [hpt_pool(2)], {"x": hpt.IntegerParameterSpec(min=1, max=2, scale="linear")},
                   max_trial_count=2, parallel_trial_count=1)
    with pytest.raises(api_exceptions.BadRequest, match=r"trialJobSpec\.workerPoolSpecs\[0\]\.replicaCount"):
        job.run()


def test_cancel_stops_every_running_trial(service: dict) -> None:
    study = tuning.study_spec("units=int:1:4", "accuracy:maximize", "grid")
    pools = [hpt_pool(1, args=["--sleep", "60"]), hpt_pool(1, args=["--sleep", "60"])]
    handle = launch.submit_tuning(launch.tuning_request(pools, study, max_trials=4, parallel=2,
                                                       display_name="to-cancel"))
    wait_state(handle, "JOB_STATE_RUNNING")
    wait_for(lambda: len(processes_of_job(handle.id)) >= 4, 30, "two trials of two replicas to start")
    handle.cancel()
    wait_state(handle, "JOB_STATE_CANCELLED")
    resource = handle.refresh()
    assert resource.error.code == 1  # google.rpc.Code.CANCELLED, as Vertex reports it
    assert [t.state.name for t in resource.trials] == ["INFEASIBLE", "INFEASIBLE"]
    assert all(t.infeasible_reason.startswith("cancelled") for t in resource.trials)
    assert processes_of_job(handle.id) == []


@pytest.mark.skipif(importlib.util.find_spec("hypertune") is None, reason="cloudml-hypertune is not installed")
def test_vtrain_tune_with_an_unmodified_hypertune_trainer(service: dict, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "job.yaml", [pool(image="x", command=[sys.executable, TRAINER, "--use-hypertune"])])
    done = vtrain("tune", str(spec), "--params", "optimizer=categorical:adam,sgd, units=discrete:16,64",
                  "--metric", "accuracy:maximize", "--trials", "4", "--parallel", "2", "--algorithm", "grid",
                  timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    expected = expected_accuracy(0.01, 64, "adam")  # the trainer's default learning rate
    assert f"best trial 2: accuracy={expected:.6g} (optimizer=adam, units=64)" in out
    assert "TRIAL  STATE" in out and out.rstrip().endswith("SUCCEEDED")
    bayes = vtrain("tune", str(spec), "--params", "units=int:1:2", "--metric", "accuracy:maximize", "--trials", "1",
                   "--no-wait")
    assert bayes.returncode == 0 and tuning.BAYESIAN_NOTICE in bayes.stdout
    wrong = vtrain("tune", str(spec), "--params", "units=int:5:1", "--metric", "accuracy:maximize")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == ("vtrain: error: studySpec.parameters[0].integerValueSpec.minValue: "
                                    "must be below maxValue")


def test_vtrain_tune_puts_env_and_scheduling_flags_into_every_trial(service: dict, tmp_path: Path) -> None:
    """A HyperparameterTuningJob REST body as SPEC: the flags reach its trialJobSpec, the trial sees --env."""
    trainer = CELL + 'print("FOO is", os.environ.get("FOO"))\n'
    body = {"displayName": "flags", "maxTrialCount": 1, "parallelTrialCount": 1,
            "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "units", "discreteValueSpec": {"values": [32]}}]},
            "trialJobSpec": {"workerPoolSpecs": [pool(image="x", command=[sys.executable, "-c", trainer])]}}
    spec = tmp_path / "tuning.json"
    spec.write_text(json.dumps(body))
    done = vtrain("tune", str(spec), "--strategy", "spot", "--timeout", "10m", "--env", "FOO=bar",
                  "--enable-web-access", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("note: scheduling.strategy: SPOT runs as STANDARD on this machine (it is never preempted); on Vertex AI "
            "it is SPOT") in done.stdout.splitlines()
    handle = launch.attach_tuning(done.stdout.split("submitted ", 1)[1].split()[0])
    trial_job = handle.resource.trial_job_spec
    assert (trial_job.scheduling.strategy.name, trial_job.scheduling.timeout.total_seconds()) == ("SPOT", 600)
    assert trial_job.enable_web_access
    assert [(e.name, e.value) for e in trial_job.worker_pool_specs[0].container_spec.env] == [("FOO", "bar")]
    logs = list((Path(os.environ["VTRAIN_HOME"]) / "jobs" / handle.id / "trials").glob("*/logs/workerpool0-0.log"))
    assert len(logs) == 1 and "FOO is bar" in logs[0].read_text()
    bad = vtrain("tune", str(spec), "--max-wait", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("vtrain: error: --max-wait (scheduling.maxWaitDuration)")


def test_vtrain_logs_and_cancel_take_the_id_vtrain_tune_printed(service: dict, tmp_path: Path) -> None:
    code = "import time; print('trial running', flush=True); time.sleep(120)"
    spec = write_spec(tmp_path / "job.yaml", [pool(image="x", command=[sys.executable, "-c", code])])
    done = vtrain("tune", str(spec), "--params", "units=int:1:2", "--metric", "accuracy:maximize", "--trials", "1",
                  "--no-wait")
    assert done.returncode == 0, done.stdout + done.stderr
    name = done.stdout.split("submitted ", 1)[1].split()[0]
    tuning_id = job_id(name)
    shown = wait_for(lambda: (logs := vtrain("logs", tuning_id, "--replica", "workerpool0-0")).stdout and logs, 60,
                     "the trial's first line")
    assert shown.returncode == 0 and "[1/workerpool0-0] trial running" in shown.stdout, shown.stdout + shown.stderr
    listed = vtrain("jobs", "--tuning", "--state", "RUNNING").stdout.splitlines()  # where a lost ID is found
    assert listed[0].split() == ["ID", "STATE", "TRIALS", "CREATED", "NAME"]
    assert [row.split()[:3] for row in listed[1:] if row.startswith(tuning_id)] == [[tuning_id, "RUNNING", "1/1"]]
    assert tuning_id not in vtrain("jobs").stdout  # CustomJobs only
    cancelled = vtrain("cancel", tuning_id)
    assert (cancelled.returncode, cancelled.stdout) == (0, f"cancelling {name}\n"), cancelled.stderr
    assert launch.attach_tuning(tuning_id).wait(60) == "JOB_STATE_CANCELLED"
    assert processes_of_job(tuning_id) == []
    assert vtrain("logs", "999").stderr == "vtrain: error: 404 CustomJob 999 does not exist\n"  # neither


def test_the_magic_and_vtrain_tune_ask_for_the_same_trials_unless_told(service: dict, tmp_path: Path) -> None:
    from jupyter_ext.magics import VertexTrainMagics, parse_flags

    spec = write_spec(tmp_path / "job.yaml", [pool(image="x", command=[sys.executable, "-c", "pass"])])
    done = vtrain("tune", str(spec), "--params", "units=int:1:2", "--metric", "accuracy:maximize", "--no-wait")
    assert done.returncode == 0, done.stdout + done.stderr
    handle = launch.attach_tuning(done.stdout.split("submitted ", 1)[1].split()[0])
    handle.cancel()
    magic = parse_flags(VertexTrainMagics.vertex_train, "--tune units=int:1:2 --metric accuracy:maximize")
    assert (handle.resource.max_trial_count, handle.resource.parallel_trial_count) == (10, 1) == \
        (magic.trials, magic.parallel)


CELL = """\
import argparse, json, os, time
p = argparse.ArgumentParser()
p.add_argument("--units", type=int)
args, _ = p.parse_known_args()
print("trial", os.environ["CLOUD_ML_TRIAL_ID"], "units", args.units)
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "w") as f:
    f.write(json.dumps({"accuracy": str(args.units / 100), "checkpoint_path": "", "global_step": "1",
                        "timestamp": time.time(), "trial": os.environ["CLOUD_ML_TRIAL_ID"]}, sort_keys=True) + "\\n")
"""


MAGIC = """\
import json, sys
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output
from jupyter_ext import launch, tuning
ip = start_ipython()
ip.run_line_magic("load_ext", "jupyter_ext")
with capture_output() as out:
    ip.run_cell_magic("vertex_train", sys.argv[1], sys.argv[2])
monitor = ip.magics_manager.registry["VertexTrainMagics"].monitor
handle = ip.user_ns["hpt_handle"]
print(json.dumps({"state": monitor.state, "error": monitor.error, "best": monitor.best_trial,
                  "handle": type(handle).__name__, "handle_best": handle.best_trial().id,
                  "params": [tuning.parameters_of(t) for t in handle.trials], "output": out.stdout + out.stderr}))
"""


def test_the_magic_runs_a_tuning_job_and_shows_the_monitor(service: dict) -> None:
    # a shell of its own (IPython's test shell is one per process, and test_magics starts it)
    flags = ('--tune "units=int:1:3" --metric accuracy:maximize --trials 3 --parallel 3 --algorithm grid '
             "--workers 1 --name tuned hpt_handle")
    done = subprocess.run([sys.executable, "-c", MAGIC, flags, CELL], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["state"] == "JOB_STATE_SUCCEEDED", result["error"]
    assert result["best"] == "3" and result["handle"] == "TuningHandle" and result["handle_best"] == "3"
    assert result["params"] == [{"units": 1}, {"units": 2}, {"units": 3}]
    assert "Traceback" not in result["output"]


def test_a_crashed_service_fails_its_tuning_job_and_a_stopped_one_cancels_it(service: dict) -> None:
    study = tuning.study_spec("units=int:1:4", "accuracy:maximize", "grid")
    pools = [hpt_pool(1, args=["--sleep", "60"])]
    crashed = launch.submit_tuning(launch.tuning_request(pools, study, max_trials=4, parallel=2,
                                                         display_name="orphan"))
    wait_state(crashed, "JOB_STATE_RUNNING")
    wait_for(lambda: len(processes_of_job(crashed.id)) >= 2, 30, "two trials to start")
    kill_service(service)
    restart_service(service)
    resource = crashed.refresh()
    assert resource.state.name == "JOB_STATE_FAILED"
    assert resource.error.message == "the local service stopped while the job was running"
    assert {t.state.name for t in resource.trials} == {"INFEASIBLE"}
    assert processes_of_job(crashed.id) == []

    stopped = launch.submit_tuning(launch.tuning_request(pools, study, max_trials=4, parallel=2,
                                                         display_name="at-stop"))
    wait_state(stopped, "JOB_STATE_RUNNING")
    assert vtrain("service", "stop").stdout.strip() == "stopped"
    assert processes_of_job(stopped.id) == []
    restart_service(service)
    resource = stopped.refresh()
    assert resource.state.name == "JOB_STATE_CANCELLED"
    assert "the local service was stopped" in resource.error.message


def test_a_failed_tuning_job_fails_the_cell_but_a_failed_trial_does_not(service: dict, ipython: Any) -> None:
    from jupyter_ext.errors import JobFailedError

    cell = f"import runpy, sys\nsys.argv[0] = {TRAINER!r}\nrunpy.run_path({TRAINER!r}, run_name='__main__')"
    flags = '--tune "units=int:1:2" --metric accuracy:maximize --trials 2 --parallel 2 --algorithm grid'
    ipython.run_cell_magic("vertex_train", f'{flags} --args "--fail-on 1" --name one-trial-fails tuned', cell)
    assert ipython.user_ns["tuned"].state == "JOB_STATE_SUCCEEDED"  # an infeasible trial is not a failed job
    with pytest.raises(JobFailedError) as failed:
        ipython.run_cell_magic("vertex_train", f'{flags} --args "--fail-on 1,2" --name all-trials-fail', cell)
    # the whole line: the job, its last failed trial, that trial's replica, how it ended, and its log
    line = re.fullmatch(r"HyperparameterTuningJob (\d+) \(all-trials-fail\) FAILED: all 2 trials failed; last failure: "
                        r"trial ([12]): replica workerpool0-0 exited with code 1; its log: (\S+)", str(failed.value))
    assert line, str(failed.value)
    job, trial, log = line.groups()
    assert Path(log) == launch.attach(job).local_dir / "trials" / trial / "logs" / "workerpool0-0.log"
    assert f"trial {trial} breaks on purpose" in Path(log).read_text()
