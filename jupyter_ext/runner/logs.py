"""Replica output capture: split chunks into lines, stamp them, keep them on disk.

Each line goes to `<job dir>/logs/<task_name>.log` as
`<RFC 3339 timestamp> <stdout|stderr> <text>`, the format the log API reads back.
A chunk's lines share one timestamp (taken when the chunk arrived), so the cost
per line is a split and a write, never a scan of other replicas.

A line longer than MAX_LINE bytes (Cloud Logging's limit for an entry) is split
into entries of at most that size, at a UTF-8 character boundary; so a replica
that prints without newlines (progress bars) never grows the reader's memory.
The limit holds for the text as written: a byte that is not UTF-8 becomes U+FFFD
(3 bytes), so a piece is split again after decoding when it grew past the limit.
When the log cannot be written (a full disk, any I/O error), output is read and
dropped from then on, so the replica never blocks on a full pipe, and `on_error`
says why once, naming the cause and the file.
"""

from __future__ import annotations

import collections
import errno
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple

from .. import paths

TAIL_LINES = 20
MAX_LINE = 256 * 1024  # bytes of text in one entry, as Cloud Logging allows
TAIL_CHARS = 1000  # of each line kept for a failed job's error message

# on_lines(task_name, stream, timestamp, lines)
LinesHook = Callable[[str, str, str, list[str]], None]


class LogLine(NamedTuple):
    timestamp: str
    stream: str
    text: str


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def describe_os_error(exc: OSError) -> str:
    """`No space left on device (ENOSPC)`: the reason and its errno name."""
    name = errno.errorcode.get(exc.errno or 0, "")
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


class ReplicaLog:
    """The output sink of one replica (fed from one thread at a time). Opening the file may
    raise OSError; nothing after that does."""

    def __init__(self, task_name: str, path: Path, on_lines: LinesHook | None = None,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.task_name = task_name
        self.path = path
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.line_count = 0
        self.error = ""  # why the log could not be written, once it could not
        self._partial = {"stdout": b"", "stderr": b""}
        self._file = open(path, "ab", opener=paths.private_opener)  # the owner's only
        self._on_lines = on_lines
        self._on_error = on_error

    def __call__(self, stream: str, data: bytes) -> None:
        if not data:  # end of this stream: keep a last line without newline
            rest, self._partial[stream] = self._partial[stream], b""
            if rest:
                self._emit(stream, [rest])
            return
        data = self._partial[stream] + data
        *lines, rest = data.split(b"\n")
        pieces = [piece for line in lines for piece in _split(line)]
        while len(rest) > MAX_LINE:
            cut = _cut(rest)
            pieces.append(rest[:cut])
            rest = rest[cut:]
        self._partial[stream] = rest
        if pieces:
            self._emit(stream, pieces)

    def _emit(self, stream: str, raw: list[bytes]) -> None:
        if self.error:
            return  # the job is failing for it: drop, so the replica never blocks
        stamp = now_rfc3339()
        lines = [text for line in raw for text in _fit(line.rstrip(b"\r").decode("utf-8", "replace"))]
        prefix = f"{stamp} {stream} "
        try:
            self._file.write("".join(prefix + line + "\n" for line in lines).encode("utf-8"))
            self._file.flush()  # readers follow the file live
        except OSError as exc:
            self._failed(exc)
            return
        self.tail.extend(line[:TAIL_CHARS] for line in lines)
        self.line_count += len(lines)
        if self._on_lines:
            try:
                self._on_lines(self.task_name, stream, stamp, lines)
            except Exception as exc:  # e.g. `vtrain run | head` closed the pipe: keep capturing to the file
                self._on_lines = None
                _say(f"vtrain: not showing {self.task_name}'s output any more ({exc!r}); it is still in {self.path}")

    def note(self, text: str) -> None:
        """A line of the runner's own about this replica (`[runner] ...`), between its outputs: a reader of
        the log (the monitor, the panel, a saved notebook) sees why the replica's output stops and goes on."""
        self._emit("stdout", [f"[runner] {text}".encode()])

    def _failed(self, exc: OSError) -> None:
        self.error = f"cannot write {self.task_name}'s log: {describe_os_error(exc)}: {self.path}"
        if self._on_error:
            self._on_error(self.error)

    def close(self) -> None:
        if self._file.closed:
            return
        for stream in self._partial:
            self(stream, b"")
        try:
            self._file.close()
        except OSError as exc:  # what was still buffered could not be written
            if not self.error:
                self._failed(exc)


def _split(line: bytes) -> list[bytes]:
    """A line as entries of at most MAX_LINE bytes."""
    pieces = []
    while len(line) > MAX_LINE:
        cut = _cut(line)
        pieces.append(line[:cut])
        line = line[cut:]
    pieces.append(line)
    return pieces


def _fit(text: str) -> list[str]:
    """Decoded text as entries of at most MAX_LINE bytes in UTF-8 (U+FFFD for a bad byte takes 3)."""
    if len(text) * 4 <= MAX_LINE or (text.isascii() and len(text) <= MAX_LINE):  # fits: no need to encode
        return [text]
    return [piece.decode("utf-8") for piece in _split(text.encode("utf-8"))]


def _cut(data: bytes) -> int:
    """Where to cut a too long line: at MAX_LINE, or up to 3 bytes before, not inside a UTF-8 character."""
    cut = MAX_LINE
    while cut > MAX_LINE - 3 and data[cut] & 0xC0 == 0x80:  # a continuation byte starts the next piece
        cut -= 1
    return cut


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr)
    except (OSError, ValueError):  # no terminal any more
        pass


_LINE = re.compile(r"(\S+) (stdout|stderr) (.*)")


def parse_line(raw: bytes) -> LogLine | None:
    """A whole line of a replica log (with its newline) as written here, else None."""
    m = _LINE.fullmatch(raw[:-1].decode("utf-8", "replace"))
    return LogLine(*m.groups()) if m else None
