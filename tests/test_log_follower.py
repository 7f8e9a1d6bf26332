"""The log follower's parts that decide what is read again and how often: the cursor (overlap and
de-duplication), the pace per place, and the shared read budget after a 429 (timing is controlled
with a fake clock: the one place a stand-in is needed)."""

from __future__ import annotations

import pytest

from jupyter_ext import launch
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.launch import logs
from jupyter_ext.launch.logs import LogCursor, ReadBudget, ReadPace


def test_the_cursor_reads_late_entries_in_its_window_once() -> None:
    cursor = LogCursor(overlap=30.0)
    assert [cursor.admit(s, i) for s, i in (("2026-01-01T00:00:10.000000Z", "a"),
                                            ("2026-01-01T00:00:20.000000Z", "b"))] == [True, True]
    assert cursor.window_start() == "2025-12-31T23:59:50.000000Z"
    # the next poll reads from the window's start again: what was read is dropped, a late entry is kept
    assert [cursor.admit(s, i) for s, i in (("2026-01-01T00:00:10.000000Z", "a"),
                                            ("2026-01-01T00:00:15.000000Z", "late"),
                                            ("2026-01-01T00:00:20.000000Z", "b"))] == [False, True, False]
    assert cursor.since == "2026-01-01T00:00:20.000000Z"


def test_without_overlap_the_cursor_goes_on_from_the_newest_entry() -> None:
    cursor = LogCursor()
    assert cursor.window_start() == "1970-01-01T00:00:00Z"
    cursor.admit("2026-01-01T00:00:10.000000Z", "a")
    cursor.admit("2026-01-01T00:01:00.000000Z", "b")
    cursor.prune()
    assert cursor.window_start() == "2026-01-01T00:01:00.000000Z" and set(cursor.seen) == {"b"}
    assert not cursor.admit("2026-01-01T00:01:00.000000Z", "b")  # same timestamp, read already


def test_the_cursor_survives_its_text_form_and_refuses_anything_else() -> None:
    cursor = LogCursor(overlap=3.0)
    cursor.admit("2026-01-01T00:00:10.000000Z", "workerpool0-0-000000000042")
    again = LogCursor.decode(cursor.encode())
    assert (again.since, again.seen, again.overlap) == (cursor.since, cursor.seen, cursor.overlap)
    with pytest.raises(WorkbenchError, match="^cursor: not a cursor this server gave$"):
        LogCursor.decode("not-a-cursor")


def test_google_is_polled_slowly_and_the_local_service_quickly() -> None:
    google = ReadPace.of(launch.Session.of(launch.Target(project="p", local=False)))
    assert google.floor >= 5.0 and google.quota is not None and google.quota < 60  # ~60 reads a minute
    assert google.overlap > 0 and google.settle > 0  # Cloud Logging ingests late and out of order
    local = ReadPace.of(launch.Session.of(launch.Target()))
    assert local.floor < 1.0 and local.quota is None and local.overlap == 0 and local.settle == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_429_holds_every_reader_and_halves_the_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(logs.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(logs.time, "sleep", clock.sleep)
    budget = ReadBudget(None)  # the local service: no known limit
    for _ in range(10):
        assert budget.acquire()
    assert clock.now == 1000.0  # unlimited: no waiting
    budget.throttled(retry_after=5.0)
    assert budget.per_minute == 5.0  # half of what was sent in the last minute
    budget.acquire()
    # not at Retry-After (1005) yet: 10 requests of the last minute are more than 5 a minute
    assert clock.now == pytest.approx(1060.0)
    clock.now += 120.0
    budget.acquire()
    assert budget.per_minute > 5.0  # quiet minutes give the rate back, step by step
