"""`vtrain service start`: the data folder's pruning policy checked and shown, service.log kept small."""

from __future__ import annotations

import json

import pytest
from conftest import vtrain_in_process, wait_for

from jupyter_ext import gc, paths
from jupyter_ext.service import daemon


def test_a_bad_policy_fails_the_start_and_a_good_one_is_in_the_status(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(gc.ENV_KEEP, "all")
    assert vtrain_in_process(capsys, "service", "start") == (
        2, "", "vtrain: error: VTRAIN_GC_KEEP: 'all' is not a whole number of items to keep\n")
    assert daemon.status() is None  # nothing started

    monkeypatch.delenv(gc.ENV_KEEP)
    monkeypatch.setenv(gc.ENV_OLDER_THAN, "30d")
    monkeypatch.setenv(gc.ENV_MAX_SIZE, "20G")
    code, _, err = vtrain_in_process(capsys, "service", "start")
    assert code == 0, err
    code, out, _ = vtrain_in_process(capsys, "service", "status", "--json")
    assert code == 0
    assert json.loads(out)["gc"] == {"older_than": 30 * gc.DAY, "keep": None, "max_bytes": 20 * 1024 ** 3}


def test_no_policy_is_null_in_the_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert vtrain_in_process(capsys, "service", "start")[0] == 0
    code, out, _ = vtrain_in_process(capsys, "service", "status", "--json")
    assert code == 0 and json.loads(out)["gc"] is None


def test_a_start_moves_a_big_service_log_aside(capsys: pytest.CaptureFixture[str]) -> None:
    log = paths.private_dir(daemon.runtime_dir()) / "service.log"
    log.write_bytes(b"an old line\n" * (daemon.LOG_BYTES // 12 + 1))
    assert vtrain_in_process(capsys, "service", "start")[0] == 0
    old = log.with_name("service.log.1")
    assert old.read_bytes().startswith(b"an old line\n") and old.stat().st_size > daemon.LOG_BYTES
    wait_for(lambda: "local Vertex AI service on" in log.read_text(), 10, "the service to say where it listens")
    assert log.stat().st_size < 10_000

    small = log.stat().st_size
    assert vtrain_in_process(capsys, "service", "stop")[0] == 0
    assert vtrain_in_process(capsys, "service", "start")[0] == 0  # a small log is kept and goes on
    wait_for(lambda: log.read_text().count("local Vertex AI service on") == 2, 10, "the second start in the log")
    assert log.stat().st_size > small
