"""The server extension's routes through a real jupyter_server (pytest-jupyter's `jp_fetch`),
against real local jobs run by the local service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  server fixtures for this module only (conftest_jupyter.py)
from tornado.httpclient import HTTPClientError

from conftest import ROOT, async_wait_for, job_status, pool
from jupyter_ext import launch

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
def finished_job(module_home: Path) -> launch.JobHandle:
    """A 3-replica job (chief and two workers) that ran to the end."""
    handle = launch.submit({"displayName": "handlers-3", "jobSpec": {"workerPoolSpecs": [
        pool(1, code=TRAINER), pool(2, code=TRAINER)]}})
    assert handle.wait(timeout=120) == "JOB_STATE_SUCCEEDED", handle.error
    return handle


@pytest.fixture
def jp_server_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The server with the extension on (the handlers module is an extension of its own; the installed
    config enables the package), plus a test's own settings through indirect parametrization."""
    return {"ServerApp": {"jpserver_extensions": {"jupyter_ext.handlers": True}}, **getattr(request, "param", {})}


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
                                                                       finished_job: launch.JobHandle) -> None:
    body = await _json(jp_fetch, "jobs")
    assert body["errors"] == [] and [s["source"] for s in body["sources"]] == ["local"]
    (row,) = [j for j in body["jobs"] if j["id"] == finished_job.id]
    assert row["display_name"] == "handlers-3" and row["state"] == "JOB_STATE_SUCCEEDED" and row["final"]
    assert row["replicas"] == 3 and row["source"] == "local" and row["backend"] == "process"
    assert row["start_time"] and row["end_time"] and row["create_time"]
    assert 0 < row["duration"] < 120 and row["error"] == ""


async def test_detail_is_the_custom_job_and_every_replica_tf_config(jp_fetch: Any, module_home: Path,
                                                                    finished_job: launch.JobHandle) -> None:
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


async def test_logs_page_by_page_with_the_cursor_until_done(jp_fetch: Any, finished_job: launch.JobHandle) -> None:
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


async def test_logs_of_one_replica(jp_fetch: Any, finished_job: launch.JobHandle) -> None:
    page = await _json(jp_fetch, "jobs", finished_job.id, "logs", params={"replica": "workerpool1-1"})
    assert [e["text"] for e in page["entries"]] == [f"line {n} from worker-1" for n in range(LINES)]
    assert page["done"]


@pytest.mark.parametrize("params, field", [
    ({"cursor": "not-a-cursor"}, "cursor"),
    ({"replica": 'x" OR resource.type="ml_job'}, "replica"),
    ({"limit": "0"}, "limit"),
])
async def test_bad_log_parameters_are_400(jp_fetch: Any, finished_job: launch.JobHandle, params: dict[str, str],
                                          field: str) -> None:
    code, body = await _error(jp_fetch, "jobs", finished_job.id, "logs", params=params)
    assert code == 400 and body["message"].startswith(f"{field}:")


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
    assert code == 400 and "already" in error["message"]  # only a running job can be cancelled


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
])
async def test_a_bad_job_id_is_a_404_json_error(jp_fetch: Any, parts: tuple[str, ...], method: str) -> None:
    kwargs: dict[str, Any] = {"body": ""} if method == "POST" else {}
    code, body = await _error(jp_fetch, *parts, method=method, **kwargs)
    assert code == 404 and set(body) <= {"message", "reason"}
    assert parts[1] in body["message"] and "Traceback" not in json.dumps(body)


async def test_vertex_source_without_a_project_is_400(jp_fetch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    code, body = await _error(jp_fetch, "jobs", "123", params={"source": "vertex"})
    assert code == 400 and "no Vertex AI project" in body["message"]
    code, body = await _error(jp_fetch, "jobs", "123", params={"source": "moon"})
    assert code == 400 and body["message"].startswith("source:")


@pytest.mark.parametrize("jp_server_config", [
    {"VertexTrain": {"project": "my-project", "region": "europe-west4", "vertex_timeout": 15}}],
    indirect=True, ids=["vertex-configured"])
async def test_a_failing_vertex_listing_is_reported_not_a_500(jp_fetch: Any, finished_job: launch.JobHandle,
                                                              monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # no credentials here: listing Vertex AI fails, as it does for a user without application default credentials
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-credentials.json"))
    body = await _json(jp_fetch, "jobs")
    assert [s["source"] for s in body["sources"]] == ["local", "vertex"]
    assert body["sources"][1]["parent"] == "projects/my-project/locations/europe-west4"
    (error,) = body["errors"]
    assert error["source"] == "vertex" and error["message"]
    assert finished_job.id in [j["id"] for j in body["jobs"]]  # the local jobs are still listed


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
