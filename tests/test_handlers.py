"""The server extension's routes through a real jupyter_server (pytest-jupyter's `jp_fetch`),
against real local jobs run by the local service, and Vertex AI's job list served by a slow
stand-in (a tiny HTTP server answering the REST calls the real job client makes)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlparse

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  server fixtures for this module only (conftest_jupyter.py)
from tornado.httpclient import HTTPClientError

from conftest import ROOT, async_wait_for, job_status, log_lines, pool
from jupyter_ext import launch
from jupyter_ext.catalog import DEFAULT_REGION
from jupyter_ext.handlers import VERTEX_PAGE_SIZE
from jupyter_ext.launch.logs import STAMP, ReadPace

pytest_plugins = ("conftest_jupyter",)

LINES = 4
TRAINER = f"""\
import json, os
task = json.loads(os.environ["TF_CONFIG"])["task"]
for n in range({LINES}):
    print(f"line {{n}} from {{task['type']}}-{{task['index']}}", flush=True)
"""


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:  # one local service for the whole module
    return module_home


@pytest.fixture(scope="module")
def finished_job(module_home: Path) -> launch.Handle:
    """A 3-replica job (chief and two workers) that ran to the end."""
    handle = launch.submit({"displayName": "handlers-3", "jobSpec": {"workerPoolSpecs": [
        pool(1, code=TRAINER), pool(2, code=TRAINER)]}})
    assert handle.wait(timeout=120) == "JOB_STATE_SUCCEEDED", handle.error
    return handle


PROJECT, REGION = "stand-in-project", "europe-west4"


class VertexStandIn(ThreadingHTTPServer):
    """Vertex AI's customJobs list and get, `delay` seconds slow, on 127.0.0.1. It ignores
    authentication, answers pages of `pageSize` newest first with `nextPageToken`, and counts
    the list requests and the most that were in flight at once."""

    daemon_threads = True

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _StandInRequest)
        self.jobs = jobs
        self.delay = 0.0
        self.lists: list[dict[str, list[str]]] = []  # each list request's query
        self.answered = 0
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def list_page(self, query: dict[str, list[str]]) -> dict[str, Any]:
        with self.lock:
            self.lists.append(query)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.delay)
        start = int(query.get("pageToken", ["0"])[0])
        size = int(query.get("pageSize", ["0"])[0]) or len(self.jobs)
        page: dict[str, Any] = {"customJobs": self.jobs[start:start + size]}
        if start + size < len(self.jobs):
            page["nextPageToken"] = str(start + size)
        with self.lock:
            self.in_flight -= 1
            self.answered += 1
        return page


class _StandInRequest(BaseHTTPRequestHandler):
    server: VertexStandIn

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        url = urlparse(self.path)
        collection = f"/v1/projects/{PROJECT}/locations/{REGION}/customJobs"
        if url.path == collection:
            self._answer(200, self.server.list_page(parse_qs(url.query)))
            return
        job = next((j for j in self.server.jobs if f"/v1/{j['name']}" == url.path), None)
        if job is None:
            self._answer(404, {"error": {"code": 404, "message": f"{url.path} not found", "status": "NOT_FOUND"}})
        else:
            self._answer(200, job)

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def vertex_job(n: int, pools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The stand-in's job number n (0 is the newest), as the REST API answers it."""
    return {"name": f"projects/{PROJECT}/locations/{REGION}/customJobs/{9000 + n}", "displayName": f"vertex-{n}",
            "state": "JOB_STATE_SUCCEEDED", "createTime": f"2024-01-01T{23 - n // 60:02d}:{59 - n % 60:02d}:00Z",
            "jobSpec": {"workerPoolSpecs": pools or [pool(1)]}}


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[VertexStandIn]:
    """70 jobs on Vertex AI's stand-in; the server's Vertex AI is it (see jp_server_config). Without the
    SDK's credentials the job client asks for application-default ones: anonymous here."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.setattr(google.auth, "default", lambda *args, **kwargs: (AnonymousCredentials(), PROJECT))
    server = VertexStandIn([vertex_job(n) for n in range(70)])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def google_paced(monkeypatch: pytest.MonkeyPatch) -> str:
    """The module's local service behind a relay, as the server's Vertex AI: to the workbench it is not
    the local service, so its log readers take Google's pace."""
    from conftest import relayed_service
    from jupyter_ext.service import daemon

    daemon.ensure_running()
    endpoint = relayed_service()
    monkeypatch.setenv("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", str(daemon.token_file()))
    return endpoint


@pytest.fixture
def jp_server_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The server with the extension on (the handlers module is an extension of its own; the installed
    config enables the package); Vertex AI is the stand-in, or the local service on Google's pace, when a
    test uses it; plus a test's own settings through indirect parametrization."""
    config: dict[str, Any] = {"ServerApp": {"jpserver_extensions": {"jupyter_ext.handlers": True}}}
    if "stand_in" in request.fixturenames:
        config["VertexTrain"] = {"project": PROJECT, "region": REGION,
                                 "endpoint": request.getfixturevalue("stand_in").endpoint}
    if "google_paced" in request.fixturenames:
        config["VertexTrain"] = {"project": launch.LOCAL_PROJECT, "region": DEFAULT_REGION,
                                 "endpoint": request.getfixturevalue("google_paced")}
    for section, traits in getattr(request, "param", {}).items():
        config[section] = {**config.get(section, {}), **traits}
    return config


async def _json(jp_fetch: Any, *parts: str, **kwargs: Any) -> Any:
    response = await jp_fetch("vertex-train", *parts, **kwargs)
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return json.loads(response.body)


async def _error(jp_fetch: Any, *parts: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("vertex-train", *parts, **kwargs)
    body = info.value.response.body if info.value.response else b"{}"
    return info.value.code, json.loads(body)


async def test_list_shows_each_local_job_with_state_replicas_and_times(jp_fetch: Any,
                                                                       finished_job: launch.Handle) -> None:
    body = await _json(jp_fetch, "jobs")
    assert body["errors"] == [] and [s["source"] for s in body["sources"]] == ["local"]
    (row,) = [j for j in body["jobs"] if j["id"] == finished_job.id]
    assert row["display_name"] == "handlers-3" and row["state"] == "JOB_STATE_SUCCEEDED" and row["final"]
    assert row["replicas"] == 3 and row["source"] == "local" and row["backend"] == "process"
    assert row["start_time"] and row["end_time"] and row["create_time"]
    assert 0 < row["duration"] < 120 and row["error"] == ""


async def test_a_stopped_local_service_stays_stopped_while_the_panel_refreshes(jp_fetch: Any,
                                                                              finished_job: launch.Handle) -> None:
    """`vtrain service stop` (to start it again with other limits): the panel's refreshes say so and leave it
    stopped; the next start brings the jobs back."""
    from jupyter_ext.service import daemon

    try:
        assert daemon.stop()
        for _ in range(2):
            body = await _json(jp_fetch, "jobs")
            assert body["errors"] == [{"source": "local", "message": "the local service was stopped (vtrain service "
                                                                     "stop); it starts again with the next local job, "
                                                                     "or vtrain service start"}]
        assert daemon.status() is None
    finally:
        daemon.ensure_running()
    body = await _json(jp_fetch, "jobs")
    assert body["errors"] == [] and finished_job.id in [j["id"] for j in body["jobs"]]


async def test_detail_is_the_custom_job_and_every_replica_tf_config(jp_fetch: Any, module_home: Path,
                                                                    finished_job: launch.Handle) -> None:
    body = await _json(jp_fetch, "jobs", finished_job.id)
    assert body["job"]["name"] == finished_job.name and body["job"]["displayName"] == "handlers-3"
    assert len(body["job"]["jobSpec"]["workerPoolSpecs"]) == 2
    assert body["summary"]["state"] == "JOB_STATE_SUCCEEDED"
    assert body["address_style"] == "process" and body["addresses_recorded"]
    replicas = body["replicas"]
    assert [r["task_name"] for r in replicas] == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    tasks = [(r["TF_CONFIG"]["task"]["type"], r["TF_CONFIG"]["task"]["index"]) for r in replicas]
    assert tasks == [("chief", 0), ("worker", 0), ("worker", 1)]
    cluster = replicas[0]["TF_CONFIG"]["cluster"]
    assert cluster["chief"] == [replicas[0]["address"]]
    assert cluster["worker"] == [replicas[1]["address"], replicas[2]["address"]]
    assert all(r["address"].startswith("127.0.0.1:") for r in replicas)
    assert replicas[2]["CLUSTER_SPEC"]["task"] == {"type": "workerpool1", "index": 1}
    # the addresses are the ones the replicas really had (recorded by the runner)
    status = job_status(module_home / "jobs" / finished_job.id)
    assert [r["address"] for r in replicas] == [r["address"] for r in status["replicas"]]


async def test_detail_never_holds_the_jobs_env_values(jp_fetch: Any) -> None:
    """The page (and a screenshot of it) shows `NAME` and ***, never the value."""
    handle = launch.submit({"displayName": "handlers-env", "jobSpec": {"workerPoolSpecs": [
        pool(1, env={"API_TOKEN": "s3cr3t-Value"}, code="print('hello')")]}})
    assert handle.wait(timeout=120) == "JOB_STATE_SUCCEEDED", handle.error
    response = await jp_fetch("vertex-train", "jobs", handle.id)
    assert b"s3cr3t-Value" not in response.body
    body = json.loads(response.body)
    masked = [{"name": "API_TOKEN", "value": "***"}]
    assert body["job"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] == masked
    assert body["replicas"][0]["CLUSTER_SPEC"]["job"]["workerPoolSpecs"][0]["containerSpec"]["env"] == masked


async def test_detail_has_every_replica_pytorch_variables(jp_fetch: Any, finished_job: launch.Handle) -> None:
    replicas = (await _json(jp_fetch, "jobs", finished_job.id))["replicas"]
    primary_host, primary_port = replicas[0]["address"].rsplit(":", 1)
    assert [(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in replicas] == [(primary_host, primary_port)] * 3
    assert [(r["RANK"], r["WORLD_SIZE"]) for r in replicas] == [("0", "3"), ("1", "3"), ("2", "3")]


async def test_logs_page_by_page_with_the_cursor_until_done(jp_fetch: Any, finished_job: launch.Handle) -> None:
    seen: list[dict[str, Any]] = []
    cursor, pages = "", 0
    while True:
        page = await _json(jp_fetch, "jobs", finished_job.id, "logs", params={"cursor": cursor, "limit": 5})
        assert len(page["entries"]) <= 5
        seen += page["entries"]
        cursor, pages = page["next_cursor"], pages + 1
        if page["done"]:
            break
        assert pages < 20
    assert pages >= 3  # 12 lines in pages of 5
    texts = sorted(e["text"] for e in seen)
    expected = sorted(f"line {n} from {task}" for n in range(LINES) for task in ("chief-0", "worker-0", "worker-1"))
    assert texts == expected  # every line once, none twice
    assert {e["replica"] for e in seen} == {"workerpool0-0", "workerpool1-0", "workerpool1-1"}
    assert [e["timestamp"] for e in seen] == sorted(e["timestamp"] for e in seen)
    assert len({e["insert_id"] for e in seen}) == len(seen)
    # following from the last cursor: nothing new, still done
    again = await _json(jp_fetch, "jobs", finished_job.id, "logs", params={"cursor": cursor})
    assert again["entries"] == [] and again["done"] and again["state"] == "JOB_STATE_SUCCEEDED"


async def test_logs_of_one_replica(jp_fetch: Any, finished_job: launch.Handle) -> None:
    page = await _json(jp_fetch, "jobs", finished_job.id, "logs", params={"replica": "workerpool1-1"})
    assert [e["text"] for e in page["entries"]] == [f"line {n} from worker-1" for n in range(LINES)]
    assert page["done"]


@pytest.mark.parametrize("params, field", [
    ({"cursor": "not-a-cursor"}, "cursor"),
    ({"replica": 'x" OR resource.type="ml_job'}, "replica"),
    ({"limit": "0"}, "limit"),
])
async def test_bad_log_parameters_are_400(jp_fetch: Any, finished_job: launch.Handle, params: dict[str, str],
                                          field: str) -> None:
    code, body = await _error(jp_fetch, "jobs", finished_job.id, "logs", params=params)
    assert code == 400 and body["message"].startswith(f"{field}:")


def _append_line(log: Path, stamp: str, text: str) -> None:
    """A line in a replica's log file as the runner writes it."""
    with open(log, "a") as out:
        out.write(f"{stamp} stdout {text}\n")


async def test_on_googles_pace_the_panel_reads_late_entries_and_is_told_to_wait(jp_fetch: Any,
                                                                                google_paced: str) -> None:
    handle = launch.submit({"displayName": "late-entry", "jobSpec": {"workerPoolSpecs": [
        pool(1, code="print('first', flush=True)"),
        pool(1, code="import time; time.sleep(1); print('last', flush=True)")]}})
    assert handle.wait(timeout=60) == "JOB_STATE_SUCCEEDED", handle.error
    floor = ReadPace.of(launch.Session.of(launch.Target())).floor
    local = await _json(jp_fetch, "jobs", handle.id, "logs")
    assert [e["text"] for e in local["entries"]] == ["first", "last"] and local["next_poll_ms"] == floor * 1000 < 1000

    page = await _json(jp_fetch, "jobs", handle.id, "logs", params={"source": "vertex"})
    assert [e["text"] for e in page["entries"]] == ["first", "last"]
    assert not page["done"] and page["next_poll_ms"] >= 5000  # Google's floor, not the panel's own second
    # an entry of the first replica that Cloud Logging ingests late: stamped before the last one read
    (first, _, _), = log_lines(handle.local_dir, "workerpool0-0")
    (last, _, _), = log_lines(handle.local_dir, "workerpool1-0")
    middle = datetime.strptime(first, STAMP) + (datetime.strptime(last, STAMP) - datetime.strptime(first, STAMP)) / 2
    _append_line(handle.local_dir / "logs" / "workerpool0-0.log", middle.strftime(STAMP), "late")
    page = await _json(jp_fetch, "jobs", handle.id, "logs", params={"source": "vertex", "cursor": page["next_cursor"]})
    assert [e["text"] for e in page["entries"]] == ["late"]  # read in the overlap of the panel's first read


async def test_cancel_stops_a_running_job(jp_fetch: Any) -> None:
    handle = launch.submit({"displayName": "to-cancel", "jobSpec": {"workerPoolSpecs": [
        pool(1, code="import time; print('started', flush=True); time.sleep(300)"),
        pool(2, code="import time; time.sleep(300)")]}})
    await async_wait_for(lambda: handle.state == "JOB_STATE_RUNNING", 60, "the job to run")
    body = await _json(jp_fetch, "jobs", handle.id, "cancel", method="POST", body="")
    assert body["summary"]["id"] == handle.id
    assert body["summary"]["state"] in ("JOB_STATE_RUNNING", "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    assert handle.wait(timeout=60) == "JOB_STATE_CANCELLED"
    code, error = await _error(jp_fetch, "jobs", handle.id, "cancel", method="POST", body="")
    assert code == 400 and error["message"].startswith(f"CustomJob {handle.id} is already JOB_STATE_CANCELLED")


@pytest.mark.parametrize("parts, method", [
    (("jobs",), "GET"),
    (("jobs", "123"), "GET"),
    (("jobs", "123", "logs"), "GET"),
    (("jobs", "123", "cancel"), "POST"),
])
async def test_a_request_without_the_token_is_refused(jp_fetch: Any, parts: tuple[str, ...], method: str) -> None:
    kwargs: dict[str, Any] = {"body": ""} if method == "POST" else {}
    code, _ = await _error(jp_fetch, *parts, method=method, headers={"Authorization": ""}, **kwargs)
    assert code == 403
    code, _ = await _error(jp_fetch, *parts, method=method, headers={"Authorization": "token wrong"}, **kwargs)
    assert code == 403


@pytest.mark.parametrize("parts, method", [
    (("jobs", "4242424242424242424"), "GET"),
    (("jobs", "no-such-job"), "GET"),
    (("jobs", "not a job; id"), "GET"),
    (("jobs", "4242424242424242424", "logs"), "GET"),
    (("jobs", "4242424242424242424", "cancel"), "POST"),
    (("jobs", "50%off"), "GET"),
])
async def test_a_bad_job_id_is_a_404_json_error(jp_fetch: Any, parts: tuple[str, ...], method: str) -> None:
    kwargs: dict[str, Any] = {"body": ""} if method == "POST" else {}
    code, body = await _error(jp_fetch, *parts, method=method, **kwargs)
    assert code == 404 and set(body) <= {"message", "reason"}
    # the job named as the user wrote it: not the service's request URL, no doubled %
    assert body["message"] == f"CustomJob {parts[1]} does not exist"
    assert "http" not in body["message"] and "Traceback" not in json.dumps(body)


async def test_vertex_source_without_a_project_is_400(jp_fetch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    code, body = await _error(jp_fetch, "jobs", "123", params={"source": "vertex"})
    assert code == 400 and "no Vertex AI project" in body["message"]
    code, body = await _error(jp_fetch, "jobs", "123", params={"source": "moon"})
    assert code == 400 and body["message"].startswith("source:")


@pytest.mark.parametrize("jp_server_config", [
    {"VertexTrain": {"project": "my-project", "region": "europe-west4", "vertex_timeout": 15}}],
    indirect=True, ids=["vertex-configured"])
async def test_a_failing_vertex_listing_is_reported_not_a_500(jp_fetch: Any, finished_job: launch.Handle,
                                                              monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # no credentials here: listing Vertex AI fails, as it does for a user without application default credentials
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-credentials.json"))
    body = await _json(jp_fetch, "jobs")
    assert [s["source"] for s in body["sources"]] == ["local", "vertex"]
    assert body["sources"][1]["parent"] == "projects/my-project/locations/europe-west4"
    (error,) = body["errors"]
    assert error["source"] == "vertex" and error["message"]
    assert finished_job.id in [j["id"] for j in body["jobs"]]  # the local jobs are still listed


@pytest.mark.parametrize("jp_server_config", [
    {"VertexTrain": {"project": "my-project", "region": "europe-west4", "endpoint": "http://127.0.0.1:1"}}],
    indirect=True, ids=["vertex-unreachable"])
async def test_a_vertex_endpoint_that_does_not_answer_is_a_502_naming_it(jp_fetch: Any, monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("ya29.not-sent-anywhere\n")
    monkeypatch.setenv("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", str(token))
    code, body = await _error(jp_fetch, "jobs", "123", params={"source": "vertex"})
    assert code == 502 and body["message"] == "cannot reach the API endpoint http://127.0.0.1:1: connection refused"
    assert "ya29" not in json.dumps(body)


def test_the_installed_config_enables_the_server_extension() -> None:
    """jupyter-config/server-config is installed into etc/jupyter/jupyter_server_config.d: every
    module it enables must be a server extension, and jupyter_ext must point at the built front end."""
    import importlib

    config = json.loads((ROOT / "jupyter-config" / "server-config" / "jupyter_ext.json").read_text())
    enabled = config["ServerApp"]["jpserver_extensions"]
    assert enabled == {"jupyter_ext": True}
    package = importlib.import_module("jupyter_ext")
    points = package._jupyter_server_extension_points()
    assert points == [{"module": "jupyter_ext.handlers"}]
    assert hasattr(importlib.import_module(points[0]["module"]), "_load_jupyter_server_extension")
    assert package._jupyter_labextension_paths() == [{"src": "labextension", "dest": "jupyter-vertex-train"}]
    package_json = json.loads((ROOT / "labextension" / "package.json").read_text())
    assert package_json["name"] == "jupyter-vertex-train"
    assert package_json["jupyterlab"]["outputDir"] == "../jupyter_ext/labextension"


# ---- Vertex AI's list, through its stand-in ---------------------------------------------

def _vertex_rows(body: dict[str, Any]) -> list[str]:
    return [j["display_name"] for j in body["jobs"] if j["source"] == "vertex"]


@pytest.mark.parametrize("jp_server_config", [{"VertexTrain": {"vertex_cache": 3}}], indirect=True,
                         ids=["vertex_cache=3"])
async def test_parallel_refreshes_share_one_vertex_call_and_its_answer_is_reused(
        jp_fetch: Any, stand_in: VertexStandIn) -> None:
    stand_in.delay = 2
    bodies = await asyncio.gather(*(_json(jp_fetch, "jobs") for _ in range(10)))
    assert len(stand_in.lists) == 1 and stand_in.most_in_flight == 1
    assert all(b["errors"] == [] and len(_vertex_rows(b)) == VERTEX_PAGE_SIZE for b in bodies)
    started = time.monotonic()
    await _json(jp_fetch, "jobs")  # within vertex_cache: the same answer, at once
    assert len(stand_in.lists) == 1 and time.monotonic() - started < stand_in.delay  # not waiting for Vertex
    await asyncio.sleep(3)
    again = await _json(jp_fetch, "jobs")  # past vertex_cache: listed again
    assert len(stand_in.lists) == 2 and len(_vertex_rows(again)) == VERTEX_PAGE_SIZE


@pytest.mark.parametrize("jp_server_config", [{"VertexTrain": {"vertex_timeout": 0.5}}], indirect=True,
                         ids=["vertex_timeout=0.5"])
async def test_a_slow_vertex_is_an_error_entry_and_its_answer_comes_later(
        jp_fetch: Any, stand_in: VertexStandIn, finished_job: launch.Handle) -> None:
    stand_in.delay = 3
    for _ in range(2):  # the second request awaits the same call: no second one
        started = time.monotonic()
        body = await _json(jp_fetch, "jobs")
        assert time.monotonic() - started < stand_in.delay  # answered at vertex_timeout, not when Vertex answers
        (error,) = body["errors"]
        assert error["source"] == "vertex" and "Vertex AI is slow" in error["message"]
        assert finished_job.id in [j["id"] for j in body["jobs"]] and _vertex_rows(body) == []
        assert body["sources"][1]["next_page_token"] == ""
    deadline = time.monotonic() + 15
    while body["errors"]:  # the call went on: once it ends, its answer is listed
        assert time.monotonic() < deadline, body["errors"]
        await asyncio.sleep(0.2)
        body = await _json(jp_fetch, "jobs")
    assert len(_vertex_rows(body)) == VERTEX_PAGE_SIZE and finished_job.id in [j["id"] for j in body["jobs"]]
    assert len(stand_in.lists) == 1 and stand_in.most_in_flight == 1


async def test_vertex_jobs_come_a_page_at_a_time(jp_fetch: Any, stand_in: VertexStandIn) -> None:
    body = await _json(jp_fetch, "jobs")
    assert _vertex_rows(body) == [f"vertex-{n}" for n in range(VERTEX_PAGE_SIZE)]  # newest first
    assert stand_in.lists[0]["pageSize"] == [str(VERTEX_PAGE_SIZE)]
    vertex = body["sources"][1]
    assert vertex["parent"] == f"projects/{PROJECT}/locations/{REGION}" and vertex["next_page_token"]
    row = next(j for j in body["jobs"] if j["display_name"] == "vertex-0")
    assert row["id"] == "9000" and row["replicas"] == 1 and row["console_url"].startswith("https://console.")
    page = await _json(jp_fetch, "jobs", params={"source": "vertex", "page_token": vertex["next_page_token"]})
    assert [j["display_name"] for j in page["jobs"]] == [f"vertex-{n}" for n in range(VERTEX_PAGE_SIZE, 70)]
    assert page["next_page_token"] == "" and {j["source"] for j in page["jobs"]} == {"vertex"}
    assert len(stand_in.lists) == 2
    code, error = await _error(jp_fetch, "jobs", params={"page_token": "50"})
    assert code == 400 and error["message"].startswith("page_token:")


async def test_clicks_on_load_more_while_vertex_is_slow_share_one_call(jp_fetch: Any, stand_in: VertexStandIn) -> None:
    token = (await _json(jp_fetch, "jobs"))["sources"][1]["next_page_token"]
    stand_in.delay = 2
    pages = await asyncio.gather(*(_json(jp_fetch, "jobs", params={"source": "vertex", "page_token": token})
                                   for _ in range(8)))
    assert len(stand_in.lists) == 2 and stand_in.most_in_flight == 1  # the first page, then one call for the next
    assert all([j["display_name"] for j in page["jobs"]] == [f"vertex-{n}" for n in range(VERTEX_PAGE_SIZE, 70)]
               for page in pages)


async def test_vertex_job_detail_has_null_ranks_outside_the_training_cluster(
        jp_fetch: Any, stand_in: VertexStandIn) -> None:
    stand_in.jobs.append(vertex_job(99, [pool(1), pool(2), {}, pool(1)]))  # an evaluator in pool 3
    body = await _json(jp_fetch, "jobs", "9099", params={"source": "vertex"})
    assert body["address_style"] == "cloud" and body["summary"]["source"] == "vertex"
    replicas = {r["task_name"]: r for r in body["replicas"]}
    assert [(r["RANK"], r["WORLD_SIZE"]) for r in replicas.values()] == [("0", "3"), ("1", "3"), ("2", "3"),
                                                                        (None, None)]
    primary = replicas["workerpool0-0"]["address"]
    assert replicas["workerpool3-0"]["MASTER_ADDR"] == primary.rsplit(":", 1)[0]
    assert {r["MASTER_PORT"] for r in replicas.values()} == {"2222"}
