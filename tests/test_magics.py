"""`%%vertex_train` and the line magics through a real IPython shell."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from conftest import wait_for


CELL = """\
import json, os, sys
tf_config = json.loads(os.environ["TF_CONFIG"])
print("task", tf_config["task"]["type"], tf_config["task"]["index"], "args", sys.argv[1:])
"""


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:
    return module_home


@pytest.fixture(scope="module")
def ip(module_home: Path, ipython):  # type: ignore[no-untyped-def]
    return ipython


def _magics(ip) -> object:  # type: ignore[no-untyped-def]
    return ip.magics_manager.registry["VertexTrainMagics"]


def test_dry_run_shows_the_dockerfile_the_job_and_every_tf_config(ip) -> None:  # type: ignore[no-untyped-def]
    jobs_before = set(ip.run_line_magic("vertex_jobs", "")["id"])  # the module's other tests launch jobs
    with capture_output() as out:
        ip.run_cell_magic("vertex_train", "--workers 2 --ps 1 --dry-run --name dry", CELL)
    text = out.stdout
    assert 'ENTRYPOINT ["python", "-m", "trainer.task"]' in text and "COPY trainer /trainer" in text
    assert '"displayName": "dry"' in text
    for task in ("workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0"):
        assert f"## {task}" in text
    assert text.count("TF_CONFIG=") == 4 and '"task": {"type": "ps", "index": 0}' in text
    assert set(ip.run_line_magic("vertex_jobs", "")["id"]) == jobs_before  # nothing was launched


def test_scheduling_flags_reach_the_job_and_the_dry_run_prices_it(ip) -> None:  # type: ignore[no-untyped-def]
    import json

    from conftest import ROOT

    with capture_output() as out:
        ip.run_cell_magic("vertex_train", "--workers 1 --strategy SPOT --timeout 30m --enable-web-access "
                                          "--region europe-west4 --dry-run", CELL)
    text = out.stdout
    body = json.loads(text.split("# CustomJob (REST body)\n", 1)[1].split("\n# Cost per hour", 1)[0])
    assert body["jobSpec"]["scheduling"] == {"strategy": "SPOT", "timeout": "1800s"}
    assert body["jobSpec"]["enableWebAccess"] is True
    # the price is computed again here from the data file (as test_cost does), not by cost.estimate
    assert [p["machineSpec"] for p in body["jobSpec"]["workerPoolSpecs"]] == [{"machineType": "n1-standard-4"}] * 2
    n1 = json.loads((ROOT / "jupyter_ext" / "data" / "prices.json").read_text())[
        "regions"]["europe-west4"]["machines"]["n1-standard-4"]
    spot, on_demand = 2 * n1["spot"], 2 * n1["on_demand"]  # a chief and a worker, no GPUs
    assert "# Cost per hour in europe-west4" in text
    assert f"Total: ${spot:.4f} per hour Spot (${on_demand:.4f} on demand)" in text.splitlines()
    assert spot < on_demand


def test_a_spot_job_runs_here_as_standard_and_says_so(ip) -> None:  # type: ignore[no-untyped-def]
    with capture_output() as out:
        ip.run_cell_magic("vertex_train", "--workers 1 --strategy SPOT --name spot-here spot", CELL)
    assert ip.user_ns["spot"].state == "JOB_STATE_SUCCEEDED"
    assert ("note: scheduling.strategy: SPOT runs as STANDARD on this machine (it is never preempted); on Vertex AI "
            "it is SPOT") in out.stdout.splitlines()
    with pytest.raises(UsageError, match=r"--strategy \(scheduling.strategy\): 'CHEAP' is not a strategy"):
        ip.run_cell_magic("vertex_train", "--strategy CHEAP", CELL)


def test_a_bad_flag_is_one_usage_error_without_traceback(ip) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="--workers"):
        ip.run_cell_magic("vertex_train", "--workers many", CELL)
    with capture_output() as out:
        ip.run_cell("%%vertex_train --workers many\npass")
    assert "UsageError" in out.stderr + out.stdout and "Traceback" not in out.stderr + out.stdout


def test_quoted_values_reach_the_job_without_their_quotes(ip) -> None:  # type: ignore[no-untyped-def]
    import json

    with capture_output() as out:
        ip.run_cell_magic("vertex_train", """--name "my job" --env "MSG=hello world" --env OTHER='a "b"' """
                          """--requirements "pandas>=2.0" 'numpy<3' --args "--verbose" --show-env-values --dry-run""",
                          CELL)
    body = json.loads(out.stdout.split("# CustomJob (REST body)\n", 1)[1].split("\n# Cost per hour", 1)[0])
    assert body["displayName"] == "my job"
    package = body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]
    assert package["env"] == [{"name": "MSG", "value": "hello world"}, {"name": "OTHER", "value": 'a "b"'}]
    assert package["args"] == ["--verbose"]
    context = Path(package["packageUris"][0])
    assert (context / "requirements.txt").read_text().split() == ["pandas>=2.0", "numpy<3"]


@pytest.mark.parametrize("line, cell, message", [
    ("--name e1", "# only a comment\n", r"^the cell: no trainer code below the %%vertex_train line"),
    ("", "print('unclosed'\n", r"^the cell: line 1: '\(' was never closed \(nothing was launched\)$"),
    ("--workers -1", CELL, r"^argument --workers: must be at least 0, not -1$"),
    ("--tune a=int:1:2 --metric m:maximize --trials 0", CELL, r"^argument --trials: must be at least 1, not 0$"),
    ('--name "unclosed', CELL, r"^the magic's line: No closing quotation$"),
    ("1bad", CELL, r"^destination: '1bad' is not a Python name for the job handle$"),
    ("--config layout --workers 3 --machine-type n1-standard-8", CELL,
     r"^--workers, --machine-type: the layout comes from --config; change it there, or drop --config"),
    ("--config five", CELL, r"^--config five: a job description must be a mapping or a list of pools, not int$"),
    ("--show-env-values", CELL, r"^--show-env-values: only with --dry-run"),
    ("--tune lr=double:0.1:0.001 --metric acc:maximize --dry-run", CELL,
     r"studySpec.parameters\[0\].doubleValueSpec.minValue: must be below maxValue"),
    ("--vertex --project p --region us-central1 --staging-bucket gs://b --job-dir /tmp/out --dry-run", CELL,
     r"^baseOutputDirectory.outputUriPrefix: '/tmp/out' is not a Cloud Storage URI"),
    ("--vertex --project p --region mars-1 --staging-bucket gs://b --dry-run", CELL,
     r"^region: Vertex AI custom training is not offered in 'mars-1'"),
])
def test_what_would_fail_later_is_one_line_now_and_launches_nothing(  # type: ignore[no-untyped-def]
        ip, line: str, cell: str, message: str) -> None:
    """Each mistake is found before anything is built or launched, the dry run included (it checks what the
    real run checks), in one line naming the flag, the field or the cell."""
    ip.user_ns.update(layout={"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                  "replicaCount": 1, "containerSpec": {"imageUri": "x"}}]}, five=5)
    jobs_before = set(ip.run_line_magic("vertex_jobs", "")["id"])
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("vertex_train", line, cell)
    assert set(ip.run_line_magic("vertex_jobs", "")["id"]) == jobs_before


def test_a_vertex_dry_run_shows_the_job_as_it_would_be_sent(ip, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With what the real run adds: the base output directory in the staging bucket, so AIP_MODEL_DIR and
    the other folders show as on Vertex AI."""
    import json

    monkeypatch.delenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM", raising=False)
    with capture_output() as out:
        ip.run_cell_magic("vertex_train", "--vertex --project p --region us-central1 --staging-bucket gs://b/nb "
                                          "--workers 1 --dry-run", CELL)
    body = json.loads(out.stdout.split("# CustomJob (REST body)\n", 1)[1].split("\n# Cost per hour", 1)[0])
    base = body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    assert re.fullmatch(r"gs://b/nb/aiplatform-custom-job-[\d-]+", base), base
    assert out.stdout.count(f"AIP_MODEL_DIR={base}/model/") == 2  # the chief's and the worker's


def test_a_tuning_dry_run_shows_the_tuning_job_and_launches_nothing(ip) -> None:  # type: ignore[no-untyped-def]
    import json

    jobs_before = set(ip.run_line_magic("vertex_jobs", "--tuning")["id"])
    with capture_output() as out:
        ip.run_cell_magic("vertex_train", '--tune "units=int:1:4" --metric accuracy:maximize --trials 4 '
                                          "--parallel 2 --env SECRET=s3 --dry-run", CELL)
    text = out.stdout.split("# HyperparameterTuningJob (REST body; its trials run the CustomJob above)\n", 1)[1]
    body = json.loads(text.split("\n# Cost per hour", 1)[0])
    assert (body["maxTrialCount"], body["parallelTrialCount"]) == (4, 2)
    assert body["studySpec"]["parameters"][0]["parameterId"] == "units"
    assert body["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"] == [
        {"name": "SECRET", "value": "***"}]
    assert set(ip.run_line_magic("vertex_jobs", "--tuning")["id"]) == jobs_before


def test_a_state_that_is_not_one_names_the_flag_in_the_magic_and_the_cli(ip) -> None:  # type: ignore[no-untyped-def]
    from google.cloud.aiplatform_v1 import types as v1

    from conftest import vtrain
    from jupyter_ext import states

    assert states.SHORT_NAMES == tuple(s.name.removeprefix("JOB_STATE_") for s in v1.JobState)[1:]
    expected = "--state: 'DONE' is not a job state (valid: QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, "
    with pytest.raises(UsageError, match="^" + re.escape(expected)):
        ip.run_line_magic("vertex_jobs", "--state DONE")
    done = vtrain("jobs", "--state", "DONE")
    assert done.returncode == 2 and done.stderr.startswith("vtrain: error: " + expected)
    assert set(ip.run_line_magic("vertex_jobs", "--state succeeded")["state"]) <= {"SUCCEEDED"}


def test_a_job_that_does_not_exist_is_the_same_line_in_the_magic_and_the_cli(ip) -> None:  # type: ignore[no-untyped-def]
    from conftest import vtrain

    for magic in ("vertex_logs", "vertex_cancel"):  # not the REST request the client sent
        with pytest.raises(UsageError, match=r"^404 CustomJob 999 does not exist$"):
            ip.run_line_magic(magic, "999")
    assert vtrain("logs", "999").stderr == "vtrain: error: 404 CustomJob 999 does not exist\n"


def test_vertex_logs_and_cancel_take_a_tuning_jobs_id(ip) -> None:  # type: ignore[no-untyped-def]
    with capture_output():
        ip.run_cell_magic("vertex_train", '--tune "units=int:1:2" --metric accuracy:maximize --trials 1 --no-wait '
                                          "--name tuned tuned", "import time; time.sleep(120)\n")  # until cancelled
    tuned = ip.user_ns["tuned"]
    listed = ip.run_line_magic("vertex_jobs", "--tuning").set_index("id")
    assert listed.loc[tuned.id, "display_name"] == "tuned" and listed.loc[tuned.id, "trials"].endswith("/1")
    assert tuned.id not in set(ip.run_line_magic("vertex_jobs", "")["id"])
    with capture_output() as out:
        ip.run_line_magic("vertex_logs", tuned.id)
    [shown] = [o.data["text/plain"].splitlines() for o in out.outputs]  # a TuningMonitor: the job and its trials
    assert shown[0].split()[0] == tuned.name and shown[1].split()[:2] == ["trial", "units"]
    with capture_output() as out:
        ip.run_line_magic("vertex_cancel", tuned.id)
    assert out.stdout == f"cancelling {tuned.name}\n"
    assert tuned.wait(60) == "JOB_STATE_CANCELLED"


def test_vertex_jobs_lists_running_jobs_that_have_no_end_yet(ip) -> None:  # type: ignore[no-untyped-def]
    with capture_output():
        ip.run_cell_magic("vertex_train", "--no-wait --name long long", "import time; time.sleep(120)\n")
    long = ip.user_ns["long"]
    wait_for(lambda: long.state == "JOB_STATE_RUNNING", 60, "the job to run")
    running = ip.run_line_magic("vertex_jobs", "--state RUNNING").set_index("id")
    assert running.loc[long.id, "state"] == "RUNNING" and running["ended"].isna().all()
    assert running["duration"].isna().all() and running.loc[long.id, "started"] >= running.loc[long.id, "created"]
    ip.run_line_magic("vertex_cancel", long.id)
    assert long.wait(60) == "JOB_STATE_CANCELLED"


def test_a_replica_the_job_does_not_have_is_one_line_not_an_empty_log(ip) -> None:  # type: ignore[no-untyped-def]
    from conftest import vtrain

    with capture_output():
        ip.run_cell_magic("vertex_train", "--workers 1 --name two two", CELL)
    job = ip.user_ns["two"].id
    expected = f"--replica: job {job} has no replica 'workerpool1-1' (it has workerpool0-0, workerpool1-0)"
    with pytest.raises(UsageError, match=f"^{re.escape(expected)}$"):
        ip.run_line_magic("vertex_logs", f"{job} --replica workerpool1-1")
    assert vtrain("logs", job, "--replica", "workerpool1-1").stderr == f"vtrain: error: {expected}\n"
    shown = vtrain("logs", job, "--replica", "workerpool1-0")
    assert shown.returncode == 0 and "[workerpool1-0] task worker 0" in shown.stdout


@pytest.mark.parametrize("flags, message", [
    ("--accelerator NVIDIA_TESLA_T4:3", r"acceleratorCount: 3 is not offered for NVIDIA_TESLA_T4 on n1-standard-4"),
    ("--config nowhere", r"--config: no variable or file named 'nowhere'"),
    ("--machine-type n1-standard-3", r"machineType: 'n1-standard-3' is not a Vertex AI training machine type"),
    ("--vertex --region us-central1", r"--project"),
    ("--backend nope", r"--backend: unknown backend 'nope' \(available: docker, process\)"),
    ("--machine-type a4x-highgpu-4g", r"^--base-image: the default, .* built for linux/amd64 only"),
])
def test_user_mistakes_name_the_flag_or_field(ip, flags: str, message: str,  # type: ignore[no-untyped-def]
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from google.cloud.aiplatform import initializer

    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.setattr(initializer.global_config, "_project", None)  # another test may have called init
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("vertex_train", flags, CELL)
    with capture_output() as out:
        ip.run_cell(f"%%vertex_train {flags}\n{CELL}")
    assert "Traceback" not in out.stderr + out.stdout


def test_job_dir_is_the_notebooks_folder_and_one_it_cannot_make_is_one_line(  # type: ignore[no-untyped-def]
        ip, service: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative --job-dir is under the notebook's folder (the kernel's), not the local service's."""
    monkeypatch.chdir(tmp_path)  # the service, already running, was started in another folder
    code = 'import os, pathlib\npathlib.Path(os.environ["AIP_MODEL_DIR"], "saved.txt").write_text("model")\n'
    with capture_output():
        ip.run_cell_magic("vertex_train", "--job-dir out --name outputs outputs", code)
    assert ip.user_ns["outputs"].state == "JOB_STATE_SUCCEEDED"
    assert (tmp_path / "out" / "model" / "saved.txt").read_text() == "model"
    jobs_before = set(ip.run_line_magic("vertex_jobs", "")["id"])
    with pytest.raises(UsageError, match=r"^baseOutputDirectory.outputUriPrefix: cannot make the folder "
                                         r"/proc/nowhere/out \(No such file or directory\)$"):
        ip.run_cell_magic("vertex_train", "--job-dir /proc/nowhere/out", CELL)
    assert set(ip.run_line_magic("vertex_jobs", "")["id"]) == jobs_before  # nothing was launched


def test_a_local_three_replica_job_runs_from_a_cell(ip) -> None:  # type: ignore[no-untyped-def]
    with capture_output():
        ip.run_cell_magic("vertex_train", '--workers 2 --name from-cell --args "--lr 0.1" job', CELL)
    monitor = _magics(ip).monitor
    assert monitor.state == "JOB_STATE_SUCCEEDED"
    lines = {ln.task_name: ln.text for ln in monitor.buffer.lines()}
    assert lines == {"workerpool0-0": "task chief 0 args ['--lr', '0.1']",
                     "workerpool1-0": "task worker 0 args ['--lr', '0.1']",
                     "workerpool1-1": "task worker 1 args ['--lr', '0.1']"}
    handle = ip.user_ns["job"]
    assert handle.state == "JOB_STATE_SUCCEEDED"
    jobs = ip.run_line_magic("vertex_jobs", "--state SUCCEEDED")
    assert handle.id in set(jobs["id"]) and jobs.set_index("id").loc[handle.id, "replicas"] == 3
    # a new view of the same job (as after a kernel restart) reads its logs again
    ip.run_line_magic("vertex_logs", f"{handle.id} --replica workerpool1-1")
    again = _magics(ip).monitor
    assert again.wait(60) == "JOB_STATE_SUCCEEDED" and again.buffer.count() == 3
    with pytest.raises(UsageError, match="already JOB_STATE_SUCCEEDED"):
        ip.run_line_magic("vertex_cancel", handle.id)


FAILING = CELL + 'if tf_config["task"]["type"] == "worker":\n    raise SystemExit(3)\nimport time; time.sleep(30)\n'


def test_a_failed_job_fails_the_cell_in_one_line_and_is_shown_first(ip) -> None:  # type: ignore[no-untyped-def]
    from jupyter_ext.errors import JobFailedError

    with capture_output(), pytest.raises(JobFailedError) as failed:
        ip.run_cell_magic("vertex_train", "--workers 1 --name failing job", FAILING)
    handle = ip.user_ns["job"]
    text = str(failed.value)
    assert text == (f"CustomJob {handle.id} (failing) FAILED: replica workerpool1-0 exited with code 3; "
                    f"its log: {handle.local_dir / 'logs' / 'workerpool1-0.log'}")
    assert failed.value._render_traceback_() == [f"\x1b[0;31mJobFailedError\x1b[0m: {text}"]  # no frames
    monitor = _magics(ip).monitor
    assert monitor.state == "JOB_STATE_FAILED"
    assert list(monitor._views)[monitor._tabs.selected_index] == "workerpool1-0"  # its lines first


def test_with_no_wait_the_cell_returns_at_once_and_the_handle_raises_later(ip) -> None:  # type: ignore[no-untyped-def]
    from jupyter_ext.errors import JobFailedError

    with capture_output():
        ip.run_cell_magic("vertex_train", "--workers 1 --name failing-later --no-wait later", FAILING)
    handle = ip.user_ns["later"]
    with pytest.raises(JobFailedError, match=r"FAILED: replica workerpool1-0 exited with code 3; its log: "):
        handle.result(timeout=120)


def test_closing_the_view_stops_the_waiting_and_the_job_goes_on(ip) -> None:  # type: ignore[no-untyped-def]
    magics = _magics(ip)
    before = getattr(magics, "monitor", None)

    def close_the_view_once_running() -> None:
        def running() -> object:
            monitor = getattr(magics, "monitor", None)
            return monitor if monitor is not before and monitor.state == "JOB_STATE_RUNNING" else None
        wait_for(running, 120, "the job to run").close()

    closer = threading.Thread(target=close_the_view_once_running)
    closer.start()
    with capture_output() as shown:
        ip.run_cell_magic("vertex_train", "--name outlives-its-view closed",
                          "import time\nprint('up', flush=True)\ntime.sleep(120)\n")
    closer.join()
    assert "stopped waiting; the job goes on" in shown.stdout
    handle = ip.user_ns["closed"]
    assert handle.state == "JOB_STATE_RUNNING"
    handle.cancel()
    assert handle.wait(60) == "JOB_STATE_CANCELLED"


def test_the_pool_configurator_drives_the_job(ip) -> None:  # type: ignore[no-untyped-def]
    ip.run_cell("pools = vertex_pools()\npools.spec = {'workerPoolSpecs': [{'machineSpec': {'machineType': "
                "'n1-standard-4'}, 'replicaCount': 1, 'containerSpec': {'imageUri': 'x'}}, {'machineSpec': "
                "{'machineType': 'n1-standard-4'}, 'replicaCount': 1, 'containerSpec': {'imageUri': 'x'}}]}")
    with capture_output() as out:
        ip.run_cell_magic("vertex_train", "--config pools --dry-run", CELL)
    assert "## workerpool1-0" in out.stdout and "## workerpool1-1" not in out.stdout
