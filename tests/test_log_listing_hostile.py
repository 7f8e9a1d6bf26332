"""`entries:list` against heavy filters and hostile log files (issue 15). A regular expression is searched
without captures and refused past a size bound; each page has a time budget, after which it returns what
it found with a token that goes on exactly from there; only the replicas' own regular log files are read,
a line at most MAX_RAW bytes at a time. Listing functions are called directly, and the time budget and a
replica's FIFO are also tried through the running service with raw HTTP."""

from __future__ import annotations

import json
import os
import random
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import job_id, pool, wait_for

from jupyter_ext import paths
from jupyter_ext.errors import FilterError
from jupyter_ext.runner.logs import MAX_LINE, now_rfc3339
from jupyter_ext.service import daemon
from jupyter_ext.service.logs import list_entries, parse_filter
from jupyter_ext.service.logs.files import MAX_RAW, open_log
from jupyter_ext.service.logs.query import MAX_REGEX_PROGRAM

JOBS = "/v1/projects/local/locations/us-central1/customJobs"
MB = 1024 * 1024
HEAVY = "[ab]*a[ab]{990}c"  # 997 RE2 instructions; a line of random a and b defeats RE2's DFA
ORDERS = ["timestamp asc", "timestamp desc"]


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:  # one service for the module's service tests
    return module_home


def stamp(second: int, micro: int = 0) -> str:
    return f"2026-11-21T11:43:{second:02d}.{micro:06d}Z"


def log_text(lines: list[tuple[str, str]]) -> str:
    return "".join(f"{when} stdout {text}\n" for when, text in lines)


def texts(entries: list[dict]) -> list[str]:
    return [e["textPayload"] for e in entries]


def finished_within(seconds: float, call: Callable[[], Any]) -> Any:
    """What `call` returns, if it returns within `seconds`; else the test fails (leaving the call blocked,
    say in opening a FIFO: set free, it could go on to read /dev/zero)."""
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(value=call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still listing after {seconds:g} s")
    assert "value" in result, "the listing raised (see the thread's traceback above)"
    return result["value"]


# ---------------------------------------------------------------- regular expressions

def test_a_regex_of_nested_stars_searches_a_line_at_once() -> None:
    """With captures on, RE2 took ~18 s for this one 400-character line."""
    match = parse_filter('textPayload=~"' + "(a*)*" * 3990 + '"')
    started = time.monotonic()
    assert match({"textPayload": "a" * 400})
    assert time.monotonic() - started < 1


def test_regular_expressions_past_the_size_bound_are_refused_naming_the_filter() -> None:
    assert parse_filter(f'textPayload=~"{HEAVY}"')({"textPayload": "a" + "b" * 990 + "c"})
    second = f'textPayload=~"{HEAVY}" OR textPayload!~'
    text = second + '"x{20}"'
    with pytest.raises(FilterError) as caught:
        parse_filter(text)
    message = str(caught.value)
    assert message.startswith("filter: regular expressions too large") and f"at most {MAX_REGEX_PROGRAM})" in message
    assert message.endswith(f"at position {len(second)}")  # the regular expression that went past
    with pytest.raises(FilterError, match="too large"):  # the bound is for the whole filter, values lists too
        parse_filter(f'textPayload=~("{HEAVY}" OR "{HEAVY}")')


# ---------------------------------------------------------------- the time budget

@pytest.fixture
def awkward(tmp_path: Path) -> list:
    """Three replicas with equal timestamps, lines that are not log lines, a line too long to keep
    (over 3 reads forwards, many blocks backwards) and a half-written last line."""
    job = tmp_path / "jobs" / "123"
    (job / "logs").mkdir(parents=True)
    (job / "logs" / "workerpool0-0.log").write_text(
        log_text([(stamp(1), "a1"), (stamp(3), "a3")]) + "not a log line\n" + f"{stamp(3)} stdout " + "x" * MAX_RAW
        + "\n" + log_text([(stamp(3), "a3b"), (stamp(5), "a5")]) + "\n" + log_text([(stamp(7), "a7")])
        + f"{stamp(8)} stdout half-writ")
    (job / "logs" / "workerpool1-0.log").write_text(
        log_text([(stamp(2), "b2"), (stamp(3), "b3")]) + "y" * (3 * MAX_RAW) + "\n" + log_text([(stamp(6), "b6")]))
    (job / "logs" / "workerpool1-1.log").write_text(
        "z" * (2 * MAX_RAW) + "\n" + log_text([(stamp(3), "c3"), (stamp(4), "c4")]) + "bad-time stdout c?\n"
        + log_text([(stamp(8), "c8")]))
    return [("123", "proj", job, None)]


ALL = ["a1", "b2", "a3", "a3b", "b3", "c3", "c4", "a5", "b6", "a7", "c8"]


def pages_of(sources: list, **kwargs: Any) -> list[list[dict]]:
    pages, token = [], ""
    while True:
        page = list_entries(sources, page_token=token, **kwargs)
        pages.append(page["entries"])
        assert len(pages) < 10_000
        if not (token := page.get("nextPageToken", "")):
            return pages


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("filter_text", ["", 'textPayload=~"^[abc][0-9]"', "NOT textPayload:3",
                                         f'timestamp>="{stamp(3)}" AND timestamp<"{stamp(7)}"'])
def test_pages_cut_short_by_the_time_budget_go_on_exactly_where_they_stopped(awkward: list, order: str,
                                                                             filter_text: str) -> None:
    whole = list_entries(awkward, filter_text=filter_text, order_by=order, page_size=1000, seconds=float("inf"))
    assert "nextPageToken" not in whole and whole["entries"]
    expected = [t for t in (ALL if order.endswith("asc") else ALL[::-1]) if t in texts(whole["entries"])]
    assert texts(whole["entries"]) == expected
    # no time at all: each page reads one line (or piece of a long one) and says where to go on
    pages = pages_of(awkward, filter_text=filter_text, order_by=order, page_size=1000, seconds=0)
    assert max(len(page) for page in pages) == 1 and len(pages) > len(expected)
    assert [e for page in pages for e in page] == whole["entries"]


def test_a_partial_descending_page_goes_on_the_same_under_an_ingestion_delay(awkward: list) -> None:
    """Entries not ingested yet are left out, with what their replica wrote after them, in both orders."""
    whole = list_entries(awkward, page_size=1000)["entries"]
    hidden = {e["insertId"] for e in whole if e["textPayload"] in ("a3b", "c4")}

    def visible(at: int, identity: str) -> bool:
        job, trial, task, offset = identity.split("/")
        return f"{task}-{int(offset):012d}" not in hidden
    up = [e for page in pages_of(awkward, visible=visible, seconds=0) for e in page]
    down = [e for page in pages_of(awkward, visible=visible, order_by="timestamp desc", seconds=0) for e in page]
    assert texts(up) == ["a1", "b2", "a3", "b3", "c3", "b6"]
    assert down == up[::-1]


# ---------------------------------------------------------------- hostile log files

@pytest.fixture
def hostile(tmp_path: Path) -> list:
    """A job whose replica put FIFOs, symlinks (to /dev/zero, to another job's log), a directory and
    a file not named after a task among its logs."""
    other = tmp_path / "other" / "logs"
    other.mkdir(parents=True)
    (other / "workerpool0-0.log").write_text(log_text([(stamp(1), "another job's secret")]))
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "workerpool0-0.log").write_text(log_text([(stamp(1), "mine"), (stamp(2), "mine too")]))
    os.mkfifo(logs / "workerpool0-1.log")
    os.mkfifo(logs / "evil.log")
    (logs / "workerpool0-2.log").symlink_to("/dev/zero")
    (logs / "workerpool0-3.log").symlink_to(other / "workerpool0-0.log")
    (logs / "workerpool0-4.log").mkdir()
    (logs / "notes.log").write_text(log_text([(stamp(1), "not a replica's")]))
    return [("7", "proj", tmp_path / "job", None)]


@pytest.mark.parametrize("order", ORDERS)
def test_only_the_replicas_own_regular_log_files_are_read(hostile: list, order: str) -> None:
    for filter_text in ("", 'resource.labels.task_name="workerpool0-1"'):
        page = finished_within(10, lambda: list_entries(hostile, filter_text=filter_text, order_by=order))
        assert texts(page["entries"]) == ([] if filter_text else ["mine", "mine too"][::1 if "asc" in order else -1])
    assert open_log(hostile[0][2] / "logs" / "workerpool0-2.log") is None  # never /dev/zero


@pytest.mark.parametrize("order", ORDERS)
def test_a_line_without_end_grows_no_memory(tmp_path: Path, order: str) -> None:
    """128 MB with no newline (a sparse file: no disk) between two lines, and again at the end."""
    path = tmp_path / "job" / "logs" / "workerpool0-0.log"
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        f.write(log_text([(stamp(1), "before")]).encode())
        f.seek(128 * MB, os.SEEK_CUR)
        f.write(b"\n" + log_text([(stamp(2), "after")]).encode())
        f.seek(128 * MB, os.SEEK_CUR)
        f.write(b"x")
    sources = [("7", "proj", tmp_path / "job", None)]
    tracemalloc.start()
    try:
        pages = pages_of(sources, order_by=order, seconds=float("inf"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [texts(page) for page in pages] == [["before", "after"][::1 if "asc" in order else -1]]
    assert peak < 8 * MB, f"listing took {peak / MB:.0f} MB"


# ---------------------------------------------------------------- through the service

class Api:
    """Raw HTTP to the module's service, with its token."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint, self.token = endpoint, daemon.read_token()

    def call(self, method: str, path: str, body: Any = None, timeout: float = 60) -> tuple[int, Any]:
        request = urllib.request.Request(self.endpoint + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def run(self, name: str, code: str) -> str:
        status, answer = self.call("POST", JOBS, {"displayName": name, "jobSpec": {"workerPoolSpecs": [
            pool(code=code)]}})
        assert status == 200, answer
        job = job_id(answer["name"])
        wait_for(lambda: self.call("GET", f"{JOBS}/{job}")[1]["state"] == "JOB_STATE_SUCCEEDED", 60,
                 f"job {job} to succeed")
        return job

    def entries(self, filter_text: str, **body: Any) -> tuple[int, Any]:
        return self.call("POST", "/v2/entries:list", {"resourceNames": ["projects/local"], "filter": filter_text,
                                                      **body}, timeout=120)

    def listing(self, filter_text: str, **body: Any) -> list[dict]:
        """Every page of a listing, following its tokens."""
        pages, token = [], ""
        while True:
            status, page = self.entries(filter_text, pageToken=token, **body)
            assert status == 200, page
            pages.append(page)
            if not (token := page.get("nextPageToken", "")):
                return pages


@pytest.fixture(scope="module")
def api(service: dict) -> Api:
    return Api(service["endpoint"])


def _peak_memory(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def test_a_regex_past_the_bound_is_one_400_line_naming_the_filter(api: Api) -> None:
    status, answer = api.entries(f'textPayload=~"{HEAVY}" AND textPayload=~"(a|b){{30}}"')
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT", answer
    message = answer["error"]["message"]
    assert message.startswith("filter: regular expressions too large") and "\n" not in message


def test_heavy_listings_come_in_partial_pages_and_other_log_readers_are_served_meanwhile(api: Api) -> None:
    """Six lines of 256 KB that take RE2 ~2 s each, between seven that match: two such listings (as many
    as the service's log threads) answer a page every PAGE_SECONDS or so, and a light listing issued
    while they go on is answered before they end. Their pages add up to the matching lines, once each."""
    witness = api.run("witness", "print('witness line')")
    heavy = api.run("heavy", "print('start')")
    rng = random.Random(15)
    markers = [f"marker {n} a" + "b" * 990 + "c" for n in range(7)]
    lines = [markers[0]]
    for n in range(1, 7):
        lines += ["".join(rng.choices("ab", k=MAX_LINE - 100)), markers[n]]
    with open(paths.jobs_dir() / heavy / "logs" / "workerpool0-0.log", "a") as log:
        log.write("".join(f"{now_rfc3339()} stdout {line}\n" for line in lines))

    heavy_filter = f'resource.labels.job_id="{heavy}" textPayload=~"{HEAVY}"'
    listings: list[list[dict]] = [[], []]
    first_pages = threading.Barrier(3)

    def read_all(pages: list[dict]) -> None:
        status, page = api.entries(heavy_filter, pageSize=100)
        pages.append(page)
        first_pages.wait(120)
        while token := page.get("nextPageToken"):
            status, page = api.entries(heavy_filter, pageSize=100, pageToken=token)
            assert status == 200, page
            pages.append(page)

    threads = [threading.Thread(target=read_all, args=(pages,)) for pages in listings]
    for thread in threads:
        thread.start()
    first_pages.wait(120)
    started = time.monotonic()
    light = api.listing(f'resource.labels.job_id="{witness}"')
    took = time.monotonic() - started
    still_going = [thread.is_alive() for thread in threads]
    for thread in threads:
        thread.join(300)
    assert [texts(page["entries"]) for page in light] == [["witness line"]]
    assert still_going == [True, True], f"the light listing waited {took:.1f} s, until a heavy listing ended"
    for pages in listings:
        assert "nextPageToken" in pages[0] and len(pages[0]["entries"]) < len(markers)  # a partial first page
        assert [e["textPayload"] for page in pages for e in page["entries"]] == markers


def test_a_replicas_fifo_symlinks_and_endless_line_in_its_logs_hold_up_no_listing(api: Api, service: dict) -> None:
    code = ("import os\n"
            "os.mkfifo('logs/workerpool0-1.log'); os.mkfifo('logs/evil.log')\n"
            "os.symlink('/dev/zero', 'logs/workerpool0-2.log')\n"
            "with open('logs/workerpool0-3.log', 'wb') as f: f.truncate(128 * 2**20)  # no newline\n"
            "print('done')")
    job = api.run("hostile", code)
    before = _peak_memory(service["pid"])
    for order in ORDERS:
        for filter_text in (f'resource.labels.job_id="{job}"', ""):
            pages = finished_within(60, lambda: api.listing(filter_text, orderBy=order, pageSize=1000))
            mine = [e["textPayload"] for page in pages for e in page["entries"]
                    if e["resource"]["labels"]["job_id"] == job]
            assert mine == ["done"]
    grown = _peak_memory(service["pid"]) - before
    assert grown < 64 * MB, f"the service grew by {grown / MB:.0f} MB"
