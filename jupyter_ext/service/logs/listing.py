"""`entries.list` over replica log files: pick the files a filter pins, seek to its time range,
merge and page them in timestamp order, and issue page tokens.

A page ends at `pageSize` entries or at about MAX_PAGE_BYTES of them (Cloud Logging's limit for
one `entries.write` request), whichever comes first, with a nextPageToken as Google's paging
allows: 1000 entries of 256 KB each would otherwise hold 256 MB in the service per page."""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import heapq
import json
import time
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ...errors import FilterError
from ...runner.logs import LogLine, read_log
from .entries import line_to_entry
from .query import Entry, Node, nanos, parse_tree, pins, predicate, shown, time_bound

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 1000
MAX_PAGE_BYTES = 10 * 1024 * 1024  # of entries' text in one page (always at least one entry)
YIELD_EVERY = 1024  # lines read between giving up the GIL to other threads
ENTRY_BYTES = 500  # an entry's fields besides its text, roughly, as JSON
JOB_FIELDS = ("resource.labels.job_id",)
TASK_FIELDS = ("resource.labels.task_name", "labels.task_name", 'labels."ml.googleapis.com/task_name"')
TRIAL_FIELDS = ('labels."ml.googleapis.com/trial_id"', "labels.trial_id")

Source = tuple[str, str, str | None, str, Path]  # job_id, project, trial, task_name, path
Key = tuple[int, str, str, str, int]  # timestamp ns, task_name, job_id, trial, offset: total and stable
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
                      if tasks is None or path.stem.casefold() in tasks]
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
    """The start of the first line stamped at or after `floor` (lines are in time order): a binary search."""
    with open(path, "rb") as f:
        def start_at(pos: int) -> int:
            if pos:
                f.seek(pos - 1)
                f.readline()
            return f.tell() if pos else 0

        def reached(start: int) -> bool:
            f.seek(start)
            raw = f.readline()
            stamp = nanos(raw.split(b" ", 1)[0].decode("ascii", "replace")) if raw.endswith(b"\n") else None
            return stamp is None or stamp >= floor

        lo, hi = 0, f.seek(0, 2)
        while lo < hi:
            mid = (lo + hi) // 2
            if reached(start_at(mid)):
                hi = mid
            else:
                lo = mid + 1
        return start_at(lo)


def _read(source: Source, start: int, floor: int | None, ceiling: int | None,
          visible: Visible | None = None) -> Iterator[tuple[Key, Source, LogLine]]:
    """One file's lines from `start` within the time bounds; nothing if the file does not exist (yet)."""
    job_id, _, trial, task, path = source
    try:
        if floor is not None:
            start = max(start, _seek(path, floor))
        for count, (offset, line) in enumerate(read_log(path, start), 1):
            if count % YIELD_EVERY == 0:
                time.sleep(0)  # let the event loop and quick requests take the GIL (bench_service: p99 ~1 s -> ~90 ms)
            stamp = _line_nanos(line.timestamp)
            if stamp is None:
                continue
            if ceiling is not None and stamp > ceiling:
                return
            if visible is not None and not visible(stamp, f"{_fid(source)}/{offset}"):
                return  # not ingested yet, nor what the replica wrote after it: its entries arrive in order
            yield (stamp, task, job_id, trial or "", offset), source, line
    except FileNotFoundError:
        return


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
                 page_token: str = "", visible: Visible | None = None) -> dict:
    """One page of `entries.list`: `{"entries": [...], "nextPageToken": ...}` (no token on the last page).
    `visible`: whether an entry is ingested yet (see `emulation`).

    `sources` are `(job_id, project, job_dir, trial)`. Ascending pages stream the files through
    heapq.merge and their token holds, per file, the offset to continue from; descending pages keep the
    newest entries that make a page, plus one, and their token holds the key of the last one returned.
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

    def entry(key: Key, source: Source, line: LogLine) -> Entry:
        job_id, project, trial, task, _ = source
        return line_to_entry(job_id, project, task, key[-1], line, trial)

    if descending:
        before = tuple(state["k"]) if state else None

        def candidates() -> Iterator[tuple[Key, int, Entry]]:
            for source in files:
                with contextlib.closing(_read(source, 0, floor, ceiling, visible)) as lines:
                    for key, _, line in lines:
                        if before is not None and key >= before:
                            break  # the rest of this file is newer still
                        if match(e := entry(key, source, line)):
                            yield key, _bytes(line), e

        top = _newest(candidates(), size)
        kept = _fitting([n for _, n, _ in top], size)
        page = {"entries": [e for _, _, e in top[:kept]]}
        if len(top) > kept:
            page["nextPageToken"] = _encode({"o": "desc", "k": list(top[kept - 1][0])})
        return page

    positions: dict[str, int] = dict(state["p"]) if state else {}
    streams = [_read(source, positions.get(_fid(source), 0), floor, ceiling, visible) for source in files]
    page, total = {"entries": []}, 0
    try:
        for key, source, line in heapq.merge(*streams, key=itemgetter(0)):
            if match(e := entry(key, source, line)):
                total += _bytes(line)
                if len(page["entries"]) == size or (page["entries"] and total > MAX_PAGE_BYTES):
                    page["nextPageToken"] = _encode({"o": "asc", "p": positions})  # continue right before it
                    break
                page["entries"].append(e)
            positions[_fid(source)] = key[-1]
    finally:
        for stream in streams:
            stream.close()
    return page


def _bytes(line: LogLine) -> int:
    """What an entry of this line weighs in a page (its text is at most 256 KB: see `runner.logs`)."""
    text = line.text
    return (len(text) if text.isascii() else len(text.encode("utf-8"))) + ENTRY_BYTES


def _fitting(sizes: list[int], size: int) -> int:
    """How many of the first of `sizes` make a page: at most `size`, MAX_PAGE_BYTES, at least one."""
    count, total = 0, 0
    for n in sizes[:size]:
        total += n
        if count and total > MAX_PAGE_BYTES:
            break
        count += 1
    return count


def _newest(candidates: Iterable[tuple[Key, int, Entry]], size: int) -> list[tuple[Key, int, Entry]]:
    """The newest candidates that make a page, and the next older one, newest first. Holds only
    what the page may hold, plus an entry or two, however many candidates there are."""
    heap: list[tuple[Key, int, Entry]] = []  # the oldest first
    total = 0
    for item in candidates:
        heapq.heappush(heap, item)
        total += item[1]
        # the oldest can go when the rest already make a page and one more
        while len(heap) > size + 1 or (len(heap) > 2 and total - heap[0][1] > MAX_PAGE_BYTES):
            total -= heapq.heappop(heap)[1]
    return sorted(heap, key=itemgetter(0), reverse=True)
