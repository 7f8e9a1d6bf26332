"""The local service through the real clients: google-cloud-aiplatform (REST) and google-cloud-logging."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from google.api_core import exceptions as api_exceptions
from google.cloud import aiplatform
from google.cloud import logging as cloud_logging
from google.oauth2.credentials import Credentials

from conftest import TRAINERS, processes_of_job, vtrain, write_spec
from jupyter_ext import launch
from jupyter_ext.service import daemon


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, fast_sdk_polling: None) -> Path:  # one service for the whole module
    return module_home


@pytest.fixture(scope="module")
def service(sdk_service: dict) -> dict:
    return sdk_service


def _pool(script: str, count: int = 1, *args: str) -> dict:
    """SDK-style pool running a test trainer (absolute paths: replicas start in the job's folder)."""
    return {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": count,
            "container_spec": {"image_uri": "local/test-trainer",
                               "command": [sys.executable, str(TRAINERS / script)], "args": list(args)}}


def _wait_state(job: aiplatform.CustomJob, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while job.state.name != state:
        assert time.monotonic() < deadline, f"still {job.state.name}, expected {state}"
        time.sleep(0.2)


def _job_id(job: aiplatform.CustomJob) -> str:
    return job.resource_name.rsplit("/", 1)[1]


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
    job = aiplatform.CustomJob(display_name="sdk-three", worker_pool_specs=[_pool("echo_env.py"),
                                                                             _pool("echo_env.py", 2)])
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_SUCCEEDED" and again.display_name == "sdk-three"
    resource = again.gca_resource
    assert resource.start_time and resource.end_time and resource.create_time <= resource.start_time
    assert job.resource_name in [j.resource_name for j in aiplatform.CustomJob.list()]
    # the SDK's default base output directory (under the staging bucket) is kept on this machine
    entries = list(launch.attach(_job_id(job)).logs(replica="workerpool1-1"))
    env = json.loads(entries[0].text)["env"]
    assert env["AIP_MODEL_DIR"].startswith(str(daemon.paths.data_dir() / "gcs" / "local-bucket"))
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}


def test_a_bad_job_raises_the_sdks_error_with_our_message(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="bad", worker_pool_specs=[_pool("echo_env.py", 2)])
    with pytest.raises(api_exceptions.BadRequest, match=r"workerPoolSpecs\[0\]\.replicaCount: the primary pool"):
        job.run()


def test_cancel_a_long_job_leaves_nothing_running(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="long", worker_pool_specs=[_pool("crash.py"), _pool("crash.py", 2)])
    job.submit()
    _wait_state(job, "JOB_STATE_RUNNING")
    job.cancel()
    _wait_state(job, "JOB_STATE_CANCELLED")
    assert job.gca_resource.error.code == 1  # google.rpc.Code.CANCELLED, as Vertex reports it
    assert processes_of_job(_job_id(job)) == []


def test_logging_client_lists_one_replicas_lines_in_order(service: dict) -> None:
    code = "import sys\nfor i in range(300): print(f'line {i}')\nprint('oops', file=sys.stderr)"
    pool = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x", "command": [sys.executable, "-c", code]}}
    job = aiplatform.CustomJob(display_name="lines", worker_pool_specs=[_pool("echo_env.py"), pool])
    job.run()
    client = cloud_logging.Client(project="local", credentials=Credentials(token=daemon.read_token()),
                                  client_options={"api_endpoint": service["endpoint"]}, _use_grpc=False)
    query = (f'resource.type="ml_job" AND resource.labels.job_id="{_job_id(job)}" '
             'AND resource.labels.task_name="workerpool1-0"')
    entries = list(client.list_entries(filter_=query, order_by=cloud_logging.ASCENDING, page_size=120))
    assert [e.payload for e in entries] == [f"line {i}" for i in range(300)] + ["oops"]
    assert {e.resource.labels["task_name"] for e in entries} == {"workerpool1-0"}
    assert entries[0].severity == "INFO" and entries[-1].severity == "ERROR"
    errors = list(client.list_entries(filter_=query + " AND severity>=ERROR"))
    assert [e.payload for e in errors] == ["oops"]


def test_vtrain_logs_follow_shows_lines_while_the_job_runs(service: dict, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "job.yaml", [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                                               "containerSpec": {"imageUri": "x", "command": [
                                                   sys.executable, str(TRAINERS / "crash.py")]}}])
    submitted = vtrain("submit", str(spec), "--name", "follow-me")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[1].rsplit("/", 1)[1]
    follower = subprocess.Popen([sys.executable, "-m", "jupyter_ext.cli", "logs", job_id, "--follow"],
                                stdout=subprocess.PIPE, text=True)
    assert follower.stdout is not None
    seen = []
    for line in follower.stdout:
        seen.append(line)
        if "heartbeat 2" in line:
            break
    assert launch.attach(job_id).state == "JOB_STATE_RUNNING"  # lines arrived while it ran
    assert "[workerpool0-0]" in seen[-1]
    assert vtrain("cancel", job_id).returncode == 0
    rest, _ = follower.communicate(timeout=60)  # following ends by itself with the job
    assert follower.returncode == 0
    listed = vtrain("jobs", "--state", "CANCELLED")
    assert job_id in listed.stdout and "follow-me" in listed.stdout


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
    job = aiplatform.CustomJob(display_name="orphan", worker_pool_specs=[_pool("crash.py"), _pool("crash.py", 1)])
    job.submit()
    _wait_state(job, "JOB_STATE_RUNNING")
    time.sleep(1)
    os.kill(service["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while daemon.status() is not None and time.monotonic() < deadline:  # the kill takes a moment
        time.sleep(0.05)
    restarted = daemon.ensure_running()
    assert restarted["pid"] != service["pid"]
    aiplatform.init(api_endpoint=restarted["endpoint"], credentials=Credentials(token=daemon.read_token()))
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_FAILED"
    assert "service stopped while the job was running" in again.gca_resource.error.message
    assert processes_of_job(_job_id(job)) == []
    names = {j.display_name for j in aiplatform.CustomJob.list()}
    assert {"sdk-three", "lines", "orphan"} <= names
    assert [r.text for r in launch.attach(_job_id(job)).logs(replica="workerpool0-0")][:1] != []
    service.update(restarted)


def test_stopping_the_service_cancels_running_jobs(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="at-stop", worker_pool_specs=[_pool("crash.py")])
    job.submit()
    _wait_state(job, "JOB_STATE_RUNNING")
    assert vtrain("service", "stop").stdout.strip() == "stopped"
    assert processes_of_job(_job_id(job)) == []
    info = daemon.ensure_running()
    aiplatform.init(api_endpoint=info["endpoint"], credentials=Credentials(token=daemon.read_token()))
    again = aiplatform.CustomJob.get(job.resource_name)
    assert again.state.name == "JOB_STATE_CANCELLED"
    assert "the local service was stopped" in again.gca_resource.error.message
    service.update(info)
