"""Replica output capture: split chunks into lines, stamp them, keep them on disk.

Each line goes to `<job dir>/logs/<task_name>.log` as
`<RFC 3339 timestamp> <stdout|stderr> <text>`, the format the log API reads back.
A chunk's lines share one timestamp (taken when the chunk arrived), so the cost
per line is a split and a write, never a scan of other replicas.
"""

from __future__ import annotations

import collections
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

TAIL_LINES = 20

# on_lines(task_name, stream, timestamp, lines)
LinesHook = Callable[[str, str, str, list[str]], None]


class LogLine(NamedTuple):
    timestamp: str
    stream: str
    text: str


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ReplicaLog:
    """The output sink of one replica (fed from one thread at a time)."""

    def __init__(self, task_name: str, path: Path, on_lines: LinesHook | None = None) -> None:
        self.task_name = task_name
        self.path = path
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.line_count = 0
        self._partial = {"stdout": b"", "stderr": b""}
        self._file = open(path, "ab")
        self._on_lines = on_lines

    def __call__(self, stream: str, data: bytes) -> None:
        if not data:  # end of this stream: keep a last line without newline
            rest, self._partial[stream] = self._partial[stream], b""
            if rest:
                self._emit(stream, [rest])
            return
        data = self._partial[stream] + data
        *lines, self._partial[stream] = data.split(b"\n")
        if lines:
            self._emit(stream, lines)

    def _emit(self, stream: str, raw: list[bytes]) -> None:
        stamp = now_rfc3339()
        lines = [line.rstrip(b"\r").decode("utf-8", "replace") for line in raw]
        prefix = f"{stamp} {stream} "
        self._file.write("".join(prefix + line + "\n" for line in lines).encode("utf-8"))
        self._file.flush()  # readers follow the file live
        self.tail.extend(lines)
        self.line_count += len(lines)
        if self._on_lines:
            try:
                self._on_lines(self.task_name, stream, stamp, lines)
            except Exception as exc:  # e.g. `vtrain run | head` closed the pipe: keep capturing to the file
                self._on_lines = None
                print(f"vtrain: not showing {self.task_name}'s output any more ({exc!r}); "
                      f"it is still in {self.path}", file=sys.stderr)

    def close(self) -> None:
        if self._file.closed:
            return
        for stream in self._partial:
            self(stream, b"")
        self._file.close()


_LINE = re.compile(r"(\S+) (stdout|stderr) (.*)")


def read_log(path: Path, offset: int = 0) -> Iterator[tuple[int, LogLine]]:
    """Lines of a replica log from a byte offset, each with the offset after it.
    A last line still being written (no newline yet) is left for the next read."""
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f:
            if not raw.endswith(b"\n"):
                return
            offset += len(raw)
            m = _LINE.fullmatch(raw[:-1].decode("utf-8", "replace"))
            if m:
                yield offset, LogLine(*m.groups())
