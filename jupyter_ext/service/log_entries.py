"""Cloud Logging's `entries.list` over the local replica logs.

Each replica's output is `<job dir>/logs/<task_name>.log` (see `runner.logs`); here
its lines become LogEntry dicts in proto3 JSON, shaped as Vertex AI writes them
(`resource.type="ml_job"`), filtered with the Logging query language and paged.

The filter language is the subset `gcloud ai custom-jobs stream-logs` and the
`google-cloud-logging` client use, with the Logging precedence: NOT binds
tightest, then OR, then implicit AND (whitespace), then AND, so `a OR b AND c`
is `(a OR b) AND c` (the client appends ` AND timestamp>=...` relying on that).
String comparisons are case-insensitive; `timestamp` compares as time,
`severity` by level.

Listing reads only the files a filter pins (job ID, task name, trial) and only
the time range it implies (a binary search in each time-ordered file), streams
ascending pages with heapq.merge, and keeps a page plus one entry for
descending ones.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import contextlib
import functools
import heapq
import json
import operator
import re
from datetime import datetime
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..errors import FilterError
from jupyter_ext.runner.logs import LogLine, read_log

SEVERITIES = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500,
              "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800}
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 1000
JOB_FIELDS = ("resource.labels.job_id",)
TASK_FIELDS = ("resource.labels.task_name", "labels.task_name", 'labels."ml.googleapis.com/task_name"')
TRIAL_FIELDS = ('labels."ml.googleapis.com/trial_id"', "labels.trial_id")

Entry = dict[str, Any]
# ("true",) ("and"|"or", a, b) ("not", a) ("global", value, pos) ("cmp", path, op, value, quoted, value_pos)
Node = tuple


# ---------------------------------------------------------------- parsing

_OPS = ("=~", "!~", ">=", "<=", "!=", "=", ">", "<", ":")
_PATH_STOP = frozenset(' \t\r\n()"=!<>:~.')
_VALUE_STOP = frozenset(' \t\r\n()"')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class _Parser:
    """Recursive descent straight over the text (no token list, so every error has a position).

    expression = sequence {"AND" sequence}      sequence = factor {factor}      (implicit AND)
    factor = term {"OR" term}                   term = ("NOT" | "-") term | "(" expression ")" | restriction
    restriction = path [OP value]               value = quoted | bare | "(" expression of values ")"
    """

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def error(self, message: str, position: int | None = None) -> FilterError:
        return FilterError(message, self.i if position is None else position)

    def more(self) -> bool:
        """Skip whitespace; is there anything left?"""
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1
        return self.i < len(self.s)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def bare(self, stop: frozenset[str]) -> str:
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in stop:
            self.i += 1
        return self.s[start:self.i]

    def word(self) -> str:
        """The bare word ahead, not consumed."""
        start = self.i
        word = self.bare(_PATH_STOP)
        self.i = start
        return word

    def keyword(self, name: str) -> bool:
        if self.more() and self.word() == name:
            self.i += len(name)
            return True
        return False

    def parse(self) -> Node:
        if not self.more():
            return ("true",)
        node = self.expression(None)
        if self.more():
            raise self.error(f"unexpected {self.peek()!r}")
        return node

    def expression(self, ctx: tuple | None) -> Node:
        node = self.sequence(ctx)
        while self.keyword("AND"):
            node = ("and", node, self.sequence(ctx))
        return node

    def sequence(self, ctx: tuple | None) -> Node:
        node = self.factor(ctx)
        while self.more() and self.peek() != ")" and self.word() != "AND":
            node = ("and", node, self.factor(ctx))
        return node

    def factor(self, ctx: tuple | None) -> Node:
        node = self.term(ctx)
        while self.keyword("OR"):
            node = ("or", node, self.term(ctx))
        return node

    def term(self, ctx: tuple | None) -> Node:
        if not self.more():
            raise self.error("expected a comparison, found the end")
        if self.keyword("NOT"):
            return ("not", self.term(ctx))
        if self.peek() == "-":
            self.i += 1
            return ("not", self.term(ctx))
        if self.word() in ("AND", "OR"):
            raise self.error(f"unexpected {self.word()}")
        if self.peek() == "(":
            return self.group(ctx)
        start = self.i
        if ctx:  # inside `field OP (v1 OR v2 ...)`: each term is a value
            value, quoted = self.value()
            return ("cmp", *ctx, value, quoted, start)
        path, quoted = self.path()
        end = self.i
        self.more()
        op = next((op for op in _OPS if self.s.startswith(op, self.i)), None)
        if op is None:  # a global restriction: a bare or quoted value alone
            self.i = end
            return ("global", path[0] if quoted and len(path) == 1 else self.s[start:end], start)
        self.i += len(op)
        if not self.more():
            raise self.error(f"expected a value after {op!r}")
        if self.peek() == "(":
            return self.group((path, op))
        start = self.i
        value, quoted = self.value()
        return ("cmp", path, op, value, quoted, start)

    def group(self, ctx: tuple | None) -> Node:
        opened = self.i
        self.i += 1
        node = self.expression(ctx)
        if not self.more() or self.peek() != ")":
            raise self.error("unclosed '('", opened)
        self.i += 1
        return node

    def path(self) -> tuple[tuple[str, ...], bool]:
        """`a.b."c.d"`: segments, and whether any was quoted."""
        segments, quoted = [], False
        while True:
            if self.peek() == '"':
                segments.append(self.quoted())
                quoted = True
            else:
                segment = self.bare(_PATH_STOP)
                if not segment:
                    raise self.error("expected a field name or value" if self.i < len(self.s)
                                     else "expected a field name, found the end")
                segments.append(segment)
            if self.peek() != ".":
                return tuple(segments), quoted
            self.i += 1

    def value(self) -> tuple[str, bool]:
        if self.peek() == '"':
            return self.quoted(), True
        value = self.bare(_VALUE_STOP)
        if not value:
            raise self.error("expected a value")
        return value, False

    def quoted(self) -> str:
        start, out = self.i, []
        self.i += 1
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\" and self.i < len(self.s):
                c = self.s[self.i]
                self.i += 1
                if c == "u":
                    digits = self.s[self.i:self.i + 4]
                    if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                        raise self.error("bad \\u escape", self.i - 2)
                    c, self.i = chr(int(digits, 16)), self.i + 4
                else:
                    c = _ESCAPES.get(c, c)
            out.append(c)
        raise self.error("unterminated string", start)


def _field(text: str) -> tuple[str, ...]:
    parser = _Parser(text)
    path, _ = parser.path()
    if parser.more():
        raise parser.error("a field path expected")
    return path


# ---------------------------------------------------------------- matching

_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?)?\s*([Zz]|[+-]\d\d:?\d\d)?")
_COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def _nanos(text: Any) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 time (any fraction, `Z` or offset), else None."""
    m = _TIME.fullmatch(text.strip()) if isinstance(text, str) else None
    if not m:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    try:
        moment = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0))
    except ValueError:
        return None
    seconds = calendar.timegm(moment.timetuple())
    if zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    return seconds * 10**9 + int(((fraction or "") + "000000000")[:9])


def _line_nanos(stamp: str) -> int | None:
    """`_nanos` for the runner's own format (2026-11-21T11:43:34.960652Z), parsing each second once."""
    if len(stamp) == 27 and stamp[19] == "." and stamp[26] == "Z" and stamp[20:26].isdigit():
        second = _second(stamp[:19])
        return None if second is None else second + int(stamp[20:26]) * 1000
    return _nanos(stamp)


@functools.lru_cache(maxsize=4096)
def _second(prefix: str) -> int | None:
    return _nanos(prefix + "Z")


def _level(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.upper() in SEVERITIES:
            return SEVERITIES[value.upper()]
        if re.fullmatch(r"\d+", value):
            return int(value)
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else "" if value is None else str(value)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _values(entry: Entry, path: tuple[str, ...]) -> list[Any]:
    """The values at a field path; a list on the way stands for each of its items."""
    values = [entry]
    for segment in path:
        values = [item[segment] for value in values for item in (value if isinstance(value, list) else [value])
                  if isinstance(item, dict) and segment in item]
    values = [item for value in values for item in (value if isinstance(value, list) else [value])]
    if not values and path == ("severity",):
        return ["DEFAULT"]  # proto3 JSON leaves the default enum value out
    return values


def _comparison(path: tuple[str, ...], op: str, value: str, quoted: bool, pos: int) -> Callable[[Any], bool]:
    """A test of one field value against `OP value`."""
    if op == ":" and value == "*" and not quoted:
        return lambda v: True  # presence
    if op in ("=~", "!~"):
        try:
            pattern = re.compile(value)
        except re.error as e:
            raise FilterError(f"bad regular expression {value!r} ({e})", pos) from None
        return lambda v: not isinstance(v, (dict, list)) and bool(pattern.search(_text(v))) == (op == "=~")
    if op == ":":
        needle = value.casefold()
        return lambda v: any(needle in _text(leaf).casefold() for leaf in _leaves(v))
    compare = _COMPARE[op]
    if path in (("timestamp",), ("receiveTimestamp",)):
        moment = _nanos(value)
        if moment is None:
            raise FilterError(f"{value!r} is not an RFC 3339 timestamp", pos)
        return lambda v: (n := _nanos(v)) is not None and compare(n, moment)
    if path == ("severity",):
        level = _level(value)
        if level is None:
            raise FilterError(f"unknown severity {value!r}", pos)
        return lambda v: (n := _level(v)) is not None and compare(n, level)
    number, text = _number(value), value.casefold()

    def test(v: Any) -> bool:
        if isinstance(v, (dict, list)) or v is None:
            return False
        if isinstance(v, (int, float)) and not isinstance(v, bool) and number is not None:
            return compare(v, number)
        return compare(_text(v).casefold(), text)
    return test


def _compile(node: Node) -> Callable[[Entry], bool]:
    kind = node[0]
    if kind == "true":
        return lambda e: True
    if kind in ("and", "or"):
        a, b = _compile(node[1]), _compile(node[2])
        return (lambda e: a(e) and b(e)) if kind == "and" else (lambda e: a(e) or b(e))
    if kind == "not":
        inner = _compile(node[1])
        return lambda e: not inner(e)
    if kind == "global":
        needle = node[1].casefold()
        return lambda e: any(needle in _text(leaf).casefold() for leaf in _leaves(e))
    _, path, op, value, quoted, pos = node
    test = _comparison(path, op, value, quoted, pos)
    return lambda e: any(test(v) for v in _values(e, path))


def parse_filter(text: str) -> Callable[[Entry], bool]:
    """A predicate over LogEntry dicts (proto3 JSON) for a Logging query; '' matches everything."""
    return _compile(_Parser(text or "").parse())


def _implied(node: Node, leaf: Callable[[Node], Any], meet: Callable, join: Callable) -> Any:
    """What every matching entry satisfies, from comparisons combined by AND (meet) and OR (join); None: nothing."""
    if node[0] in ("and", "or"):
        a, b = (_implied(n, leaf, meet, join) for n in node[1:])
        if node[0] == "and":
            return b if a is None else a if b is None else meet(a, b)
        return None if a is None or b is None else join(a, b)
    return leaf(node) if node[0] == "cmp" else None


def _pins(tree: Node, fields: Iterable[str]) -> set[str] | None:
    paths = {_field(f) for f in fields}
    return _implied(tree, lambda n: {n[3]} if n[2] == "=" and n[1] in paths else None,
                    set.intersection, set.union)


def pinned(text: str, field: str | Iterable[str]) -> set[str] | None:
    """The values `field` is pinned to by equalities ANDed at the top of the filter (through ORs of
    equalities), or None when it is not pinned. Several fields name one thing (any of them pins it)."""
    return _pins(_Parser(text or "").parse(), [field] if isinstance(field, str) else field)


def _time_bound(tree: Node, lower: bool) -> int | None:
    """An inclusive bound on the timestamp of every matching entry (lower or upper), in nanoseconds."""
    ops = ("=", ">", ">=") if lower else ("=", "<", "<=")
    return _implied(tree, lambda n: _nanos(n[3]) if n[1] == ("timestamp",) and n[2] in ops else None,
                    max if lower else min, min if lower else max)


# ---------------------------------------------------------------- entries

def _json_object(text: str) -> dict | None:
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = json.loads(text, parse_constant=_reject)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _reject(name: str) -> None:
    raise ValueError(name)  # NaN and Infinity are not JSON


def line_to_entry(job_id: str, project: str, task_name: str, offset: int, line: LogLine,
                  trial: str | None = None) -> Entry:
    """A LogEntry as Vertex AI writes a replica's output line. `offset` is the line's end in its file:
    insertId `<task>[-<trial>]-<offset, 12 digits>` sorts like the entries of one timestamp."""
    labels = {"ml.googleapis.com/task_name": task_name}
    if trial is not None:
        labels["ml.googleapis.com/trial_id"] = trial
    entry: Entry = {
        "logName": f"projects/{project}/logs/ml.googleapis.com%2F{job_id}",
        "resource": {"type": "ml_job", "labels": {"job_id": job_id, "task_name": task_name, "project_id": project}},
        "timestamp": line.timestamp,
        "receiveTimestamp": line.timestamp,
        "severity": "ERROR" if line.stream == "stderr" else "INFO",
        "insertId": f"{task_name}-{offset:012d}" if trial is None else f"{task_name}-{trial}-{offset:012d}",
        "labels": labels,
    }
    payload = _json_object(line.text)
    if payload is None:
        entry["textPayload"] = line.text
    else:
        level = payload.get("severity")
        if isinstance(level, str) and level.upper() in SEVERITIES:
            entry["severity"] = level.upper()
            del payload["severity"]  # Cloud Logging moves it out of the payload
        entry["jsonPayload"] = payload
    return entry


# ---------------------------------------------------------------- listing

Source = tuple[str, str, str | None, str, Path]  # job_id, project, trial, task_name, path
Key = tuple[int, str, str, str, int]  # timestamp ns, task_name, job_id, trial, offset: total and stable


def _files(sources: Iterable[tuple[str, str, Path, str | None]], tree: Node) -> list[Source]:
    def folded(fields: tuple[str, ...]) -> set[str] | None:
        values = _pins(tree, fields)
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
    if kind in ("and", "or"):
        return _per_file(node[1]) and _per_file(node[2])
    if kind == "not":
        return _per_file(node[1])
    return kind == "true" or (kind == "cmp" and node[1][0] in _FILE_FIELDS)


def _split(tree: Node) -> tuple[Node, Node]:
    """The filter as (the part about the file, the part about each line), joined by AND."""
    def conjuncts(node: Node) -> list[Node]:
        return conjuncts(node[1]) + conjuncts(node[2]) if node[0] == "and" else [node]

    def join(nodes: list[Node]) -> Node:
        return functools.reduce(lambda a, b: ("and", a, b), nodes) if nodes else ("true",)

    parts = conjuncts(tree)
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
            stamp = _nanos(raw.split(b" ", 1)[0].decode("ascii", "replace")) if raw.endswith(b"\n") else None
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
    raise FilterError(f"orderBy: unsupported order {order_by!r} (use 'timestamp asc' or 'timestamp desc')")


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
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        raise FilterError(f"pageToken: not a page token of this listing ({token[:40]!r})") from None


_PROBE = LogLine("1970-01-01T00:00:00.000000Z", "stdout", "")


def list_entries(sources: Iterable[tuple[str, str, Path, str | None]], *, filter_text: str = "",
                 order_by: str = "timestamp asc", page_size: int = DEFAULT_PAGE_SIZE,
                 page_token: str = "") -> dict:
    """One page of `entries.list`: `{"entries": [...], "nextPageToken": ...}` (no token on the last page).

    `sources` are `(job_id, project, job_dir, trial)`. Ascending pages stream the files through
    heapq.merge and their token holds, per file, the offset to continue from; descending pages keep the
    newest page_size + 1 entries and their token holds the key of the last one returned.
    """
    descending = _order(order_by)
    size = int(page_size or 0)
    size = DEFAULT_PAGE_SIZE if size <= 0 else min(size, MAX_PAGE_SIZE)
    tree = _Parser(filter_text or "").parse()
    per_file, per_line = _split(tree)
    file_match, match = _compile(per_file), _compile(per_line)
    state = _decode(page_token, descending)
    files = [f for f in _files(sources, tree) if file_match(line_to_entry(f[0], f[1], f[3], 0, _PROBE, f[2]))]
    floor, ceiling = _time_bound(tree, lower=True), _time_bound(tree, lower=False)

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
