"""A finished job's log longer than the read quota lets one reader take in a minute: four replicas
wrote 8,000 lines (eight pages of `entries:list`), and the local service answers 429
RESOURCE_EXHAUSTED beyond 5 requests a minute. `vtrain logs JOB` must show every line exactly once,
in order per replica, reading each page once: after the 429 it keeps the five pages it read and goes
on with the refused one when the quota allows (about a minute), never from the first page again."""

from __future__ import annotations

import subprocess

import pytest
from conftest import cli_log_lines, log_lines, pool, recorded_requests, vtrain

from jupyter_ext import launch
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options

QUOTA, LINES, PAGE = 5, 2000, 1000  # PAGE: the most entries one entries:list answer holds
TASKS = ("workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool1-2")
DEADLINE = 120  # seconds: the quota lets the sixth page go a minute after the first


def test_vtrain_logs_shows_a_log_longer_than_the_read_quota_once() -> None:
    daemon.ensure_running(Options(read_quota=QUOTA, record_requests=True))
    code = f"for n in range({LINES}): print(f'line {{n}}', flush=True)"
    handle = launch.submit({"displayName": "backlog", "jobSpec": {"workerPoolSpecs": [pool(1, code=code),
                                                                                      pool(3, code=code)]}})
    assert handle.wait(timeout=60) == "JOB_STATE_SUCCEEDED", handle.error
    written = {task: [text for _, _, text in log_lines(handle.local_dir, task)] for task in TASKS}
    pages = len(TASKS) * LINES // PAGE
    assert all(len(texts) == LINES for texts in written.values()) and pages > QUOTA
    try:
        done = vtrain("logs", handle.id, timeout=DEADLINE)
    except subprocess.TimeoutExpired as exc:
        shown = cli_log_lines(exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or "")
        pytest.fail(f"vtrain logs did not finish in {DEADLINE} s; it showed {sum(map(len, shown.values()))} "
                    f"of {len(TASKS) * LINES} lines")
    assert done.returncode == 0, done.stderr
    assert cli_log_lines(done.stdout) == written
    statuses = [r["status"] for r in recorded_requests() if r["path"] == "/v2/entries:list"]
    assert 429 in statuses, "the reader never met the quota: the test proves nothing"
    assert statuses.count(200) == pages  # each page read once
