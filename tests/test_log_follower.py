"""The log follower's parts that decide what is read again and how often: the cursor (overlap and
de-duplication), the pace per place, the shared read budget after a 429, and a follower's polls on
Google's pace against the real local service (timing is controlled with a fake clock: the one place
a stand-in is needed)."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from typing import Any

import pytest
from conftest import log_lines, pool

from jupyter_ext import launch, states
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.launch import logs
from jupyter_ext.launch.logs import LogCursor, LogReader, ReadBudget, ReadPace
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options


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
    cursor = LogCursor(overlap=3.0, start="2026-01-01T00:00:07.000000Z", token="next-page")  # a listing under way
    cursor.admit("2026-01-01T00:00:10.000000Z", "workerpool0-0-000000000042")
    again = LogCursor.decode(cursor.encode())
    assert (again.since, again.seen, again.start, again.token) == (cursor.since, cursor.seen, cursor.start, "next-page")
    forged = LogCursor(start='2026-01-01T00:00:07.000000Z" OR resource.type="ml_job')  # its start goes into the filter
    # cursors that would fail later, when the window is computed or an entry admitted
    odd = [LogCursor(since=logs.EPOCH), LogCursor(since=0), LogCursor(token=5)]  # type: ignore[arg-type]
    for text in ("not-a-cursor", forged.encode(), *(cursor.encode() for cursor in odd)):
        with pytest.raises(WorkbenchError, match="^cursor: not a cursor this server gave$"):
            LogCursor.decode(text)


def test_a_reader_reads_with_its_own_overlap_whoever_made_the_cursor() -> None:
    google = launch.Session.of(launch.Target(project="p", local=False))
    for cursor in (None, LogCursor.decode(""), LogCursor.decode(LogCursor(overlap=0.0).encode())):
        reader = LogReader(google, "q", cursor=cursor)
        assert reader.cursor.overlap == ReadPace.of(google).overlap > 0


def test_google_is_polled_slowly_and_the_local_service_quickly() -> None:
    google = ReadPace.of(launch.Session.of(launch.Target(project="p", local=False)))
    assert google.floor >= 5.0 and google.quota is not None and google.quota < 60  # ~60 reads a minute
    assert google.overlap > 0 and google.settle > 0  # Cloud Logging ingests late and out of order
    local = ReadPace.of(launch.Session.of(launch.Target()))
    assert local.floor < 1.0 and local.quota is None and local.overlap == 0 and local.settle == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, seconds: float, stop: threading.Event | None) -> None:
        self.waits.append(seconds)
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


def google_paced(project: str = launch.LOCAL_PROJECT) -> launch.Session:
    """A session on the running local service behind a relay: to the workbench a Vertex AI endpoint, not
    the local service, so its readers take Google's pace."""
    from google.oauth2.credentials import Credentials

    from conftest import relayed_service

    endpoint = relayed_service()
    session = launch.Session.of(launch.Target(project=project, local=False, endpoint=endpoint,
                                              credentials=Credentials(token=daemon.read_token())))
    assert session.local_service() is None and ReadPace.of(session).floor >= 5.0
    return session


def entries_list_requests() -> list[dict]:
    """The `entries:list` requests the local service recorded (`record_requests`)."""
    rows = map(json.loads, (daemon.runtime_dir() / "requests.jsonl").read_text().splitlines())
    return [row for row in rows if row["path"] == "/v2/entries:list"]


def _finished_on_googles_pace(name: str, lines: int, workers: int) -> tuple[Any, Any, FakeClock, ReadPace]:
    """A finished job whose primary and workers print `lines` lines each, and a session, a fake clock
    and the pace of a follower reading it from Google's endpoint."""
    daemon.ensure_running(Options(record_requests=True))
    code = f"for n in range({lines}): print(f'line {{n}}', flush=True)"
    handle = launch.submit({"displayName": name, "jobSpec": {"workerPoolSpecs": [pool(1, code=code),
                                                                                 pool(workers, code=code)]}})
    assert handle.wait(timeout=60) == "JOB_STATE_SUCCEEDED", handle.error
    session = google_paced()
    return handle, session, FakeClock(), ReadPace.of(session)


def test_a_follower_on_googles_pace_polls_all_replicas_at_once_and_stops_after_a_quiet_tail() -> None:
    handle, session, clock, pace = _finished_on_googles_pace("paced", 3, workers=2)
    reader = LogReader(session, launch.log_filter(handle.id), clock=clock)
    before = len(entries_list_requests())
    finals: list[float] = []

    def is_final() -> bool:
        finals.append(clock.now)  # read once per poll, before it
        return states.is_final(handle.state)

    lines: dict[str, list[str]] = defaultdict(list)
    for record in reader.follow(is_final):
        lines[record.task_name].append(record.text)
    tasks = ("workerpool0-0", "workerpool1-0", "workerpool1-1")
    assert lines == {task: [text for _, _, text in log_lines(handle.local_dir, task)] for task in tasks}
    assert len(entries_list_requests()) - before == len(finals) >= 3  # one request per poll for all three replicas
    assert min(clock.waits) >= pace.floor  # never faster than Google's floor
    # every line came with the first poll; it stops at the first poll after `settle` of quiet, not before
    quiet = [at - finals[0] for at in finals]
    assert quiet[-2] < pace.settle <= quiet[-1]


def written_lines(handle: launch.Handle, *tasks: str) -> dict[str, list[str]]:
    return {task: [text for _, _, text in log_lines(handle.local_dir, task)] for task in tasks}


def by_replica(records: list[logs.LogRecord]) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = defaultdict(list)
    for record in records:
        lines[record.task_name].append(record.text)
    return dict(lines)


def test_a_429_on_a_later_page_keeps_the_pages_before_it_and_the_next_read_goes_on_with_that_page() -> None:
    # three requests a minute, and a window of five pages: two replicas of 25 lines, 10 entries a page
    daemon.ensure_running(Options(read_quota=3, record_requests=True))
    code = "for n in range(25): print(f'line {n}', flush=True)"
    handle = launch.submit({"displayName": "pages", "jobSpec": {"workerPoolSpecs": [pool(1, code=code),
                                                                                    pool(1, code=code)]}})
    assert handle.wait(timeout=60) == "JOB_STATE_SUCCEEDED", handle.error
    reader, clock = LogReader(handle.session, launch.log_filter(handle.id), page_size=10), FakeClock()

    def poll(**how: bool) -> list[logs.LogRecord]:
        with pytest.MonkeyPatch.context() as patch:  # the reader's time only: the service's start waits for real
            patch.setattr(logs.time, "monotonic", clock.monotonic)
            patch.setattr(logs.time, "sleep", clock.sleep)
            return reader.poll(**how)

    first = poll(wait=False)
    assert [r["status"] for r in entries_list_requests()] == [200, 200, 200, 429]
    assert len(first) == 30 and reader.held  # the three pages read before the 429 are kept
    # the quota lifted (the service again, without one) and the reader's back-off over
    daemon.stop()
    daemon.ensure_running(Options(record_requests=True))
    before = len(entries_list_requests())
    clock.now += 120.0
    rest = poll()
    assert len(entries_list_requests()) - before == 2 and not reader.held  # pages 4 and 5: on from the refused one
    assert max(r.timestamp for r in first) <= min(r.timestamp for r in rest)
    assert by_replica(first + rest) == written_lines(handle, "workerpool0-0", "workerpool1-0")  # each line once


def test_a_follower_reads_a_backlog_a_few_pages_a_poll_and_hands_each_poll_out_at_once() -> None:
    handle, session, clock, pace = _finished_on_googles_pace("backlog", 40, workers=1)
    reader = LogReader(session, launch.log_filter(handle.id), page_size=10, clock=clock)  # 8 pages
    records: list[logs.LogRecord] = []
    handed_out: list[int] = []  # entries handed out before each poll

    def is_final() -> bool:
        handed_out.append(len(records))
        return True

    for record in reader.follow(is_final):
        records.append(record)
    step = 10 * pace.pages
    assert 0 < step < 80  # more pages than one poll reads
    assert handed_out[:80 // step + 2] == [*range(0, 80, step), 80]
    assert min(clock.waits) >= pace.floor
    assert by_replica(records) == written_lines(handle, "workerpool0-0", "workerpool1-0")


def test_the_panel_is_told_to_poll_at_googles_floor_and_after_a_429_when_the_quota_allows() -> None:
    from jupyter_ext.handlers import read_log_page

    daemon.ensure_running(Options(read_quota=3))  # entries:list requests a minute and project
    handle = launch.submit({"displayName": "hint", "jobSpec": {"workerPoolSpecs": [pool(1, code="print('hi')")]}})
    assert handle.wait(timeout=60) == "JOB_STATE_SUCCEEDED", handle.error
    google = launch.attach(handle.id, google_paced().target)
    pages, cursor = [], LogCursor()
    for _ in range(4):
        pages.append(read_log_page(google, None, cursor))
        cursor = LogCursor.decode(pages[-1]["next_cursor"])
    assert [e["text"] for page in pages for e in page["entries"]] == ["hi"]
    assert [page["next_poll_ms"] for page in pages[:3]] == [5000] * 3  # Google's floor
    # the fourth read met the quota: nothing now, and the panel waits for the server's Retry-After
    assert not pages[3]["done"] and pages[3]["next_poll_ms"] > 50_000
