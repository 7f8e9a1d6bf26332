"""`entries.list` over replica log files: pick the files a filter pins, seek to its time range,
merge and page them in timestamp order (reading backwards for a descending one), and issue page tokens.

A page ends at `pageSize` entries or at about MAX_PAGE_BYTES of them (Cloud Logging's limit for
one `entries.write` request), whichever comes first, with a nextPageToken as Google's paging
allows: 1000 entries of 256 KB each would otherwise hold 256 MB in the service per page. It also
ends after PAGE_SECONDS of reading, with the entries found so far and a token to go on from the
next line, as Cloud Logging returns partial pages (even empty ones): so a heavy filter over a long
log holds one of the service's few log threads only that long at a time."""

from __future__ import annotations

import base64
import binascii
import functools
import heapq
import json
import os
import re
import time
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

from ...api import TASK_LABEL, TRIAL_LABEL
from ...errors import FilterError
from ...runner.logs import LogLine, parse_line
from .entries import line_to_entry
from .files import lines_after, lines_before, open_log, read_log, seek_time
from .query import Node, nanos, parse_tree, pins, predicate, shown, time_bound

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 1000
MAX_PAGE_BYTES = 10 * 1024 * 1024  # of entries' text in one page (always at least one entry)
PAGE_SECONDS = 2.0  # of reading for one page (then a partial page; one line's filter may take longer)
YIELD_EVERY = 1024  # lines read between giving up the GIL to other threads
NEWEST = 2**63 - 1  # a timestamp after any other (ns)
TASK_LOG = re.compile(r"workerpool\d+-\d+\.log")  # a replica's log: its task name (cluster.task_names)
ENTRY_BYTES = 500  # an entry's fields besides its text, roughly, as JSON
JOB_FIELDS = ("resource.labels.job_id",)
TASK_FIELDS = ("resource.labels.task_name", "labels.task_name", f'labels."{TASK_LABEL}"')
TRIAL_FIELDS = (f'labels."{TRIAL_LABEL}"', "labels.trial_id")

Source = tuple[str, str, str | None, str, Path]  # job_id, project, trial, task_name, path
# timestamp ns, task_name, job_id, trial, offset: total and stable. What is not a log line (None) has the
# timestamp of the line read before it, so the keys of a file still go one way and a page can end there.
Key = tuple[int, str, str, str, int]
Item = tuple[Key, Source, LogLine | None]
Visible = Callable[[int, str], bool]  # whether an entry (timestamp ns, identity) is ingested yet (see `emulation`)


def _line_nanos(stamp: str) -> int | None:
    """`nanos` for the runner's own format (2026-11-21T11:43:34.960652Z), parsing each second once."""
    if len(stamp) == 27 and stamp[19] == "." and stamp[26] == "Z" and stamp[20:26].isdigit():
        second = _second(stamp[:19])
        return None if second is None else second + int(stamp[20:26]) * 1000
    return nanos(stamp)


@functools.lru_cache(maxsize=4096)
def _second(prefix: str) -> int | None:
    return nanos(prefix + "Z")


def _files(sources: Iterable[tuple[str, str, Path, str | None]], tree: Node) -> list[Source]:
    def folded(fields: tuple[str, ...]) -> set[str] | None:
        values = pins(tree, fields)
        return None if values is None else {v.casefold() for v in values}
    jobs, tasks, trials = folded(JOB_FIELDS), folded(TASK_FIELDS), folded(TRIAL_FIELDS)
    files = []
    for job_id, project, job_dir, trial in sources:
        if (jobs is None or job_id.casefold() in jobs) and (trials is None or (trial or "").casefold() in trials):
            files += [(job_id, project, trial, path.stem, path) for path in sorted(Path(job_dir).glob("logs/*.log"))
                      if TASK_LOG.fullmatch(path.name) and (tasks is None or path.stem.casefold() in tasks)]
    return files


# Fields whose value is the same for every line of one file: tested once per file, not per line.
_FILE_FIELDS = ("resource", "logName", "labels")


def _per_file(node: Node) -> bool:
    kind = node[0]
    if kind in ("and", "or", "not"):
        return all(_per_file(child) for child in node[1:])
    return kind == "true" or (kind == "cmp" and node[1][0] in _FILE_FIELDS)


def _split(tree: Node) -> tuple[Node, Node]:
    """The filter as (the part about the file, the part about each line), joined by AND."""
    parts = list(tree[1:]) if tree[0] == "and" else [tree]

    def join(nodes: list[Node]) -> Node:
        return ("and", *nodes) if len(nodes) > 1 else nodes[0] if nodes else ("true",)

    return join([n for n in parts if _per_file(n)]), join([n for n in parts if not _per_file(n)])


def _fid(source: Source) -> str:
    job_id, _, trial, task, _ = source
    return f"{job_id}/{trial or ''}/{task}"


def _seek(path: Path, floor: int) -> int:
    """The start of the first line stamped at or after `floor` (see `files.seek_time`)."""
    f = open_log(path)
    if f is None:
        return 0
    with f:
        return seek_time(f, floor)


def _read(source: Source, start: int, floor: int | None, ceiling: int | None,
          visible: Visible | None = None) -> Iterator[Item]:
    """One file's lines from `start` within the time bounds, oldest first; nothing if the file does not exist (yet)."""
    job_id, _, trial, task, path = source
    if floor is not None:
        start = max(start, _seek(path, floor))
    stamp = floor or 0
    for offset, line in read_log(path, start):
        at = None if line is None else _line_nanos(line.timestamp)
        if at is not None:
            if ceiling is not None and at > ceiling:
                return
            if visible is not None and not visible(at, f"{_fid(source)}/{offset}"):
                return  # not ingested yet, nor what the replica wrote after it: its entries arrive in order
            stamp = at
        yield (stamp, task, job_id, trial or "", offset), source, None if at is None else line


def _read_back(source: Source, before: Key | None, floor: int | None, ceiling: int | None,
               visible: Visible | None = None) -> Iterator[Item]:
    """One file's lines older than `before` within the time bounds, newest first."""
    job_id, _, trial, task, path = source
    f = open_log(path)
    if f is None:
        return
    with f:
        top = min((t for t in (ceiling, before and before[0]) if t is not None), default=None)
        if before is not None and tuple(before[1:4]) == (task, job_id, trial or ""):
            end = before[4]  # where the last page stopped in this file
        else:
            end = f.seek(0, os.SEEK_END) if top is None else seek_time(f, top + 1, unstamped_after=False)
        if visible is not None:
            end = min(end, _ingested(f, source, 0 if floor is None else seek_time(f, floor), ceiling, visible))
        stamp = NEWEST if top is None else top
        for offset, raw in lines_before(f, end):
            line = None if raw is None else parse_line(raw)
            at = None if line is None else _line_nanos(line.timestamp)
            if at is not None:
                if floor is not None and at < floor:
                    return
                stamp = at
            key = (stamp, task, job_id, trial or "", offset)
            if (ceiling is None or stamp <= ceiling) and (before is None or key < before):
                yield key, source, None if at is None else line


def _ingested(f: BinaryIO, source: Source, start: int, ceiling: int | None, visible: Visible) -> int:
    """Where the lines from `start` that are not ingested yet begin (`_read` stops there), else their end."""
    for end, raw in lines_after(f, start):
        line = None if raw is None else parse_line(raw)
        at = None if line is None else _line_nanos(line.timestamp)
        if at is not None and ((ceiling is not None and at > ceiling) or not visible(at, f"{_fid(source)}/{end}")):
            break
        start = end
    return start


def _order(order_by: str | None) -> bool:
    """True for descending."""
    words = (order_by or "timestamp").lower().split()
    if words in (["timestamp"], ["timestamp", "asc"], ["timestamp", "desc"]):
        return words[-1] == "desc"
    raise FilterError(f"orderBy: unsupported order {shown(order_by or '')} (use 'timestamp asc' or 'timestamp desc')")


def _encode(state: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode(token: str, descending: bool) -> dict | None:
    if not token:
        return None
    try:
        state = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if state["o"] != ("desc" if descending else "asc"):
            raise ValueError("issued for the other order")
        if descending:
            k = state["k"]
            if not (len(k) == 5 and all(isinstance(x, t) for x, t in zip(k, (int, str, str, str, int)))):
                raise ValueError("bad key")
        elif not all(isinstance(f, str) and isinstance(o, int) and o >= 0 for f, o in state["p"].items()):
            raise ValueError("bad positions")
        return state
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, binascii.Error):
        raise FilterError(f"pageToken: not a page token of this listing ({token[:40]!r})") from None


_PROBE = LogLine("1970-01-01T00:00:00.000000Z", "stdout", "")


def list_entries(sources: Iterable[tuple[str, str, Path, str | None]], *, filter_text: str = "",
                 order_by: str = "timestamp asc", page_size: int = DEFAULT_PAGE_SIZE,
                 page_token: str = "", visible: Visible | None = None, seconds: float = PAGE_SECONDS) -> dict:
    """One page of `entries.list`: `{"entries": [...], "nextPageToken": ...}` (no token on the last page).
    `visible`: whether an entry is ingested yet (see `emulation`); `seconds`: the page's time budget
    (at least one line is read).

    `sources` are `(job_id, project, job_dir, trial)`. The files are merged through heapq.merge, each
    read forwards (ascending) or backwards (descending). An ascending token holds, per file, the offset
    to continue from; a descending one the key of the last line read.
    """
    descending = _order(order_by)
    size = int(page_size or 0)
    size = DEFAULT_PAGE_SIZE if size <= 0 else min(size, MAX_PAGE_SIZE)
    tree = parse_tree(filter_text)
    per_file, per_line = _split(tree)
    file_match, match = predicate(per_file), predicate(per_line)
    state = _decode(page_token, descending)
    files = [f for f in _files(sources, tree) if file_match(line_to_entry(f[0], f[1], f[3], 0, _PROBE, f[2]))]
    floor, ceiling = time_bound(tree, lower=True), time_bound(tree, lower=False)
    deadline = time.monotonic() + seconds

    positions: dict[str, int] = dict(state["p"]) if state and not descending else {}
    last = tuple(state["k"]) if state and descending else None  # the key of the last line read (descending)
    if descending:
        streams = [_read_back(source, last, floor, ceiling, visible) for source in files]
    else:
        streams = [_read(source, positions.get(_fid(source), 0), floor, ceiling, visible) for source in files]

    def token() -> str:
        return _encode({"o": "desc", "k": list(last or ())} if descending else {"o": "asc", "p": positions})

    page: dict = {"entries": []}
    total = 0
    try:
        merged = heapq.merge(*streams, key=itemgetter(0), reverse=descending)
        for count, (key, source, line) in enumerate(merged, 1):
            if line is not None:
                job_id, project, trial, task, _ = source
                if match(e := line_to_entry(job_id, project, task, key[-1], line, trial)):
                    total += _bytes(line)
                    if len(page["entries"]) == size or (page["entries"] and total > MAX_PAGE_BYTES):
                        page["nextPageToken"] = token()  # continue right before it
                        break
                    page["entries"].append(e)
            if descending:
                last = key
            else:
                positions[_fid(source)] = key[-1]
            if time.monotonic() >= deadline:
                page["nextPageToken"] = token()  # continue right after it
                break
            if count % YIELD_EVERY == 0:
                time.sleep(0)  # let the event loop and quick requests take the GIL (bench_service: p99 ~1 s -> ~90 ms)
    finally:
        for stream in streams:
            stream.close()
    return page


def _bytes(line: LogLine) -> int:
    """What an entry of this line weighs in a page (its text is at most 256 KB: see `runner.logs`)."""
    text = line.text
    return (len(text) if text.isascii() else len(text.encode("utf-8"))) + ENTRY_BYTES
