"""Cloud Logging `entries.list` over replica log files: filters, entries, pages."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jupyter_ext.runner.logs import LogLine
from jupyter_ext.errors import FilterError
from jupyter_ext.service.logs import line_to_entry, list_entries, parse_filter, pinned

JOB = "123"
GCLOUD = f'resource.type="ml_job" AND resource.labels.job_id="{JOB}"'


def entry(text: str = "hello", *, task: str = "workerpool0-0", stream: str = "stdout",
          stamp: str = "2026-11-21T11:43:34.960652Z", offset: int = 10, trial: str | None = None) -> dict:
    return line_to_entry(JOB, "proj", task, offset, LogLine(stamp, stream, text), trial)


def matches(text: str, e: dict | None = None) -> bool:
    return parse_filter(text)(entry() if e is None else e)


def write_log(job_dir: Path, task: str, lines: list[tuple[str, str, str]], tail: str = "") -> Path:
    path = job_dir / "logs" / f"{task}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{stamp} {stream} {text}\n" for stamp, stream, text in lines) + tail)
    return path


def stamp(second: int, micro: int = 0) -> str:
    return f"2026-11-21T11:43:{second:02d}.{micro:06d}Z"


def all_pages(sources: list, **kwargs: object) -> list[dict]:
    entries, token, seen = [], "", 0
    while True:
        page = list_entries(sources, page_token=token, **kwargs)
        entries += page["entries"]
        seen += 1
        assert seen < 100
        if "nextPageToken" not in page:
            return entries
        assert page["entries"], "a page with a next token has entries"
        token = page["nextPageToken"]


# ---------------------------------------------------------------- filters

@pytest.mark.parametrize("text, expected", [
    ('resource.type="ml_job"', True),
    ('resource.type="cloudml_job"', False),
    ('resource.type!="cloudml_job"', True),
    ('resource.type!="ml_job"', False),
    ('resource.labels.task_name>"workerpool0-"', True),
    ('resource.labels.task_name>="workerpool0-0"', True),
    ('resource.labels.task_name<"workerpool0-0"', False),
    ('resource.labels.task_name<="workerpool0-0"', True),
    ('resource.labels.task_name<"workerpool1"', True),
    ("textPayload:ell", True),
    ("textPayload:ELL", True),  # string comparisons are case-insensitive
    ("textPayload:xyz", False),
    ("textPayload:*", True),
    ("jsonPayload:*", False),
    ('textPayload=~"^h.l+o$"', True),
    ('textPayload!~"^h"', False),
    ("resource.type=ml_job", True),  # bare value
    ("resource.type = ml_job", True),
    ("hello", True),  # a global restriction: any field has it
    ('"ml_job"', True),
    ("goodbye", False),
])
def test_each_operator(text: str, expected: bool) -> None:
    assert matches(text) is expected


def test_quotes_escapes_and_quoted_path_segments() -> None:
    e = entry('say "hi"\\there')
    assert matches(r'textPayload="say \"hi\"\\there"', e)
    assert matches(r'textPayload:"\u0022hi"', e)
    assert matches('labels."ml.googleapis.com/task_name"="workerpool0-0"')
    assert matches('"labels"."ml.googleapis.com/task_name":pool0')
    assert not matches('labels."ml.googleapis.com/task_name"="workerpool1-0"')
    assert matches('labels."ml.googleapis.com/trial_id"="7"', entry(trial="7"))
    assert not matches('labels."ml.googleapis.com/trial_id":*')
    spaced = entry("a b (c) = d")
    assert matches('textPayload="a b (c) = d"', spaced)


def test_missing_fields_never_match_but_not_of_them_does() -> None:
    for op in ("=", "!=", "<", "<=", ">", ">=", ":"):
        assert not matches(f'jsonPayload.nothing{op}"x"')
    assert matches('NOT jsonPayload.nothing="x"')
    assert matches('-jsonPayload.nothing:*')
    assert not matches("NOT textPayload:*")


def test_precedence_is_the_logging_languages() -> None:
    # Cloud Logging's documented example: "a" OR NOT "b" AND NOT "c" OR "d" == ("a" OR (NOT "b")) AND ((NOT "c") OR "d")
    def truth(a: bool, b: bool, c: bool, d: bool) -> bool:
        text = " ".join(w for w, on in (("alpha", a), ("beta", b), ("gamma", c), ("delta", d)) if on)
        return matches('"alpha" OR NOT "beta" AND NOT "gamma" OR "delta"', entry(text or "none"))
    for bits in range(16):
        a, b, c, d = (bool(bits & 1 << i) for i in range(4))
        assert truth(a, b, c, d) == ((a or not b) and (not c or d)), (a, b, c, d)
    # NOT binds tightest
    assert matches('NOT textPayload:xyz OR textPayload:xyz')
    assert not matches('NOT (textPayload:hello OR textPayload:xyz)')
    # parentheses group; the client's appended ` AND timestamp>=...` applies to the whole OR
    assert not matches('textPayload:hello OR textPayload:xyz AND timestamp>="2027-01-01T00:00:00Z"')
    assert matches('textPayload:xyz OR (textPayload:hello AND timestamp>="2026-01-01T00:00:00Z")')
    assert not matches('(textPayload:xyz OR textPayload:hello) AND NOT resource.type="ml_job"')


def test_implicit_and() -> None:
    assert matches('resource.type="ml_job" textPayload:hello')
    assert not matches('resource.type="ml_job" textPayload:xyz')
    assert not matches("hello goodbye")
    assert matches("hello (goodbye OR ml_job)")
    assert matches('resource.type=("cloudml_job" OR "ml_job")')
    assert not matches('resource.type=("cloudml_job" OR "other")')


def test_empty_filter_matches_everything() -> None:
    assert matches("") and matches("   ")
    assert pinned("", "resource.labels.job_id") is None


@pytest.mark.parametrize("text, position, words", [
    ('resource.type=', 14, "expected a value"),
    ('(resource.type="ml_job"', 0, "unclosed '('"),
    ('textPayload="abc', 12, "unterminated string"),
    ('a=1 AND AND b=2', 8, "unexpected AND"),
    ('a=1 OR', 6, "found the end"),
    ('a=1 )', 4, "unexpected ')'"),
    ('=1', 0, "expected a field name"),
    ('timestamp>="yesterday"', 11, "not an RFC 3339 timestamp"),
    ('severity>=LOUD', 10, "unknown severity"),
    ('textPayload=~"("', 13, "regular expression"),
])
def test_syntax_errors_name_the_problem_and_position(text: str, position: int, words: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(text)
    assert caught.value.position == position
    assert words in str(caught.value) and f"at position {position}" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_filters_gcloud_builds() -> None:
    w0, w1 = entry(task="workerpool0-0"), entry(task="workerpool1-0")
    other_job = line_to_entry("456", "proj", "workerpool0-0", 10, LogLine(stamp(1), "stdout", "x"))
    assert parse_filter(GCLOUD)(w0) and parse_filter(GCLOUD)(w1) and not parse_filter(GCLOUD)(other_job)
    one = parse_filter(GCLOUD + ' AND resource.labels.task_name="workerpool1-0"')
    assert one(w1) and not one(w0)
    legacy = parse_filter(f'(resource.type="ml_job" OR resource.type="cloudml_job") AND resource.labels.job_id="{JOB}" '
                          'AND (resource.labels.task_name="master-replica-0" OR labels.task_name="master-replica-0")')
    assert legacy(entry(task="master-replica-0")) and not legacy(w0)
    # stream-logs' polling bounds
    at = "2026-11-21T11:43:34.960652Z"
    poll = parse_filter(f'{GCLOUD} AND ((timestamp="{at}" AND insertId>"workerpool0-0-000000000010") '
                        f'OR timestamp>"{at}") AND timestamp<"2026-11-21T11:50:00.000000+00:00"')
    assert not poll(w0) and poll(entry(offset=11)) and poll(entry(stamp="2026-11-21T11:43:34.960653Z", offset=1))


@pytest.mark.parametrize("bound, expected", [
    ('timestamp>="2026-11-21T11:43:34Z"', True),
    ('timestamp>"2026-11-21T11:43:34Z"', True),
    ('timestamp>"2026-11-21T11:43:34.960652Z"', False),
    ('timestamp>="2026-11-21T11:43:34.960652Z"', True),
    ('timestamp>"2026-11-21T11:43:34.960651999Z"', True),
    ('timestamp>"2026-11-21T11:43:34.96065200Z"', False),
    ('timestamp="2026-11-21T11:43:34.9606520Z"', True),
    ('timestamp<"2026-11-21T11:43:35Z"', True),
    ('timestamp<="2026-11-21T11:43:34.96Z"', False),
    ('timestamp>="2026-11-21T12:43:34.960652+01:00"', True),  # the same instant in another zone
    ('timestamp>"2026-11-21T12:43:34.960652+0100"', False),  # the client's strftime("%z") form
    ('timestamp>"2026-11-21T06:43:34-05:00"', True),
    ('timestamp>=2026-11-21T11:43:35Z', False),  # bare
    ('timestamp>="1970-01-01T01:00:00.000000000Z"', True),  # gcloud's zero
    ('receiveTimestamp<"2026-11-22T00:00:00Z"', True),
])
def test_timestamps_compare_as_times(bound: str, expected: bool) -> None:
    assert matches(bound) is expected


def test_severity_compares_by_level() -> None:
    out, err = entry(stream="stdout"), entry(stream="stderr")
    assert out["severity"] == "INFO" and err["severity"] == "ERROR"
    assert parse_filter("severity>=ERROR")(err) and not parse_filter("severity>=ERROR")(out)
    assert parse_filter('severity>="warning"')(err)
    assert parse_filter("severity<WARNING")(out) and parse_filter("severity>DEBUG")(out)
    assert parse_filter("severity=INFO")(out) and parse_filter("severity!=INFO")(err)
    assert parse_filter("severity>=500")(err) and not parse_filter("severity>500")(err)
    assert parse_filter("severity=DEFAULT")({"textPayload": "x"})  # proto3 JSON omits the default


# ---------------------------------------------------------------- entries

def test_entry_shape() -> None:
    e = entry("hello", task="workerpool1-2", offset=42)
    assert e == {
        "logName": f"projects/proj/logs/ml.googleapis.com%2F{JOB}",
        "resource": {"type": "ml_job", "labels": {"job_id": JOB, "task_name": "workerpool1-2", "project_id": "proj"}},
        "timestamp": "2026-11-21T11:43:34.960652Z", "receiveTimestamp": "2026-11-21T11:43:34.960652Z",
        "severity": "INFO", "insertId": "workerpool1-2-000000000042",
        "labels": {"ml.googleapis.com/task_name": "workerpool1-2"}, "textPayload": "hello"}
    assert entry(trial="3")["labels"]["ml.googleapis.com/trial_id"] == "3"
    assert entry(trial="3")["insertId"] != entry(trial="4")["insertId"]


def test_json_lines_become_json_payload_with_their_severity() -> None:
    e = entry('{"message": "loss 0.5", "severity": "WARNING", "step": 3}')
    assert e["severity"] == "WARNING" and "textPayload" not in e
    assert e["jsonPayload"] == {"message": "loss 0.5", "step": 3}
    assert matches("jsonPayload.step>=3", e) and matches('jsonPayload.message:"loss"', e) and matches("loss", e)
    assert matches("severity=WARNING", e)
    assert entry('{"message": "x", "severity": "debug"}')["severity"] == "DEBUG"
    plain = entry('{"message": "no level"}', stream="stderr")
    assert plain["severity"] == "ERROR" and plain["jsonPayload"] == {"message": "no level"}
    assert entry('{"message": "no level"}')["severity"] == "INFO"
    odd = entry('{"severity": "LOUD"}')
    assert odd["severity"] == "INFO" and odd["jsonPayload"] == {"severity": "LOUD"}
    for text in ('{"not json"', "[1, 2]", '{"x": NaN}', '{"a": 1} trailing'):
        assert entry(text)["textPayload"] == text


def test_pinned() -> None:
    task = "resource.labels.task_name"
    assert pinned(f'resource.labels.job_id="123" AND ({task}="workerpool0-0" OR {task}="workerpool1-0")',
                  task) == {"workerpool0-0", "workerpool1-0"}
    assert pinned(GCLOUD, "resource.labels.job_id") == {JOB}
    assert pinned(GCLOUD, task) is None
    assert pinned(f'{GCLOUD} {task}=workerpool0-0', task) == {"workerpool0-0"}
    assert pinned(f'{task}="a" OR textPayload:x', task) is None
    assert pinned(f'NOT {task}="a"', task) is None
    assert pinned(f'{task}!="a"', task) is None
    assert pinned(f'{task}="a" AND {task}="b"', task) == set()
    assert pinned(f'{task}=("a" OR "b")', task) == {"a", "b"}
    legacy = f'{GCLOUD} AND (resource.labels.task_name="master-replica-0" OR labels.task_name="master-replica-0")'
    assert pinned(legacy, ["resource.labels.task_name", "labels.task_name"]) == {"master-replica-0"}
    assert pinned(legacy, "resource.labels.task_name") is None  # the other branch does not pin this field alone
    assert pinned('labels."ml.googleapis.com/task_name"="w"', 'labels."ml.googleapis.com/task_name"') == {"w"}


# ---------------------------------------------------------------- listing

@pytest.fixture
def three(tmp_path: Path) -> list:
    """Three replicas with interleaved and equal timestamps."""
    job = tmp_path / "jobs" / JOB
    write_log(job, "workerpool0-0", [(stamp(1), "stdout", "a1"), (stamp(3), "stdout", "a3"),
                                     (stamp(3), "stderr", "a3b"), (stamp(5), "stdout", "a5"),
                                     (stamp(7), "stdout", '{"message": "a7", "severity": "ERROR"}')])
    write_log(job, "workerpool1-0", [(stamp(2), "stdout", "b2"), (stamp(3), "stdout", "b3"),
                                     (stamp(3), "stdout", "b3b"), (stamp(6), "stderr", "b6")])
    write_log(job, "workerpool1-1", [(stamp(3), "stdout", "c3"), (stamp(4), "stdout", "c4"),
                                     (stamp(8), "stdout", "c8")])
    return [(JOB, "proj", job, None)]


ASC = ["a1", "b2", "a3", "a3b", "b3", "b3b", "c3", "c4", "a5", "b6", "a7", "c8"]


def texts(entries: list[dict]) -> list[str]:
    return [e.get("textPayload") or e["jsonPayload"]["message"] for e in entries]


def test_one_page_is_in_time_order_with_ties_by_task_then_offset(three: list) -> None:
    page = list_entries(three)
    assert texts(page["entries"]) == ASC and "nextPageToken" not in page
    assert texts(list_entries(three, order_by="timestamp desc")["entries"]) == ASC[::-1]
    assert texts(list_entries(three, order_by="TIMESTAMP")["entries"]) == ASC
    assert texts(list_entries(three, order_by="Timestamp  Asc")["entries"]) == ASC
    ids = [e["insertId"] for e in page["entries"]]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("order", ["timestamp asc", "timestamp desc"])
@pytest.mark.parametrize("filter_text", ["", GCLOUD, f'{GCLOUD} AND severity>=ERROR', 'NOT textPayload:"3"',
                                         f'{GCLOUD} AND timestamp>="{stamp(3)}" AND timestamp<"{stamp(7)}"'])
def test_pages_of_two_add_up_to_the_single_page(three: list, order: str, filter_text: str) -> None:
    whole = list_entries(three, filter_text=filter_text, order_by=order, page_size=1000)
    assert "nextPageToken" not in whole and whole["entries"]
    paged = all_pages(three, filter_text=filter_text, order_by=order, page_size=2)
    assert paged == whole["entries"]
    assert len({e["insertId"] for e in paged}) == len(paged)
    assert texts(paged) == [t for t in (ASC if order.endswith("asc") else ASC[::-1])
                            if t in texts(whole["entries"])]


def test_page_sizes(three: list, tmp_path: Path) -> None:
    job = tmp_path / "big"
    write_log(job, "workerpool0-0", [(stamp(1, i), "stdout", f"l{i}") for i in range(1100)])
    big = [("9", "proj", job, None)]
    assert len(list_entries(big)["entries"]) == 50
    assert len(list_entries(big, page_size=0)["entries"]) == 50
    assert len(list_entries(big, page_size=-3)["entries"]) == 50
    assert len(list_entries(big, page_size=5000)["entries"]) == 1000
    page = list_entries(big, page_size=1100)
    assert len(page["entries"]) == 1000 and "nextPageToken" in page
    rest = list_entries(big, page_size=1000, page_token=page["nextPageToken"])
    assert texts(rest["entries"]) == [f"l{i}" for i in range(1000, 1100)] and "nextPageToken" not in rest
    assert len(list_entries(three, page_size=12)["entries"]) == 12
    assert "nextPageToken" not in list_entries(three, page_size=12)


def test_filters_on_listing(three: list) -> None:
    errors = list_entries(three, filter_text=f"{GCLOUD} AND severity>=ERROR")["entries"]
    assert texts(errors) == ["a3b", "b6", "a7"]
    assert errors[-1]["jsonPayload"] == {"message": "a7"}
    w1 = list_entries(three, filter_text=f'{GCLOUD} AND resource.labels.task_name="workerpool1-0"')["entries"]
    assert texts(w1) == ["b2", "b3", "b3b", "b6"]
    legacy = (f'(resource.type="ml_job" OR resource.type="cloudml_job") AND resource.labels.job_id="{JOB}" AND '
              '(resource.labels.task_name="workerpool1-1" OR labels.task_name="workerpool1-1")')
    assert texts(list_entries(three, filter_text=legacy)["entries"]) == ["c3", "c4", "c8"]
    since = list_entries(three, filter_text=f'{GCLOUD} AND timestamp>"{stamp(3)[:-1]}000Z"')["entries"]
    assert texts(since) == ["c4", "a5", "b6", "a7", "c8"]
    assert list_entries(three, filter_text='resource.labels.job_id="456"') == {"entries": []}
    # gcloud stream-logs' second poll: after the last insertId seen at a timestamp
    first = list_entries(three, filter_text=f'{GCLOUD} AND timestamp>="{stamp(3)}"', page_size=2)["entries"]
    last = first[-1]
    assert texts(first) == ["a3", "a3b"]
    after = list_entries(three, filter_text=f'{GCLOUD} AND ((timestamp="{last["timestamp"]}" AND '
                         f'insertId>"{last["insertId"]}") OR timestamp>"{last["timestamp"]}")')["entries"]
    assert texts(after) == ASC[ASC.index("a3b") + 1:]


def test_pinned_files_by_name(three: list, monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_ext.service.logs import listing
    opened = []
    real = listing.read_log
    monkeypatch.setattr(listing, "read_log", lambda path, offset=0: opened.append(path.stem) or real(path, offset))
    list_entries(three, filter_text=f'{GCLOUD} AND labels."ml.googleapis.com/task_name"="workerpool1-1"')
    assert opened == ["workerpool1-1"]
    opened.clear()
    list_entries(three, filter_text='resource.labels.job_id="456"')
    assert opened == []


def test_a_half_written_last_line_is_left_out(tmp_path: Path) -> None:
    job = tmp_path / JOB
    path = write_log(job, "workerpool0-0", [(stamp(1), "stdout", "done")], tail=f"{stamp(2)} stdout half-writ")
    sources = [(JOB, "proj", job, None)]
    assert texts(list_entries(sources)["entries"]) == ["done"]
    assert texts(list_entries(sources, order_by="timestamp desc")["entries"]) == ["done"]
    assert texts(list_entries(sources, filter_text=f'timestamp>="{stamp(2)}"')["entries"]) == []
    with path.open("a") as f:
        f.write("ten\n")
    assert texts(list_entries(sources)["entries"]) == ["done", "half-written"]


def test_lines_appended_between_pages_are_neither_lost_nor_repeated(tmp_path: Path) -> None:
    job = tmp_path / JOB
    path = write_log(job, "workerpool0-0", [(stamp(1, i), "stdout", f"l{i}") for i in range(3)])
    sources = [(JOB, "proj", job, None)]
    first = list_entries(sources, page_size=2)
    with path.open("a") as f:
        f.write(f"{stamp(2)} stdout l3\n")
    rest = list_entries(sources, page_size=2, page_token=first["nextPageToken"])
    assert texts(first["entries"] + rest["entries"]) == ["l0", "l1", "l2", "l3"]


def test_missing_files_and_folders_give_no_entries(tmp_path: Path) -> None:
    (tmp_path / "empty" / "logs").mkdir(parents=True)
    sources = [(JOB, "proj", tmp_path / "not-started", None), ("7", "proj", tmp_path / "empty", None)]
    for order in ("timestamp asc", "timestamp desc"):
        assert list_entries(sources, order_by=order) == {"entries": []}
        assert list_entries([], order_by=order, filter_text=GCLOUD) == {"entries": []}


def test_trials_are_labelled_and_pinned(tmp_path: Path) -> None:
    for trial in ("1", "2"):
        write_log(tmp_path / trial, "workerpool0-0", [(stamp(1), "stdout", f"trial {trial}")])
    sources = [(JOB, "proj", tmp_path / trial, trial) for trial in ("1", "2")]
    both = list_entries(sources)["entries"]
    assert texts(both) == ["trial 1", "trial 2"] and len({e["insertId"] for e in both}) == 2
    two = list_entries(sources, filter_text='labels."ml.googleapis.com/trial_id"="2"')["entries"]
    assert texts(two) == ["trial 2"]
    assert all_pages(sources, page_size=1) == both


def test_bad_order_page_token_and_page_size(three: list) -> None:
    with pytest.raises(FilterError, match="orderBy"):
        list_entries(three, order_by="severity desc")
    for token in ("garbage!", "e30", "eyJvIjoiYXNjIn0"):  # not base64 JSON, {}, {"o":"asc"}
        with pytest.raises(FilterError, match="pageToken"):
            list_entries(three, page_token=token)
    asc_token = list_entries(three, page_size=2)["nextPageToken"]
    with pytest.raises(FilterError, match="pageToken"):
        list_entries(three, page_token=asc_token, order_by="timestamp desc")
    with pytest.raises(FilterError, match="at position"):
        list_entries(three, filter_text="a=")


def test_ascending_pages_stream(three: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The first page of a huge log stops reading right after it (peeking at one more line per file)."""
    from jupyter_ext.service.logs import listing
    job = tmp_path / "huge"
    write_log(job, "workerpool0-0", [(stamp(1, i), "stdout", f"l{i}") for i in range(5000)])
    read = []
    real = listing.read_log

    def counting(path: Path, offset: int = 0):
        for item in real(path, offset):
            read.append(item)
            yield item
    monkeypatch.setattr(listing, "read_log", counting)
    page = list_entries([("9", "proj", job, None)], page_size=10)
    assert len(page["entries"]) == 10 and len(read) <= 12


def test_a_time_lower_bound_seeks_instead_of_reading_everything(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    from jupyter_ext.service.logs import listing
    job = tmp_path / "huge"
    write_log(job, "workerpool0-0", [(stamp(i // 1000, i % 1000), "stdout", f"l{i}") for i in range(20000)])
    read = []
    real = listing.read_log
    monkeypatch.setattr(listing, "read_log",
                        lambda path, offset=0: (read.append(item) or item for item in real(path, offset)))
    sources = [("9", "proj", job, None)]
    for bound in (f'timestamp>="{stamp(19, 990)}"', f'timestamp>"{stamp(19, 989)}"'):
        for order in ("timestamp asc", "timestamp desc"):
            read.clear()
            got = list_entries(sources, filter_text=bound, order_by=order)["entries"]
            assert sorted(texts(got)) == sorted(f"l{i}" for i in range(19990, 20000))
            assert len(read) <= 11
    read.clear()
    got = list_entries(sources, filter_text=f'timestamp>="{stamp(5)}" AND timestamp<"{stamp(5, 3)}"')["entries"]
    assert texts(got) == ["l5000", "l5001", "l5002"] and len(read) <= 5


@pytest.mark.parametrize("order", ["timestamp asc", "timestamp desc"])
def test_a_page_ends_at_10_mb_of_entries_and_the_next_goes_on(tmp_path: Path, order: str) -> None:
    """100 entries of 256 KB: pages of at most 10 MB (40 of them), each entry on exactly one."""
    from jupyter_ext.service.logs.listing import MAX_PAGE_BYTES
    big = 256 * 1024
    job = tmp_path / "big"
    write_log(job, "workerpool0-0", [(stamp(1, i), "stdout", f"{i:06d}" + "x" * (big - 6)) for i in range(50)])
    write_log(job, "workerpool1-0", [(stamp(1, i), "stdout", f"{i:06d}" + "é" * (big // 2 - 3)) for i in range(50)])
    sources = [("9", "proj", job, None)]
    pages, token = [], ""
    while True:
        page = list_entries(sources, order_by=order, page_size=1000, page_token=token)
        pages.append(page["entries"])
        if "nextPageToken" not in page:
            break
        token = page["nextPageToken"]
    assert all(sum(len(e["textPayload"].encode()) for e in page) <= MAX_PAGE_BYTES for page in pages)
    assert [len(page) for page in pages] == [39, 39, 22]  # 40 x 256 KB is the 10 MB, without their other fields
    got = [e["insertId"] for page in pages for e in page]
    whole = [e["insertId"] for e in all_pages(sources, order_by=order, page_size=5)]
    assert got == whole and len(set(got)) == 100


def test_a_line_of_bytes_that_are_not_utf8_becomes_entries_of_at_most_256_kb(tmp_path: Path) -> None:
    """Each bad byte is written as U+FFFD, 3 bytes: 300 KB of them are 900 KB of text."""
    from conftest import pool

    from jupyter_ext.runner import Supervisor
    from jupyter_ext.spec import JobSpec
    code = "import sys; sys.stdout.buffer.write(b'\\xff' * 300_000 + b'\\nnext\\n')"
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(code=code)]})
    assert Supervisor(job, job_dir=tmp_path / JOB).run().state == "SUCCEEDED"
    got = all_pages([(JOB, "proj", tmp_path / JOB, None)], page_size=1000)
    text = [e["textPayload"] for e in got]
    assert [len(t.encode()) <= 256 * 1024 for t in text] == [True] * len(text)
    assert "".join(text[:-1]) == "\ufffd" * 300_000 and text[-1] == "next"


# ---------------------------------------------------------------- the real client

def test_google_cloud_logging_client_reads_the_entries(three: list) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import logging as cloud_logging

    calls = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            calls.append(body)
            try:
                data, code = list_entries(three, filter_text=body.get("filter", ""),
                                          order_by=body.get("orderBy", "timestamp asc"),
                                          page_size=body.get("pageSize", 0), page_token=body.get("pageToken", "")), 200
            except FilterError as e:
                data, code = {"error": {"code": 400, "message": str(e), "status": "INVALID_ARGUMENT"}}, 400
            raw = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = cloud_logging.Client(project="proj", credentials=AnonymousCredentials(), _use_grpc=False,
                                      client_options={"api_endpoint": f"http://127.0.0.1:{server.server_port}"})
        # the client adds `AND timestamp>="<a day ago>+0000"` to a filter without a timestamp
        got = list(client.list_entries(filter_=GCLOUD + ' AND timestamp>="2026-01-01T00:00:00Z"',
                                       order_by=cloud_logging.ASCENDING, page_size=5))
        assert [e.payload if isinstance(e.payload, str) else e.payload["message"] for e in got] == ASC
        assert len(calls) == 3 and calls[1]["pageToken"]
        assert got[0].resource.labels["task_name"] == "workerpool0-0" and got[0].severity == "INFO"
        assert got[0].timestamp.isoformat() == "2026-11-21T11:43:01+00:00"
        assert got[-2].payload == {"message": "a7"} and got[-2].severity == "ERROR"
        assert got[0].log_name == f"projects/proj/logs/ml.googleapis.com%2F{JOB}"
        newest = list(client.list_entries(filter_=GCLOUD + ' AND timestamp>="2026-01-01T00:00:00Z"',
                                          order_by=cloud_logging.DESCENDING, max_results=3))
        assert [e.payload for e in newest] == ["c8", {"message": "a7"}, "b6"]
        list(client.list_entries(filter_=GCLOUD))  # the client's own `timestamp>="...+0000"` parses
        assert "+0000" in calls[-1]["filter"]
    finally:
        server.shutdown()
        server.server_close()
