"""Why a job failed, in one place: which replica, how it ended, its last lines.

The runner writes a failed job's error with `ReplicaFailure.message()`; Vertex AI
writes its own ("The replica workerpool1-0 exited with a non-zero status of 3.
Termination reason: Error."). `parse` reads both, so the monitor, the magic and
the CLI name the failing replica the same way for local and cloud jobs.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

LOST = -1000  # not an exit code: the runner lost contact with the replica

_OURS = re.compile(r"replica (?P<task>workerpool\d+-\d+) \((?P<role>\w+)\) (?:exited with code (?P<code>-?\d+)"
                   r"|was killed by (?P<signal>SIG\w+)|(?P<lost>could not be watched))")
_VERTEX = re.compile(r"[Rr]eplica (?P<task>workerpool\d+-\d+) exited with a non-zero status of (?P<code>-?\d+)")


@dataclass(frozen=True)
class ReplicaFailure:
    task_name: str
    role: str = ""
    exit_code: int | None = None  # negative: killed by that signal; LOST: contact lost; None: unknown
    tail: tuple[str, ...] = ()

    @property
    def how(self) -> str:
        """`exited with code 3`, `was killed by SIGKILL`, ..."""
        if self.exit_code == LOST:
            return "could not be watched any more (its backend lost contact with it)"
        if self.exit_code is None:
            return "failed"
        if self.exit_code < 0:
            try:
                return f"was killed by {signal.Signals(-self.exit_code).name}"
            except ValueError:
                return f"was killed by signal {-self.exit_code}"
        return f"exited with code {self.exit_code}"

    def message(self) -> str:
        """The job's error text, as the runner records it: a first line, then the last output lines."""
        role = f" ({self.role})" if self.role else ""
        detail = "\n".join(f"  {line}" for line in self.tail)
        return f"replica {self.task_name}{role} {self.how}" + (f"; last lines:\n{detail}" if detail else "")


def parse(error: str) -> ReplicaFailure | None:
    """The failing replica a job's error message names (the runner's or Vertex AI's), else None."""
    if m := _OURS.search(error):
        if m["lost"]:
            code: int | None = LOST
        elif m["signal"]:
            code = -int(getattr(signal.Signals, m["signal"], 0))
        else:
            code = int(m["code"])
        tail = tuple(line[2:] for line in error.split("; last lines:\n", 1)[1].splitlines()) if \
            "; last lines:\n" in error else ()
        return ReplicaFailure(m["task"], m["role"], code, tail)
    if m := _VERTEX.search(error):
        return ReplicaFailure(m["task"], "", int(m["code"]))
    return None
