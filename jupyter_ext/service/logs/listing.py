"""`entries.list` over replica log files: pick the files a filter pins, seek to its time range,
merge and page them in timestamp order, and issue page tokens."""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import heapq
import json
from operator import itemgetter
from pathlib import Path
from typing import Iterable, Iterator

from ...errors import FilterError
from ...runner.logs import LogLine, read_log
from .entries import line_to_entry
from .query import Entry, Node, nanos, parse_tree, pins, predicate, shown, time_bound

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 1000
JOB_FIELDS = ("resource.labels.job_id",)
TASK_FIELDS = ("resource.labels.task_name", "labels.task_name", 'labels."ml.googleapis.com/task_name"')
TRIAL_FIELDS = ('labels."ml.googleapis.com/trial_id"', "labels.trial_id")

Source = tuple[str, str, str | None, str, Path]  # job_id, project, trial, task_name, path
Key = tuple[int, str, str, str, int]  # timestamp ns, task_name, job_id, trial, offset: total and stable


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


def _read(source: Source, start: int, floor: int | None, ceiling: int | None) -> Iterator[tuple[Key, Source, LogLine]]:
    """One file's lines from `start` within the time bounds; nothing if the file does not exist (yet)."""
    job_id, _, trial, task, path = source
    try:
        if floor is not None:
            start = max(start, _seek(path, floor))
        for offset, line in read_log(path, start):
            stamp = _line_nanos(line.timestamp)
            if stamp is None:
                continue
            if ceiling is not None and stamp > ceiling:
                return
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
                 page_token: str = "", visible_until: int | None = None) -> dict:
    """One page of `entries.list`: `{"entries": [...], "nextPageToken": ...}` (no token on the last page).
    `visible_until` (ns): entries stamped later are not ingested yet (see `emulation`).

    `sources` are `(job_id, project, job_dir, trial)`. Ascending pages stream the files through
    heapq.merge and their token holds, per file, the offset to continue from; descending pages keep the
    newest page_size + 1 entries and their token holds the key of the last one returned.
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
    if visible_until is not None:  # entries not ingested yet are not there
        ceiling = visible_until if ceiling is None else min(ceiling, visible_until)

    def entry(key: Key, source: Source, line: LogLine) -> Entry:
        job_id, project, trial, task, _ = source
        return line_to_entry(job_id, project, task, key[-1], line, trial)

    if descending:
        before = tuple(state["k"]) if state else None

        def candidates() -> Iterator[tuple[Key, Entry]]:
            for source in files:
                with contextlib.closing(_read(source, 0, floor, ceiling)) as lines:
                    for key, _, line in lines:
                        if before is not None and key >= before:
                            break  # the rest of this file is newer still
                        if match(e := entry(key, source, line)):
                            yield key, e

        top = heapq.nlargest(size + 1, candidates(), key=itemgetter(0))
        page = {"entries": [e for _, e in top[:size]]}
        if len(top) > size:
            page["nextPageToken"] = _encode({"o": "desc", "k": list(top[size - 1][0])})
        return page

    positions: dict[str, int] = dict(state["p"]) if state else {}
    streams = [_read(source, positions.get(_fid(source), 0), floor, ceiling) for source in files]
    page = {"entries": []}
    try:
        for key, source, line in heapq.merge(*streams, key=itemgetter(0)):
            if match(e := entry(key, source, line)):
                if len(page["entries"]) == size:  # one more exists: continue right before it
                    page["nextPageToken"] = _encode({"o": "asc", "p": positions})
                    break
                page["entries"].append(e)
            positions[_fid(source)] = key[-1]
    finally:
        for stream in streams:
            stream.close()
    return page
