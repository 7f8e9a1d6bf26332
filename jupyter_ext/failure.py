"""Why a job failed, in one place: which replica, how it ended, its last lines.

The runner writes a failed job's error with `ReplicaFailure.message()` (or
`timed_out`), a local tuning job's with `trials_failed`; Vertex AI writes its own
("The replica workerpool1-0 exited with a non-zero status of 3. Termination
reason: Error."). `parse` reads them all and `one_line` shortens them, so the
monitor, the magic and the CLI name the failing replica the same way for local
and cloud jobs.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, replace
from typing import Callable

LOST = -1000  # not an exit code: the runner lost contact with the replica

_OURS = re.compile(r"replica (?P<task>workerpool\d+-\d+) \((?P<role>\w+)\) (?:exited with code (?P<code>-?\d+)"
                   r"|was killed by (?P<signal>SIG\w+)|(?P<lost>could not be watched))")
_VERTEX = re.compile(r"[Rr]eplica (?P<task>workerpool\d+-\d+) exited with a non-zero status of (?P<code>-?\d+)")
_TAIL = "; last lines:\n"
_TRIAL = re.compile(r"(?P<outcome>[^\n]*?); last failure: trial (?P<trial>\w+): ")
_TIMEOUT = re.compile(r"the job ran longer than its scheduling\.timeout of \S+s")


@dataclass(frozen=True)
class ReplicaFailure:
    task_name: str
    role: str = ""
    exit_code: int | None = None  # negative: killed by that signal; LOST: contact lost; None: unknown
    tail: tuple[str, ...] = ()
    trial: str = ""  # of a tuning job: the trial the replica ran in

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
        return f"replica {self.task_name}{role} {self.how}" + (f"{_TAIL}{detail}" if detail else "")


def trials_failed(outcome: str, trial_id: str, error: str) -> str:
    """A tuning job's error: what became of it ("all 2 trials failed"), then its last failed trial's error."""
    return f"{outcome}; last failure: trial {trial_id}: {error}"


def timed_out(seconds: float) -> str:
    """The runner's error for a job that ran past its scheduling.timeout."""
    return f"the job ran longer than its scheduling.timeout of {seconds:g}s"


def is_timeout(error: str) -> bool:
    """Whether a job failed for its scheduling.timeout (its whole error is `timed_out`'s: a replica that
    printed those words failed otherwise)."""
    return _TIMEOUT.fullmatch(error) is not None


def split(error: str) -> tuple[str, tuple[str, ...]]:
    """An error's first line, without the `last lines:` block, and that block's lines."""
    head, _, block = error.partition(_TAIL)
    return (head.splitlines() or [""])[0], tuple(line[2:] for line in block.splitlines())


def parse(error: str) -> ReplicaFailure | None:
    """The failing replica a job's error message names (the runner's, a tuning job's last failed
    trial's, or Vertex AI's), else None."""
    if m := _TRIAL.match(error):
        found = parse(error[m.end():])
        return replace(found, trial=m["trial"]) if found else None
    if m := _OURS.search(error):
        if m["lost"]:
            code: int | None = LOST
        elif m["signal"]:
            code = -int(getattr(signal.Signals, m["signal"], 0))
        else:
            code = int(m["code"])
        return ReplicaFailure(m["task"], m["role"], code, split(error)[1])
    if m := _VERTEX.search(error):
        return ReplicaFailure(m["task"], "", int(m["code"]))
    return None


def one_line(error: str, log: Callable[[ReplicaFailure], str | None]) -> str:
    """A job's error as one line: the failing replica (and its trial), how it ended and where its log is
    (`log(replica)`; None: nowhere to point to, the first line is kept); else the error's first line."""
    replica = parse(error)
    where = log(replica) if replica else None
    if replica is None or where is None:
        return split(error)[0]
    line = f"replica {replica.task_name} {replica.how}; its log: {where}"
    if m := _TRIAL.match(error):
        return trials_failed(m["outcome"], replica.trial, line)
    return line
