"""The local limits: how much the local service lets jobs take of this machine, and how to change them.

On this machine every replica is a process (or a container), so one typo (replicaCount 5000 for 5)
could start thousands of them. The local service therefore checks each job at create, one line
naming the field, and queues what does not fit now, as Vertex AI queues jobs:

| limit | default | flag of `vtrain service start` and `python -m jupyter_ext.service` |
|---|---|---|
| replicas of one job (a tuning job: of one trial) | the total below | `--max-replicas-per-job N` |
| replicas running at once, all jobs together | 4 per CPU core, at most one per 256 MiB of memory, at least 4 | `--max-replicas N` |
| jobs running at once (a tuning job is one) | 2 per CPU core, at least 2 | `--max-running-jobs N` |
| trials of one tuning job (`maxTrialCount`) | 1000 | `--max-trials N` |

A job over its own limit (or over the total, which it could never fit in) is refused with 400
INVALID_ARGUMENT; a job that fits but not beside the running ones stays QUEUED, in creation
order, until enough replicas and a job slot are free. A tuning job runs as many trials at once as
fit in one job's replicas (`parallelTrialCount` at most: Vertex AI too treats it as a maximum). A running service keeps the limits it was
started with (`vtrain service status --json` shows them): to change them, `vtrain service stop`, then
`vtrain service start` with the flags. `vtrain run` runs one job without the service: it refuses a
job over the per-job default the same way, and its `--max-replicas N` raises that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import SpecError

REPLICAS_PER_CORE = 4
MEMORY_PER_REPLICA = 256 * 2**20  # bytes: a small Python replica, with room to spare
JOBS_PER_CORE = 2
DEFAULT_TRIALS = 1000
HOW = "`vtrain service stop`, then `vtrain service start {flag} N`"


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def memory() -> int:
    """Bytes of memory: the machine's, or the cgroup's limit when lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(text)) if text.isdigit() else total


def machine_replicas() -> int:
    return max(4, min(REPLICAS_PER_CORE * cores(), memory() // MEMORY_PER_REPLICA))


@dataclass(frozen=True)
class Limits:
    """The limits a service runs with; 0 in a field means this machine's default (see the module notes)."""

    max_replicas_per_job: int = 0
    max_replicas: int = 0
    max_running_jobs: int = 0
    max_trials: int = 0

    def __post_init__(self) -> None:
        replicas = self.max_replicas or machine_replicas()
        object.__setattr__(self, "max_replicas", replicas)
        object.__setattr__(self, "max_replicas_per_job", self.max_replicas_per_job or replicas)
        object.__setattr__(self, "max_running_jobs", self.max_running_jobs or max(2, JOBS_PER_CORE * cores()))
        object.__setattr__(self, "max_trials", self.max_trials or DEFAULT_TRIALS)

    @property
    def replicas_per_job(self) -> int:
        """What one job may hold: it must also fit in the total, or it could never start."""
        return min(self.max_replicas_per_job, self.max_replicas)

    @classmethod
    def from_args(cls, args: Any) -> Limits:
        return cls(**{f.name: getattr(args, f.name, None) or 0 for f in fields(cls)})

    def argv(self) -> list[str]:
        """The flags that set these limits where they differ from this machine's defaults."""
        default = Limits(max_replicas=self.max_replicas)  # replicas per job follow the total by default
        changed = [f.name for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)]
        if self.max_replicas != machine_replicas():
            changed.insert(0, "max_replicas")
        return [f"--{name.replace('_', '-')}={getattr(self, name)}" for name in changed]


def add_arguments(parser: Any, when: str = "") -> None:
    """The limits' flags, on the service's and on `vtrain service`'s parser."""
    default = Limits()
    why = f"{REPLICAS_PER_CORE} per CPU core, at most one per {MEMORY_PER_REPLICA >> 20} MiB of memory"
    parser.add_argument("--max-replicas", type=positive, metavar="N", help=f"{when}replicas running at once, all "
                        f"jobs together; more wait QUEUED (default: {default.max_replicas} on this machine: {why})")
    parser.add_argument("--max-replicas-per-job", type=positive, metavar="N", help=f"{when}replicas of one job "
                        "(a tuning job: a trial's replicas times parallelTrialCount); a larger job is refused "
                        "(default: --max-replicas)")
    parser.add_argument("--max-running-jobs", type=positive, metavar="N", help=f"{when}jobs running at once; more "
                        f"wait QUEUED (default: {default.max_running_jobs} on this machine: {JOBS_PER_CORE} per CPU "
                        "core)")
    parser.add_argument("--max-trials", type=positive, metavar="N", help=f"{when}maxTrialCount of a tuning job "
                        f"(default: {DEFAULT_TRIALS})")


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number, at least `minimum` (argparse names the flag in its error)."""
    import argparse

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return whole_number


positive = at_least(1)  # the limits' flags, and counts of trials


# ---------------------------------------------------------------- checks at create

def job_replicas(pools: Iterable[Any]) -> int:
    """The replicas a CustomJobSpec's worker pools start."""
    return sum(max(0, pool.replica_count) for pool in pools)


def check_job(pools: Iterable[Any], limits: Limits, where: str = "workerPoolSpecs", runner: str = "service") -> None:
    """Refuse a job with more replicas than one job may have here, naming the pool that crosses the limit.
    `runner` says who runs it: the local `service` or `vtrain run` (whose own flag raises the limit)."""
    limit, total = limits.replicas_per_job, 0
    for pos, pool in enumerate(pools):
        total += max(0, pool.replica_count)
        if total > limit:
            raise SpecError(f"{where}[{pos}].replicaCount", f"{pool.replica_count} makes {total} replicas, more "
                                                            f"than the local limit of {limit} per job; "
                                                            f"{_why(limits, runner)}")


def check_tuning(resource: Any, limits: Limits) -> None:
    """Refuse a tuning job with more trials, or a trial with more replicas, than the local limits allow."""
    if resource.max_trial_count > limits.max_trials:
        raise SpecError("maxTrialCount", f"{resource.max_trial_count} trials, more than the local limit of "
                                         f"{limits.max_trials}; to run more, {HOW.format(flag='--max-trials')}")
    check_job(resource.trial_job_spec.worker_pool_specs, limits, "trialJobSpec.workerPoolSpecs")


def trials_at_once(resource: Any, limits: Limits) -> int:
    """The trials a tuning job runs at once here: parallelTrialCount, or fewer when that many
    would hold more replicas than one job may."""
    per_trial = max(1, job_replicas(resource.trial_job_spec.worker_pool_specs))
    wanted = max(1, min(resource.parallel_trial_count, resource.max_trial_count))
    return max(1, min(wanted, limits.replicas_per_job // per_trial))


def tuning_replicas(resource: Any, limits: Limits) -> int:
    """The replicas a tuning job holds while it runs: a trial's, times the trials run at once."""
    return job_replicas(resource.trial_job_spec.worker_pool_specs) * trials_at_once(resource, limits)


def _why(limits: Limits, runner: str = "service") -> str:
    """Why the replica limit is what it is, and how to raise it."""
    flag = "--max-replicas-per-job" if limits.max_replicas_per_job < limits.max_replicas else "--max-replicas"
    how = HOW.format(flag=flag) if runner == "service" else "run it with `vtrain run --max-replicas N`"
    if limits.replicas_per_job != Limits().replicas_per_job:
        if runner != "service":
            return "to allow more, give a larger --max-replicas"
        reason = "the local service was started with that limit"
    elif REPLICAS_PER_CORE * cores() <= memory() // MEMORY_PER_REPLICA:
        reason = f"each replica is a process here: {REPLICAS_PER_CORE} per CPU core, and this machine has {cores()}"
    else:
        reason = (f"each replica is a process here: one per {MEMORY_PER_REPLICA >> 20} MiB of memory, and this "
                  f"machine has {memory() >> 20} MiB")
    return f"{reason}; to allow more, {how}"
