"""Followers against a local service whose entries arrive out of order, as Cloud Logging's do: each
entry becomes readable `--ingestion-delay` plus its own share of `--ingestion-jitter` seconds after
it was written (a replica's entries in order, the replicas' out of order). A follower in this
process and the lab panel's route, both at once, must each show every line exactly once, in order
per replica."""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

import pytest
from pytest_jupyter.jupyter_server import *  # noqa: F403  server fixtures for this module only (conftest_jupyter.py)

from conftest import TRAINERS, follow_like_the_panel, log_lines, pool
from jupyter_ext import launch, states
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options

pytest_plugins = ("conftest_jupyter",)

DELAY, JITTER = 0.3, 1.0


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:
    return module_home


@pytest.fixture(scope="module")
def jittery_service(module_home: Path) -> Iterator[dict[str, Any]]:
    yield daemon.ensure_running(Options(ingestion_delay=DELAY, ingestion_jitter=JITTER))


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"jupyter_ext.handlers": True}}}


async def test_out_of_order_entries_reach_every_follower_once_in_order(jittery_service: dict[str, Any],
                                                                        jp_fetch: Any) -> None:
    printing = [sys.executable, str(TRAINERS / "lines.py"), "30", "1.5"]
    handle = launch.submit({"displayName": "jitter", "jobSpec": {"workerPoolSpecs": [
        pool(1, command=printing), pool(2, command=printing)]}})

    def follow() -> tuple[dict[str, list[str]], int]:
        lines: dict[str, list[str]] = defaultdict(list)
        newest, late = None, 0
        for record in handle.log_reader().follow(lambda: states.is_final(handle.state)):
            lines[record.task_name].append(record.text)
            late += newest is not None and record.timestamp < newest  # readable after a newer entry was read
            newest = max(newest or record.timestamp, record.timestamp)
        return dict(lines), late

    (followed, late), panel = await asyncio.wait_for(
        asyncio.gather(asyncio.to_thread(follow), follow_like_the_panel(jp_fetch, handle.id)), 60)
    assert handle.state == "JOB_STATE_SUCCEEDED", handle.error
    written = {task: [text for _, _, text in log_lines(handle.local_dir, task)]
               for task in ("workerpool0-0", "workerpool1-0", "workerpool1-1")}
    assert all(len(texts) == 30 for texts in written.values())
    assert late > 0, "every entry became readable in order: the test proves nothing"
    assert followed == written
    assert panel == written
