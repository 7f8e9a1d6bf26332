"""The local service through the real clients: google-cloud-aiplatform (REST) and google-cloud-logging."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from google.api_core import exceptions as api_exceptions
from google.cloud import aiplatform
from google.cloud import logging as cloud_logging
from google.oauth2.credentials import Credentials

from conftest import (job_id, kill_service, pool, processes_of_job, restart_service, vtrain, wait_for, wait_state,
                      write_spec)
from jupyter_ext import launch
from jupyter_ext.service import daemon


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, fast_sdk_polling: None) -> Path:  # one service for the whole module
    return module_home


def _request(endpoint: str, path: str, token: str | None, method: str = "GET") -> tuple[int, dict]:
    req = urllib.request.Request(endpoint + path, method=method, data=b"{}" if method == "POST" else None)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_sdk_custom_job_runs_to_success_and_is_listed(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="sdk-three", worker_pool_specs=[
        pool(trainer="echo_env.py", form="sdk"), pool(2, trainer="echo_env.py", form="sdk")])
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_SUCCEEDED" and again.display_name == "sdk-three"
    resource = again.gca_resource
    assert resource.start_time and resource.end_time and resource.create_time <= resource.start_time
    assert job.resource_name in [j.resource_name for j in aiplatform.CustomJob.list()]
    # the SDK's default base output directory (under the staging bucket) is kept on this machine
    entries = list(launch.attach(job_id(job.resource_name)).logs(replica="workerpool1-1"))
    env = json.loads(entries[0].text)["env"]
    assert env["AIP_MODEL_DIR"].startswith(str(daemon.paths.data_dir() / "gcs" / "local-bucket"))
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}


def test_a_bad_job_raises_the_sdks_error_with_our_message(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="bad", worker_pool_specs=[pool(2, trainer="echo_env.py", form="sdk")])
    with pytest.raises(api_exceptions.BadRequest, match=r"workerPoolSpecs\[0\]\.replicaCount: the primary pool"):
        job.run()


def test_cancel_a_long_job_leaves_nothing_running(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="long", worker_pool_specs=[
        pool(trainer="crash.py", form="sdk"), pool(2, trainer="crash.py", form="sdk")])
    job.submit()
    wait_state(job, "JOB_STATE_RUNNING")
    job.cancel()
    wait_state(job, "JOB_STATE_CANCELLED")
    assert job.gca_resource.error.code == 1  # google.rpc.Code.CANCELLED, as Vertex reports it
    assert processes_of_job(job_id(job.resource_name)) == []


def test_logging_client_lists_one_replicas_lines_in_order(service: dict) -> None:
    code = "import sys\nfor i in range(300): print(f'line {i}')\nprint('oops', file=sys.stderr)"
    job = aiplatform.CustomJob(display_name="lines", worker_pool_specs=[
        pool(trainer="echo_env.py", form="sdk"), pool(code=code, image="x", form="sdk")])
    job.run()
    client = cloud_logging.Client(project="local", credentials=Credentials(token=daemon.read_token()),
                                  client_options={"api_endpoint": service["endpoint"]}, _use_grpc=False)
    query = (f'resource.type="ml_job" AND resource.labels.job_id="{job_id(job.resource_name)}" '
             'AND resource.labels.task_name="workerpool1-0"')
    entries = list(client.list_entries(filter_=query, order_by=cloud_logging.ASCENDING, page_size=120))
    assert [e.payload for e in entries] == [f"line {i}" for i in range(300)] + ["oops"]
    assert {e.resource.labels["task_name"] for e in entries} == {"workerpool1-0"}
    assert entries[0].severity == "INFO" and entries[-1].severity == "ERROR"
    errors = list(client.list_entries(filter_=query + " AND severity>=ERROR"))
    assert [e.payload for e in errors] == ["oops"]


def test_a_relative_base_output_directory_is_under_the_job_files_folder_for_submit_and_run(
        service: dict, tmp_path: Path) -> None:
    """As relative packageUris are: the local service runs in a folder of its own."""
    code = 'import os, pathlib\npathlib.Path(os.environ["AIP_MODEL_DIR"], "saved.txt").write_text("model")'
    (tmp_path / "project").mkdir()
    spec = write_spec(tmp_path / "project" / "job.yaml", [pool(code=code)],
                      baseOutputDirectory={"outputUriPrefix": "out"})
    submitted = vtrain("submit", str(spec), "--name", "relative-output", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    handle = launch.attach(job_id(submitted.stdout.split()[1]))
    assert handle.wait(timeout=60) == "JOB_STATE_SUCCEEDED"
    saved = tmp_path / "project" / "out" / "model" / "saved.txt"
    assert saved.read_text() == "model"
    saved.unlink()
    ran = vtrain("run", str(spec), "--quiet", cwd=tmp_path)  # on its own, without the service: the same folder
    assert ran.returncode == 0 and saved.read_text() == "model", ran.stdout + ran.stderr
    unwritable = write_spec(tmp_path / "job.yaml", [pool(code="pass")],
                            baseOutputDirectory={"outputUriPrefix": str(spec)})  # a file
    for command in ("submit", "run"):
        refused = vtrain(command, str(unwritable))
        assert refused.returncode == 2 and refused.stderr == (
            f"vtrain: error: baseOutputDirectory.outputUriPrefix: {spec} is a file, not a folder\n")


def test_vtrain_logs_follow_shows_lines_while_the_job_runs(service: dict, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "job.yaml", [pool(trainer="crash.py", image="x")])
    submitted = vtrain("submit", str(spec), "--name", "follow-me")
    assert submitted.returncode == 0, submitted.stderr
    followed = job_id(submitted.stdout.split()[1])
    follower = subprocess.Popen([sys.executable, "-m", "jupyter_ext.cli", "logs", followed, "--follow"],
                                stdout=subprocess.PIPE, text=True)
    assert follower.stdout is not None
    seen = []
    for line in follower.stdout:
        seen.append(line)
        if "heartbeat 2" in line:
            break
    assert launch.attach(followed).state == "JOB_STATE_RUNNING"  # lines arrived while it ran
    assert "[workerpool0-0]" in seen[-1]
    assert vtrain("cancel", followed).returncode == 0
    rest, _ = follower.communicate(timeout=60)  # following ends by itself with the job
    assert follower.returncode == 0
    listed = vtrain("jobs", "--state", "CANCELLED")
    assert followed in listed.stdout and "follow-me" in listed.stdout


def test_requests_without_the_token_are_refused(service: dict) -> None:
    code, body = _request(service["endpoint"], "/v1/projects/local/locations/us-central1/customJobs", None)
    assert code == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    code, _ = _request(service["endpoint"], "/v1/projects/local/locations/us-central1/customJobs", "wrong")
    assert code == 401
    code, _ = _request(service["endpoint"], "/v2/entries:list", None, "POST")
    assert code == 401
    assert oct(Path(service["token_file"]).stat().st_mode & 0o777) == "0o600"


def test_errors_are_google_json(service: dict) -> None:
    token = daemon.read_token()
    code, body = _request(service["endpoint"], "/v1/projects/local/locations/us-central1/customJobs/42", token)
    assert code == 404 and body["error"]["status"] == "NOT_FOUND" and "42" in body["error"]["message"]
    code, body = _request(service["endpoint"], "/v1/projects/local/locations/us-central1/customJobs?filter=foo",
                          token)
    assert code == 400 and body["error"]["status"] == "INVALID_ARGUMENT" and "filter" in body["error"]["message"]


def test_the_service_listens_on_loopback_only(service: dict) -> None:
    port = int(service["endpoint"].rsplit(":", 1)[1])
    listening = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                 if line.split()[3] == "0A"]  # LISTEN
    ours = [fields[1] for fields in listening if int(fields[1].split(":")[1], 16) == port]
    assert ours == [f"0100007F:{port:04X}"]
    assert not any(int(line.split()[1].split(":")[1], 16) == port
                   for line in Path("/proc/net/tcp6").read_text().splitlines()[1:])
    for address in {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}:
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=2).close()


def test_status_json_tells_how_to_reach_the_service(service: dict) -> None:
    done = vtrain("service", "status", "--json")
    info = json.loads(done.stdout)
    assert info["endpoint"] == service["endpoint"] and info["endpoint"].startswith("http://127.0.0.1:")
    assert Path(info["token_file"]).read_text().strip() == daemon.read_token()


def test_a_crashed_service_fails_its_running_job_and_keeps_history(service: dict) -> None:
    finished = aiplatform.CustomJob(display_name="before-crash",
                                    worker_pool_specs=[pool(trainer="echo_env.py", form="sdk")])
    finished.run()
    job = aiplatform.CustomJob(display_name="orphan", worker_pool_specs=[
        pool(trainer="crash.py", form="sdk"), pool(1, trainer="crash.py", form="sdk")])
    job.submit()
    orphan = job_id(job.resource_name)
    wait_state(job, "JOB_STATE_RUNNING")
    # a crash with work under way: both replicas and their grandchildren running, the primary's first line logged
    wait_for(lambda: len(processes_of_job(orphan)) >= 4, 30, "both replicas and their grandchildren to start")
    wait_for(lambda: list(launch.attach(orphan).logs(replica="workerpool0-0")), 30, "the primary's first log line")
    crashed_pid = service["pid"]
    kill_service(service)
    restart_service(service)
    assert service["pid"] != crashed_pid
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_FAILED"
    assert "service stopped while the job was running" in again.gca_resource.error.message
    assert processes_of_job(orphan) == []
    listed = {j.resource_name: j.state.name for j in aiplatform.CustomJob.list()}
    assert listed[finished.resource_name] == "JOB_STATE_SUCCEEDED" and listed[job.resource_name] == "JOB_STATE_FAILED"
    assert [r.text for r in launch.attach(orphan).logs(replica="workerpool0-0")][:1] != []


def test_stopping_the_service_cancels_running_jobs(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="at-stop", worker_pool_specs=[pool(trainer="crash.py", form="sdk")])
    job.submit()
    wait_state(job, "JOB_STATE_RUNNING")
    assert vtrain("service", "stop").stdout.strip() == "stopped"
    assert processes_of_job(job_id(job.resource_name)) == []
    restart_service(service)
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_CANCELLED"
    assert "the local service was stopped" in again.gca_resource.error.message
