"""The Logging query language: parse a filter into a tree, test LogEntry dicts against it, and read
off what it implies (the values it pins a field to, its time bounds).

A tree is nested tuples: ("true",) ("and"|"or", a, b, ...) ("not", a) ("global", value, pos)
("cmp", path, op, value, quoted, value_pos); a chain of ANDs (or ORs) is one node, so a long
filter is a wide tree, not a deep one. Precedence, case-folding and the severity and time
comparisons are described in the package docstring.

Bounds, so no filter can exhaust the service: at most MAX_LENGTH characters (Cloud Logging's
20,000) and MAX_DEPTH levels of parentheses and NOT (the workbench's choice); regular expressions
(`=~`, `!~`) are RE2's, as Cloud Logging's are, and match in time linear in the text, times their
size when RE2's DFA gives up: so all of a filter's regular expressions compile to at most
MAX_REGEX_PROGRAM instructions.
"""

from __future__ import annotations

import calendar
import functools
import operator
import re
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

import re2

from ...errors import FilterError

MAX_LENGTH = 20_000  # characters, as Cloud Logging's filters
MAX_DEPTH = 64  # nested parentheses and NOTs
# RE2 instructions in all of a filter's regular expressions. A pattern that defeats RE2's DFA (as
# `[ab]*a[ab]{990}c`) runs its NFA, about 9 ns per instruction per byte: 1000 keep the search of one
# 256 KB line under ~2.5 s (the longest step of a listing's time budget), while the searches people
# write compile to tens (`(?i)error|warn`: 13) or a few hundred (an alternation of 20 words: 142).
MAX_REGEX_PROGRAM = 1000

SEVERITIES = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500,
              "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800}

Entry = dict[str, Any]  # a LogEntry in proto3 JSON
Node = tuple  # one node of a filter tree (see the module docstring)


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
        self.s, self.i, self.depth = text, 0, 0
        self.program = 0  # RE2 instructions of the regular expressions so far

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
        if len(self.s) > MAX_LENGTH:
            raise FilterError(f"filter: {len(self.s)} characters, at most {MAX_LENGTH}")
        if not self.more():
            return ("true",)
        node = self.expression(None)
        if self.more():
            raise self.error(f"unexpected {self.peek()!r}")
        return node

    def chain(self, keyword: str, operand: Callable[[tuple | None], Node], ctx: tuple | None) -> Node:
        """`operand {keyword operand}`: one node."""
        nodes = [operand(ctx)]
        while self.keyword(keyword):
            nodes.append(operand(ctx))
        return _join(keyword.lower(), nodes)

    def expression(self, ctx: tuple | None) -> Node:
        return self.chain("AND", self.sequence, ctx)

    def sequence(self, ctx: tuple | None) -> Node:
        nodes = [self.factor(ctx)]
        while self.more() and self.peek() != ")" and self.word() != "AND":
            nodes.append(self.factor(ctx))
        return _join("and", nodes)

    def deeper(self) -> None:
        """One more level of parentheses or NOT."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep (parentheses and NOT)")

    def factor(self, ctx: tuple | None) -> Node:
        return self.chain("OR", self.term, ctx)

    def term(self, ctx: tuple | None) -> Node:
        if not self.more():
            raise self.error("expected a comparison, found the end")
        negated = self.keyword("NOT")
        if not negated and self.peek() == "-":
            self.i += 1
            negated = True
        if negated:
            self.deeper()
            node = ("not", self.term(ctx))
            self.depth -= 1
            return node
        if self.word() in ("AND", "OR"):
            raise self.error(f"unexpected {self.word()}")
        if self.peek() == "(":
            return self.group(ctx)
        start = self.i
        if ctx:  # inside `field OP (v1 OR v2 ...)`: each term is a value
            value, quoted = self.value()
            return self.comparison(*ctx, value, quoted, start)
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
        return self.comparison(path, op, value, quoted, start)

    def comparison(self, path: tuple[str, ...], op: str, value: str, quoted: bool, start: int) -> Node:
        if op in ("=~", "!~"):
            self.program += _compile(value, start).programsize
            if self.program > MAX_REGEX_PROGRAM:
                raise self.error(f"regular expressions too large ({self.program} RE2 instructions in all, "
                                 f"at most {MAX_REGEX_PROGRAM})", start)
        return ("cmp", path, op, value, quoted, start)

    def group(self, ctx: tuple | None) -> Node:
        opened = self.i
        self.i += 1
        self.deeper()
        node = self.expression(ctx)
        if not self.more() or self.peek() != ")":
            raise self.error("unclosed '('", opened)
        self.i += 1
        self.depth -= 1
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


def _join(kind: str, nodes: list[Node]) -> Node:
    """`nodes` joined by AND or OR as one node (an operand of the same kind gives its operands)."""
    if len(nodes) == 1:
        return nodes[0]
    return (kind, *(child for node in nodes for child in (node[1:] if node[0] == kind else (node,))))


def parse_tree(text: str) -> Node:
    """The tree of a Logging query; '' is ("true",). Raises FilterError with the position."""
    return _Parser(text or "").parse()


def _field(text: str) -> tuple[str, ...]:
    parser = _Parser(text)
    path, _ = parser.path()
    if parser.more():
        raise parser.error("a field path expected")
    return path


def shown(value: str, width: int = 60) -> str:
    """A value quoted for a one-line error, cut to `width` characters."""
    return repr(value if len(value) <= width else value[:width] + "...")


# ---------------------------------------------------------------- matching

_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?)?\s*([Zz]|[+-]\d\d:?\d\d)?")
_COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def nanos(text: Any) -> int | None:
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


def _level(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.upper() in SEVERITIES:
            return SEVERITIES[value.upper()]
        if re.fullmatch(r"\d{1,18}", value):
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
    """The scalars inside a value, in order (without recursion: payloads may nest deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)):
            stack.extend(reversed(list(item.values() if isinstance(item, dict) else item)))
        else:
            yield item


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
        search = _regex(value, pos)
        return lambda v: not isinstance(v, (dict, list)) and search(_text(v)) == (op == "=~")
    if op == ":":
        needle = value.casefold()
        return lambda v: any(needle in _text(leaf).casefold() for leaf in _leaves(v))
    compare = _COMPARE[op]
    if path in (("timestamp",), ("receiveTimestamp",)):
        moment = nanos(value)
        if moment is None:
            raise FilterError(f"{shown(value)} is not an RFC 3339 timestamp", pos)
        return lambda v: (n := nanos(v)) is not None and compare(n, moment)
    if path == ("severity",):
        level = _level(value)
        if level is None:
            raise FilterError(f"unknown severity {shown(value)}", pos)
        return lambda v: (n := _level(v)) is not None and compare(n, level)
    number, text = _number(value), value.casefold()

    def test(v: Any) -> bool:
        if isinstance(v, (dict, list)) or v is None:
            return False
        if isinstance(v, (int, float)) and not isinstance(v, bool) and number is not None:
            return compare(v, number)
        return compare(_text(v).casefold(), text)
    return test


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a user's bad pattern is their 400, not the service's log
_RE2_OPTIONS.never_capture = True  # a search needs no groups: without them RE2 matches with its DFA, not its NFA


def _compile(pattern: str, pos: int) -> Any:
    """`pattern` as RE2 (cached by re2), or a FilterError at `pos`."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise FilterError(f"bad regular expression {shown(pattern)} ({reason})", pos) from None
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        raise FilterError(f"bad regular expression {shown(pattern)} (not valid Unicode)", pos) from None


def _regex(pattern: str, pos: int) -> Callable[[str], bool]:
    """An RE2 search (linear in the text, as Cloud Logging's) for `pattern`."""
    compiled = _compile(pattern, pos)

    def search(text: str) -> bool:
        try:
            return compiled.search(text) is not None
        except UnicodeEncodeError:  # a lone surrogate in a payload: RE2 reads UTF-8
            return compiled.search(text.encode("utf-8", "replace").decode("utf-8")) is not None
    return search


def predicate(node: Node) -> Callable[[Entry], bool]:
    """A tree compiled to a test of one LogEntry dict."""
    kind = node[0]
    if kind == "true":
        return lambda e: True
    if kind in ("and", "or"):
        tests = [predicate(child) for child in node[1:]]
        combine = all if kind == "and" else any
        return lambda e: combine(test(e) for test in tests)
    if kind == "not":
        inner = predicate(node[1])
        return lambda e: not inner(e)
    if kind == "global":
        needle = node[1].casefold()
        return lambda e: any(needle in _text(leaf).casefold() for leaf in _leaves(e))
    _, path, op, value, quoted, pos = node
    test = _comparison(path, op, value, quoted, pos)
    return lambda e: any(test(v) for v in _values(e, path))


def parse_filter(text: str) -> Callable[[Entry], bool]:
    """A predicate over LogEntry dicts (proto3 JSON) for a Logging query; '' matches everything."""
    return predicate(parse_tree(text))


# ---------------------------------------------------------------- what a filter implies

def _implied(node: Node, leaf: Callable[[Node], Any], meet: Callable, join: Callable) -> Any:
    """What every matching entry satisfies, from comparisons combined by AND (meet) and OR (join); None: nothing."""
    if node[0] in ("and", "or"):
        parts = [_implied(n, leaf, meet, join) for n in node[1:]]
        if node[0] == "and":
            known = [p for p in parts if p is not None]
            return functools.reduce(meet, known) if known else None
        return None if any(p is None for p in parts) else functools.reduce(join, parts)
    return leaf(node) if node[0] == "cmp" else None


def pins(tree: Node, fields: Iterable[str]) -> set[str] | None:
    """`pinned` over a parsed tree."""
    paths = {_field(f) for f in fields}
    return _implied(tree, lambda n: {n[3]} if n[2] == "=" and n[1] in paths else None,
                    set.intersection, set.union)


def pinned(text: str, field: str | Iterable[str]) -> set[str] | None:
    """The values `field` is pinned to by equalities ANDed at the top of the filter (through ORs of
    equalities), or None when it is not pinned. Several fields name one thing (any of them pins it)."""
    return pins(parse_tree(text), [field] if isinstance(field, str) else field)


def time_bound(tree: Node, lower: bool) -> int | None:
    """An inclusive bound on the timestamp of every matching entry (lower or upper), in nanoseconds."""
    ops = ("=", ">", ">=") if lower else ("=", "<", "<=")
    return _implied(tree, lambda n: nanos(n[3]) if n[1] == ("timestamp",) and n[2] in ops else None,
                    max if lower else min, min if lower else max)
