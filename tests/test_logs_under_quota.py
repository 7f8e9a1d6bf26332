"""Following a job's logs inside Cloud Logging's limits: the local service answers 429
RESOURCE_EXHAUSTED beyond 20 `entries:list` requests a minute and shows each entry only 2 s after
it was written, while three followers read the same job at once, each in its own process as a user
would have them: a notebook's JobMonitor, the lab panel's server routes, and `vtrain logs --follow`.
Each must get every line exactly once, in order per replica, including the lines a replica wrote
in its last half second before it failed, and none may hammer the quota after a 429."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  server fixtures for this module only (conftest_jupyter.py)

from conftest import TRAINERS, cli_log_lines, follow_like_the_panel, log_lines, pool
from jupyter_ext import launch
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options

pytest_plugins = ("conftest_jupyter",)

QUOTA, DELAY = 20, 2.0
MONITOR = """
import json, sys
from jupyter_ext import launch
from widgets.monitor import JobMonitor
monitor = JobMonitor(launch.attach(sys.argv[1]), max_lines=10_000)
monitor.wait()
lines = {}
for line in monitor.buffer.lines():
    lines.setdefault(line.task_name, []).append(line.text)
print(json.dumps({"state": monitor.state, "lines": lines}))
"""


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:
    return module_home


@pytest.fixture(scope="module")
def limited_service(module_home: Path) -> Iterator[dict[str, Any]]:
    info = daemon.ensure_running(Options(read_quota=QUOTA, ingestion_delay=DELAY, record_requests=True))
    yield info


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"jupyter_ext.handlers": True}}}


def _longest_429_runs() -> dict[int, int]:
    """For each reading process (by the pid in its user agent): the most 429s it got in a row."""
    record = daemon.runtime_dir() / "requests.jsonl"
    runs: dict[int, int] = defaultdict(int)
    current: dict[int, int] = defaultdict(int)
    for row in map(json.loads, record.read_text().splitlines()):
        m = re.search(r"pid/(\d+)", row["agent"])
        if row["path"] != "/v2/entries:list" or not m:
            continue
        pid = int(m[1])
        current[pid] = current[pid] + 1 if row["status"] == 429 else 0
        runs[pid] = max(runs[pid], current[pid])
    return dict(runs)


async def test_three_followers_get_every_line_once_within_the_read_quota(limited_service: dict[str, Any],
                                                                         jp_fetch: Any) -> None:
    def printing(count: int, seconds: int, *extra: str) -> list[str]:
        return [sys.executable, str(TRAINERS / "lines.py"), str(count), str(seconds), *extra]

    # four replicas print 2,000 lines over 40 s; the evaluator fails at 38 s, after a burst of lines in its
    # last half second (the job fails then: the others are stopped before their last lines)
    job = {"displayName": "under-quota", "jobSpec": {"workerPoolSpecs": [
        pool(1, command=printing(500, 40)), pool(2, command=printing(500, 40)), {},
        pool(1, command=printing(500, 38, "--fail-with", "3"))]}}
    handle = launch.submit(job)
    monitor = subprocess.Popen([sys.executable, "-c", MONITOR, handle.id], stdout=subprocess.PIPE, text=True)
    cli = subprocess.Popen([sys.executable, "-m", "jupyter_ext.cli", "logs", handle.id, "--follow"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        panel = await asyncio.wait_for(follow_like_the_panel(jp_fetch, handle.id), 300)
        monitor_out, _ = monitor.communicate(timeout=300)
        cli_out, cli_err = cli.communicate(timeout=300)
    finally:
        for process in (monitor, cli):
            if process.poll() is None:
                process.kill()
    assert handle.state == "JOB_STATE_FAILED" and "workerpool3-0" in handle.error
    written = {task: [text for _, _, text in log_lines(handle.local_dir, task)]
               for task in ("workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool3-0")}
    assert all(written.values())
    assert len(written["workerpool3-0"]) == 500  # its last burst is on disk: the followers must show it
    seen = {"notebook monitor": json.loads(monitor_out)["lines"], "lab panel": panel,
            "vtrain logs --follow": cli_log_lines(cli_out)}
    for follower, lines in seen.items():
        assert set(lines) == set(written), follower
        for task, texts in written.items():
            assert lines[task] == texts, f"{follower}: {task} differs ({len(lines[task])} of {len(texts)} lines)"
    runs = _longest_429_runs()
    assert set(runs) == {monitor.pid, cli.pid, os.getpid()}  # the panel's routes run in this process
    assert any(runs.values()), "no follower met the quota: the test proves nothing"
    assert max(runs.values()) <= 2, runs  # after a 429, at most one retry that is refused too
    assert cli.returncode == 0, cli_err


def test_beyond_the_quota_the_service_answers_as_cloud_logging_does(limited_service: dict[str, Any]) -> None:
    from google.api_core.exceptions import TooManyRequests
    from google.cloud import logging as cloud_logging
    from google.oauth2.credentials import Credentials

    client = cloud_logging.Client(project="quota-probe", credentials=Credentials(token=daemon.read_token()),
                                  _use_grpc=False, client_options={"api_endpoint": limited_service["endpoint"]})
    query = 'resource.type="ml_job" AND timestamp>="2020-01-01T00:00:00Z"'
    for _ in range(QUOTA):
        list(client.list_entries(filter_=query))
    with pytest.raises(TooManyRequests) as refused:
        list(client.list_entries(filter_=query))
    assert refused.value.code == 429 and "Quota exceeded" in refused.value.message
    assert 0 < int(refused.value.response.headers["Retry-After"]) <= 60
    assert refused.value.response.json()["error"]["status"] == "RESOURCE_EXHAUSTED"


def test_an_entry_is_readable_only_after_the_ingestion_delay(limited_service: dict[str, Any]) -> None:
    from datetime import datetime, timezone

    from conftest import wait_for

    # a project of its own: the read quota counts per project, and this test reads a few times a second
    handle = launch.submit({"displayName": "one-line", "jobSpec": {"workerPoolSpecs": [
        pool(1, code="import time; print('hi', flush=True); time.sleep(10)")]}}, launch.Target(project="ingestion"))
    log = handle.local_dir / "logs" / "workerpool0-0.log"
    wait_for(lambda: log.exists() and log.read_text(), 60, "the replica's line in its log file")
    assert list(handle.logs()) == []  # written just now: not ingested yet
    wait_for(lambda: [r.text for r in handle.logs()] == ["hi"], 30, "the line to be ingested", poll=0.5)
    ((stamp, _, _),) = log_lines(handle.local_dir, "workerpool0-0")
    written = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert (datetime.now(timezone.utc) - written).total_seconds() >= DELAY


def test_the_service_says_how_it_runs_and_keeps_it(limited_service: dict[str, Any]) -> None:
    from conftest import vtrain

    status = json.loads(vtrain("service", "status", "--json").stdout)
    assert status["options"] == {"read_quota": QUOTA, "ingestion_delay": DELAY, "ingestion_jitter": 0.0,
                                 "record_requests": True}
    done = vtrain("service", "start", "--read-quota", "5")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "already runs" in done.stderr and "vtrain service stop" in done.stderr
    assert f"with --read-quota={QUOTA} --ingestion-delay={DELAY:g} --record-requests;" in done.stderr  # its flags
    assert vtrain("service", "start").returncode == 0  # no flags: the running one is fine
