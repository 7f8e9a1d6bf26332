"""`vtrain shell`: the local equivalent of Vertex AI's interactive shell, on both backends, through the
real CLI against the local service; and what the monitor and the lab panel show for it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from google.cloud.aiplatform_v1 import types as v1

from conftest import job_id, pool, vtrain, wait_for, write_spec
from jupyter_ext import launch, replica_shell
from jupyter_ext.service import daemon
from widgets.logbuffer import access_html

# prints the environment it was given, then waits to be entered
REPLICA = """\
import os, time
print("SPEC", os.environ["CLUSTER_SPEC"], flush=True)
print("CWD", os.getcwd(), flush=True)
time.sleep(120)
"""
SHOW_SPEC = ["--", "python", "-c", "import os; print(os.environ['CLUSTER_SPEC'])"]


@pytest.fixture
def shell_service(module_home: Path) -> dict[str, Any]:
    """The module's local service: all a process-backend job needs (no Docker)."""
    return daemon.ensure_running()


@pytest.fixture(scope="module")
def docker_shell_service(module_home: Path, docker_services: Any) -> Iterator[dict[str, Any]]:
    """The module's local service, able to run docker-backend jobs on the test engine: started again with
    DOCKER_HOST, since one a process test started before cannot reach that engine."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", docker_services.engine_url)
        daemon.stop()
        yield daemon.ensure_running()


@dataclass
class Backend:
    name: str
    replica: dict[str, Any]  # how pool() runs REPLICA on it
    env: dict[str, str]  # what `vtrain shell` needs to reach it


@pytest.fixture(params=["process", "docker"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """A replica backend with a service that runs it; only the docker one needs the Docker test services."""
    if request.param == "process":
        request.getfixturevalue("shell_service")
        return Backend("process", {"code": REPLICA}, {})
    docker = request.getfixturevalue("docker_services")
    request.getfixturevalue("docker_shell_service")
    return Backend("docker", {"image": docker.base_image, "command": ["python", "-c", REPLICA]},
                   {"DOCKER_HOST": docker.engine_url})


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:
    return module_home


def _submit(tmp_path: Path, body: dict, *flags: str) -> str:
    spec = write_spec(tmp_path / "job.json", [body, {**body, "replicaCount": 2}])
    done = vtrain("submit", str(spec), "--name", "shell-test", *flags)
    assert done.returncode == 0, done.stderr
    return job_id(done.stdout.split()[1])


def _printed(job: str, task: str, key: str) -> str:
    """What the replica itself printed after `key` (its own view of its environment)."""
    def found() -> str:
        lines = vtrain("logs", job, "--replica", task).stdout.splitlines()
        return next((line.split(f"] {key} ", 1)[1] for line in lines if f"] {key} " in line), "")
    return wait_for(found, 60, f"{task} to print {key}")


def _cancel(job: str) -> None:
    vtrain("cancel", job)
    handle = launch.attach(job)
    wait_for(lambda: handle.refresh().state.name == "JOB_STATE_CANCELLED", 60, "the job to be cancelled")


def test_a_shell_command_runs_inside_the_replica_with_its_cluster_spec(backend: Backend, tmp_path: Path) -> None:
    job = _submit(tmp_path, pool(1, **backend.replica), "--enable-web-access", "--backend", backend.name)
    try:
        for task in ("workerpool1-1", "workerpool0-0"):
            expected = _printed(job, task, "SPEC")
            done = vtrain("shell", job, "--replica", task, *SHOW_SPEC, env=backend.env)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout) == json.loads(expected)
            pool_index, index = task.split("-")
            task_of = json.loads(done.stdout)["task"]
            assert (task_of["type"], task_of["index"]) == (pool_index, int(index))
        where = vtrain("shell", job, "--replica", "workerpool1-0", "--", "pwd", env=backend.env)
        assert where.stdout.strip() == _printed(job, "workerpool1-0", "CWD")  # the replica's working folder
        failing = vtrain("shell", job, "--", "sh", "-c", "exit 7", env=backend.env)
        assert failing.returncode == 7  # the command's exit code is vtrain's
        killed = vtrain("shell", job, "--", "sh", "-c", "kill -9 $$", env=backend.env)
        assert killed.returncode == 128 + 9  # killed by a signal: as a shell says it
    finally:
        _cancel(job)


def test_a_process_shell_has_the_replicas_environment_not_the_callers(shell_service: dict, tmp_path: Path) -> None:
    job = _submit(tmp_path, pool(1, code=REPLICA), "--enable-web-access", "--env", "ONLY_IN_JOB=from-the-job")
    try:
        _printed(job, "workerpool0-0", "SPEC")
        done = vtrain("shell", job, "--", "python", "-c",
                      "import os; print(os.environ.get('ONLY_IN_JOB'), os.environ.get('ONLY_IN_CALLER'))",
                      env={"ONLY_IN_CALLER": "leaked"})
        assert done.stdout.split() == ["from-the-job", "None"]
    finally:
        _cancel(job)


def test_the_monitor_and_the_job_row_show_the_shell_command(shell_service: dict, tmp_path: Path) -> None:
    from widgets.monitor import JobMonitor

    job = _submit(tmp_path, pool(1, code=REPLICA), "--enable-web-access")
    try:
        handle = launch.attach(job)
        monitor = JobMonitor(handle)
        wait_for(lambda: "vtrain shell" in monitor._access.value, 30, "the monitor to show the shell command")
        for task in ("workerpool0-0", "workerpool1-0", "workerpool1-1"):
            assert f"vtrain shell {job} --replica {task}" in monitor._access.value
        row = launch.job_row(handle.refresh(), local=True)
        assert row["access"]["workerpool1-1"] == f"vtrain shell {job} --replica workerpool1-1"
    finally:
        _cancel(job)
    wait_for(lambda: monitor._access.value == "", 30, "the shell command to go once the job ended")
    monitor.close()


def test_a_job_without_web_access_cannot_be_entered(shell_service: dict, tmp_path: Path) -> None:
    job = _submit(tmp_path, pool(1, code=REPLICA))
    try:
        _printed(job, "workerpool0-0", "SPEC")
        done = vtrain("shell", job, *SHOW_SPEC)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.strip().splitlines() == [
            f"vtrain: error: enableWebAccess: job {job} was created without it; submit it with --enable-web-access "
            "to open a shell in its replicas"]
        assert launch.job_row(launch.attach(job).refresh(), local=True)["access"] == {}
    finally:
        _cancel(job)


def test_an_unknown_replica_or_an_ended_job_is_one_line(shell_service: dict, tmp_path: Path) -> None:
    job = _submit(tmp_path, pool(1, code=REPLICA), "--enable-web-access")
    _printed(job, "workerpool0-0", "SPEC")
    unknown = vtrain("shell", job, "--replica", "workerpool3-0", *SHOW_SPEC)
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (f"vtrain: error: --replica: job {job} has no replica 'workerpool3-0' "
                                      "(it has workerpool0-0, workerpool1-0, workerpool1-1)")
    _cancel(job)
    ended = vtrain("shell", job, *SHOW_SPEC)
    assert ended.returncode == 2
    assert ended.stderr.strip() == f"vtrain: error: JOB: job {job} is CANCELLED; a shell needs a running replica"


def test_vertex_access_links_are_the_uris_vertex_returned() -> None:
    job = v1.CustomJob(name="projects/p/locations/us-central1/customJobs/7", state="JOB_STATE_RUNNING",
                       job_spec={"enable_web_access": True,
                                 "worker_pool_specs": [{"replica_count": 1}, {"replica_count": 2}]},
                       web_access_uris={"workerpool0-0": "https://abc-dot-us-central1.aiplatform-training."
                                                          "googleusercontent.com"})
    assert replica_shell.access(job, local=False) == {
        "workerpool0-0": "https://abc-dot-us-central1.aiplatform-training.googleusercontent.com"}
    row = launch.job_row(job, local=False)
    assert row["access"] == replica_shell.access(job, local=False)
    job.job_spec.enable_web_access = False
    assert replica_shell.access(job, local=False) == {}


DASHBOARD_URI = "https://def-dot-us-central1.aiplatform-training.googleusercontent.com"


def _vertex_job(web: bool, dashboard: bool, uris: dict[str, str]) -> v1.CustomJob:
    return v1.CustomJob(name="projects/p/locations/us-central1/customJobs/8", state="JOB_STATE_RUNNING",
                        job_spec={"enable_web_access": web, "enable_dashboard_access": dashboard,
                                  "worker_pool_specs": [{"replica_count": 1}, {"replica_count": 1}]},
                        web_access_uris=uris)


def test_a_dashboard_only_job_shows_its_dashboard_link_labelled_as_one() -> None:
    """Vertex AI returns the dashboard in webAccessUris keyed `workerpool0-0:PORT` (Google's Dask sample)."""
    job = _vertex_job(web=False, dashboard=True, uris={"workerpool0-0:8888": DASHBOARD_URI})
    assert replica_shell.access(job, local=False) == {"workerpool0-0:8888": DASHBOARD_URI}
    assert launch.job_row(job, local=False)["access"] == {"workerpool0-0:8888": DASHBOARD_URI}
    links = replica_shell.links(job, local=False)
    assert [(link.kind, link.label, link.target) for link in links] == [
        ("dashboard", "dashboard of workerpool0-0 (port 8888)", DASHBOARD_URI)]
    assert replica_shell.heading(links) == "Open the dashboard"
    job.job_spec.enable_dashboard_access = False
    assert replica_shell.access(job, local=False) == {} and replica_shell.links(job, local=False) == []


def test_shells_and_the_dashboard_are_told_apart() -> None:
    shell0, shell1 = "https://a-dot-us-central1.aiplatform-training.googleusercontent.com", "https://b-dot-x"
    job = _vertex_job(web=True, dashboard=True, uris={"workerpool1-0": shell1, "workerpool0-0:8888": DASHBOARD_URI,
                                                       "workerpool0-0": shell0})
    links = replica_shell.links(job, local=False)
    assert [(link.label, link.target) for link in links] == [
        ("shell in workerpool0-0", shell0), ("shell in workerpool1-0", shell1),
        ("dashboard of workerpool0-0 (port 8888)", DASHBOARD_URI)]
    assert replica_shell.heading(links) == "Shell into a replica or open the dashboard"
    assert replica_shell.heading(links[:2]) == "Shell into a replica"


def test_the_monitor_and_the_panel_say_what_each_link_opens() -> None:
    job = v1.CustomJob(name="projects/p/locations/us-central1/customJobs/7", state="JOB_STATE_RUNNING",
                       job_spec={"enable_dashboard_access": True,
                                 "worker_pool_specs": [{"machine_spec": {"machine_type": "n1-standard-4"},
                                                        "replica_count": 1}]},
                       web_access_uris={"workerpool0-0:8888": DASHBOARD_URI})
    shown = access_html(replica_shell.links(job, local=False))
    assert shown.startswith('<div class="vtrain-access">Open the dashboard: <a href="')
    assert ">dashboard of workerpool0-0 (port 8888)</a>" in shown and "Shell" not in shown
    assert launch.job_row(job, local=False)["access_heading"] == "Open the dashboard"
