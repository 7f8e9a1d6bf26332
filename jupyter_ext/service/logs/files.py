"""Reading replica log files, which the replicas themselves can replace: the service opens only regular
files (a FIFO would block a reader for ever, a symlink may lead to /dev/zero), and reads at most
MAX_RAW bytes of a line at a time, so a line with no end grows no memory.

A file holds `<RFC 3339 timestamp> <stdout|stderr> <text>` lines (`runner.logs` writes them, splitting
text at MAX_LINE bytes). What is not such a line (too long, or another shape) is read past and stands as
`None` with the offset reached, so a listing with a time budget can say where it stopped; an offset may
then fall inside a line too long to keep, and reading from it goes on from the next line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterator

from ...runner.logs import MAX_LINE, LogLine, parse_line
from .query import nanos

MAX_RAW = MAX_LINE + 64  # a line as the runner writes it: timestamp, stream, text, newline
BLOCK = 64 * 1024  # bytes read at a time when reading backwards

Raw = tuple[int, bytes | None]  # a line's end offset (or how far a too long line was read) and its bytes


def open_log(path: Path) -> BinaryIO | None:
    """The log at `path` to read, or None when it is missing, unreadable or not a regular file."""
    try:  # O_NONBLOCK: opening a FIFO returns at once (then it is not regular); O_NOFOLLOW: no symlink
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def read_log(path: Path, offset: int = 0) -> Iterator[tuple[int, LogLine | None]]:
    """The lines of a replica log from a byte offset, each with the offset after it (None: not a log line).
    A last line still being written (no newline yet) is left for the next read."""
    f = open_log(path)
    if f is None:
        return
    with f:
        for end, raw in lines_after(f, offset):
            yield end, None if raw is None else parse_line(raw)


def _inside_line(f: BinaryIO, offset: int) -> bool:
    """Whether `offset` falls inside a line (not at the start of one)."""
    if offset <= 0:
        return False
    f.seek(offset - 1)
    return f.read(1) != b"\n"


def lines_after(f: BinaryIO, offset: int) -> Iterator[Raw]:
    """Whole lines from `offset` on, each with the offset after it; a line longer than MAX_RAW is read
    past in pieces, each one `(offset reached, None)`."""
    skipping = _inside_line(f, offset)  # resumed inside a line too long to keep: the rest of it goes too
    f.seek(offset)
    while raw := f.readline(MAX_RAW):
        ended = raw.endswith(b"\n")
        if not ended and not skipping and len(raw) < MAX_RAW:
            return  # still being written
        offset += len(raw)
        yield offset, None if skipping or not ended else raw
        skipping = not ended


def lines_before(f: BinaryIO, end: int) -> Iterator[Raw]:
    """Whole lines that end at or before `end`, newest first, as `lines_after` gives them; a line longer
    than MAX_RAW is read past in blocks, each one `(offset inside it, None)`."""
    end = min(end, f.seek(0, os.SEEK_END))
    line_end = end  # of the line being read backwards; `held` is its part read so far, `pos` where that starts
    too_long = _inside_line(f, end)  # a line that goes on after `end` is not whole: read past it
    newline_before = end - 1 if not too_long else end  # the line's own newline is not the start of it
    held, pos = b"", end
    while pos > 0:
        start = max(0, pos - BLOCK)
        f.seek(start)
        block = f.read(pos - start)
        if len(block) != pos - start:
            return  # truncated under us
        i = len(block)
        while (n := block.rfind(b"\n", 0, min(i, newline_before - start))) >= 0:
            line = block[n + 1:i] + held
            if not too_long and len(line) <= MAX_RAW:
                yield line_end, line
            line_end, newline_before, i = start + n + 1, start + n, n + 1
            held, too_long = b"", False
        pos = start
        held = b"" if too_long else block[:i] + held
        if too_long or len(held) > MAX_RAW:
            held, too_long = b"", True
            if pos:  # one past `pos`: inside this line for sure, and after the end of the line before it
                yield pos + 1, None
    if held and not too_long:
        yield line_end, held


def seek_time(f: BinaryIO, floor: int, unstamped_after: bool = True) -> int:
    """The start of the first line stamped at or after `floor`, by a binary search (lines are in time
    order). A line without a timestamp counts as after (the search may land early: where to start
    reading) or, not `unstamped_after`, as before (it may land late: where to stop)."""
    def start_at(pos: int) -> int:
        """The first line start at or after `pos`, if one is near: else `pos`."""
        if not _inside_line(f, pos):
            return pos
        f.seek(pos)
        rest = f.readline(MAX_RAW)
        return pos + len(rest) if rest.endswith(b"\n") else pos

    def reached(start: int) -> bool:
        f.seek(start)
        raw = f.readline(MAX_RAW)
        stamp = nanos(raw.split(b" ", 1)[0].decode("ascii", "replace")) if raw.endswith(b"\n") else None
        return unstamped_after if stamp is None else stamp >= floor

    lo, hi = 0, f.seek(0, os.SEEK_END)
    while lo < hi:
        mid = (lo + hi) // 2
        if reached(start_at(mid)):
            hi = mid
        else:
            lo = mid + 1
    return start_at(lo)
