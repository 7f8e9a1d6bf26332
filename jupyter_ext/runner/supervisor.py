"""One supervisor for every backend: starts the replicas, owns the job's state.

Job semantics, as on Vertex AI (DESIGN.md):
- the job's state is the primary's: when it succeeds the job succeeds, workers
  and evaluators get `finish_grace` seconds to end on their own, and whatever
  still runs (parameter servers never exit) is stopped;
- when any replica fails, the job fails at once, the others are stopped, and
  the error names the replica and its last output lines;
- cancel (or Ctrl-C) stops everything: CANCELLING, then CANCELLED;
- `scheduling.timeout` fails the job when it runs longer;
- with `scheduling.restartJobOnWorkerRestart` a replica that fails is started
  again (up to MAX_RESTARTS times), the others keep running (Vertex AI restarts the
  whole job when a worker's machine is restarted: a replica's exit stands for that here);
- when a replica's output cannot be written (a full disk, any I/O error), or the
  job's own files cannot, the job fails at once with an error naming the cause
  and the file;
- on every outcome each replica and everything it started is stopped, its
  output drained to `<job dir>/logs/`, and the backend cleaned up.

`status.json` in the job folder records the job as it runs and ends, with the
runner process (`runner`, see `reaper`): a job it still calls RUNNING whose
runner is gone was abandoned (its runner was killed).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import cluster, paths, scheduling, states, validate
from ..cluster import Replica
from ..errors import BackendError
from ..failure import LOST, ReplicaFailure, timed_out
from ..spec import JobSpec
from .backend import Backend, ReplicaHandle, get_backend
from .logs import LinesHook, ReplicaLog, describe_os_error, now_rfc3339
from .reaper import this_runner

SERVER_ROLES = ("parameter_server", "reduction_server")
ERROR_TAIL = 10
MAX_RESTARTS = 3


@dataclass
class ReplicaResult:
    task_name: str
    role: str
    address: str
    exit_code: int | None = None  # None: stopped by the runner
    lines: int = 0
    ident: str = ""  # the backend's name for it: a process group ID, a container ID
    restarts: int = 0


@dataclass
class JobResult:
    job_id: str
    display_name: str
    state: str
    error: str
    job_dir: str
    backend: str
    create_time: str
    python: str = ""  # the interpreter process replicas ran with
    runner: str = field(default_factory=this_runner)  # the process that runs the job (reaper.runner_alive)
    start_time: str = ""
    end_time: str = ""
    replicas: list[ReplicaResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return states.exit_code(self.state)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Supervisor:
    def __init__(
        self,
        job: JobSpec,
        *,
        backend: str | Backend = "process",
        job_dir: Path | str | None = None,
        job_id: str | None = None,
        trial: str | None = None,
        on_state: Callable[[str], None] | None = None,
        on_lines: LinesHook | None = None,
        on_note: Callable[[str], None] | None = None,
        stop_grace: float = 5.0,
        finish_grace: float = 2.0,
        extra_env: Callable[[Replica], dict[str, str]] | None = None,
    ) -> None:
        self.job = job
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.job_id = job_id or paths.new_job_id()
        self.job_dir = Path(job_dir) if job_dir else paths.jobs_dir() / self.job_id
        self.trial = trial
        self.on_state, self.on_lines, self.on_note = on_state, on_lines, on_note
        self.stop_grace, self.finish_grace = stop_grace, finish_grace
        self.extra_env = extra_env  # more variables for a replica, e.g. a tuning trial's metrics file
        self.state = "QUEUED"
        self.replicas: list[Replica] = []
        self._events: queue.Queue[tuple[str, int, int]] = queue.Queue()
        self._handles: list[ReplicaHandle] = []
        self._pools: dict[int, Any] = {}
        self._logs: list[ReplicaLog] = []
        self._exit_codes: dict[int, int] = {}
        self._cancelled = threading.Event()
        self._failed: tuple[int, int] | None = None
        self._cancel_reason = ""
        self.result = JobResult(self.job_id, job.display_name, "QUEUED", "", str(self.job_dir),
                                self.backend.name, now_rfc3339(),
                                self.backend.runtime.python if self.backend.runtime else "")

    # ---- public ------------------------------------------------------------
    def cancel(self, reason: str = "cancelled by the user") -> None:
        """Stop the job from any thread; `run()` returns with CANCELLED."""
        self._cancel_reason = reason
        self._cancelled.set()
        self._events.put(("cancel", -1, 0))

    def run(self) -> JobResult:
        """Run the job to its end and return how it ended. Ctrl-C cancels it."""
        try:
            state, error = self._run()
        except KeyboardInterrupt as exc:  # Ctrl-C, or a signal the caller turned into one (with its reason)
            self._set_state("CANCELLING")
            state, error = "CANCELLED", str(exc) or "cancelled by the user (Ctrl-C)"
        except BackendError as exc:
            state, error = "FAILED", str(exc)
        except OSError as exc:  # the job's own files: job.json, status.json, a log that cannot be opened
            state, error = "FAILED", f"the runner cannot go on: {describe_os_error(exc)}" + \
                (f": {exc.filename}" if exc.filename else "")
        finally:
            self._shutdown()
        return self._finish(state, error)

    # ---- steps -------------------------------------------------------------
    def _run(self) -> tuple[str, str]:
        validate.check(self.job)
        if note := scheduling.local_notice(self.job):
            self._note(note)
        paths.private_dir(self.job_dir / "logs")  # job.json holds the env values: the owner's only
        paths.write_private(self.job_dir / "job.json", self.job.dump("rest"))
        self._set_state("PENDING")
        for note in self.backend.prepare(self.job_dir, self.job):
            self._note(note)
        base = self.job.custom_job_spec().base_output_directory.output_uri_prefix
        output_dir, note = paths.local_output_dir(base, self.job_dir)
        if note:
            self._note(note)
        self.replicas = cluster.replicas(
            self.job, trial=self.trial, style=self.backend.address_style, job_id=self.job_id, output_dir=output_dir,
            ports=self.backend.ports(self.job.replica_count))
        if self.extra_env:
            for replica in self.replicas:
                replica.env.update(self.extra_env(replica))
        self.result.replicas = [ReplicaResult(r.task_name, r.role, r.address) for r in self.replicas]
        if self.backend.address_style != "cloud":  # on Cloud Storage folders need no creating; here they do
            for folder in cluster.output_env(output_dir, self.trial).values():
                paths.make_dir(Path(folder))
        self._pools = dict(self.job.pools)
        for n, replica in enumerate(self.replicas):
            if self._cancelled.is_set():
                return "CANCELLED", self._cancel_reason
            log = ReplicaLog(replica.task_name, self.job_dir / "logs" / f"{replica.task_name}.log", self.on_lines,
                             on_error=lambda _error, n=n: self._events.put(("io-error", n, 0)))
            self._logs.append(log)
            self._handles.append(self._start(n))
        self.result.start_time = now_rfc3339()
        self._set_state("RUNNING")
        self._write_status()  # what runs, so a restarted service can clean up after a crash
        return self._supervise()

    def _start(self, n: int) -> ReplicaHandle:
        replica = self.replicas[n]
        handle = self.backend.start(replica, self._pools[replica.pool], self._logs[n])
        self.result.replicas[n].ident = handle.ident
        threading.Thread(target=self._watch_exit, args=(n, handle), daemon=True, name=f"wait-{replica.task_name}").start()
        return handle

    def _restart(self, n: int, code: int) -> bool:
        """restartJobOnWorkerRestart: start a failed replica again, keeping the others (at most
        MAX_RESTARTS times each); its log goes on in the same file, after a line saying so. (On Vertex AI
        the field restarts the whole job when a worker's machine is restarted; here a replica's exit
        stands for that, and only that replica starts again.)"""
        if not self.job.spec.scheduling.restart_job_on_worker_restart or self.job.spec.scheduling.disable_retries:
            return False
        result = self.result.replicas[n]
        if result.restarts >= MAX_RESTARTS:
            return False
        old = self._handles[n]
        old.kill()  # what it started goes too
        old.wait_output(5.0)
        result.restarts += 1
        note = (f"{result.task_name} exited with code {code}; restarting it "
                f"(restartJobOnWorkerRestart, restart {result.restarts} of {MAX_RESTARTS})")
        self._logs[n].note(note)  # the log's readers see it (and `vtrain run` shows the log's lines)
        if self.on_lines is None:
            self._note(note)
        self._handles[n] = self._start(n)
        self._write_status()  # the new process or container (vtrain shell finds replicas there)
        return True

    def _watch_exit(self, n: int, handle: ReplicaHandle) -> None:
        for _attempt in range(3):  # a backend that loses contact (an engine hiccup) answers None or raises
            try:
                code = handle.wait()
            except BackendError:
                code = None
            if code is not None:
                self._events.put(("exit", n, code))
                return
            time.sleep(1.0)
        self._events.put(("lost", n, LOST))

    def _supervise(self) -> tuple[str, str]:
        timeout = self.job.spec.scheduling.timeout.total_seconds() if "timeout" in self.job.spec.scheduling else 0
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return "FAILED", timed_out(timeout)
            try:
                kind, n, code = self._events.get(timeout=min(wait, 1.0) if wait is not None else 1.0)
            except queue.Empty:
                continue
            if kind == "cancel":
                self._set_state("CANCELLING")
                return "CANCELLED", self._cancel_reason
            replica = self.replicas[n]
            if kind == "io-error":
                return "FAILED", self._logs[n].error
            if kind == "lost":
                self._failed = (n, LOST)
                return "FAILED", ""
            if code != 0 and self._restart(n, code):
                continue
            self._exit_codes[n] = code
            if code != 0:
                self._failed = (n, code)  # described after shutdown, when its output is complete
                return "FAILED", ""
            if replica.is_primary:
                return "SUCCEEDED", ""

    def _failure(self) -> str:
        n, code = self._failed
        replica = self.replicas[n]
        return ReplicaFailure(replica.task_name, replica.role, code, tuple(self._logs[n].tail)[-ERROR_TAIL:]).message()

    def _shutdown(self) -> None:
        """Stop whatever still runs, drain output, clean the backend. A second Ctrl-C only
        cuts the grace period short: every replica is still killed."""
        try:
            running = [n for n in range(len(self._handles)) if n not in self._exit_codes]
            try:
                if self.state == "RUNNING" and self._exit_codes.get(0) == 0:
                    self._let_finish(running)
                for n in running:
                    self._handles[n].terminate()
                stop_by = time.monotonic() + self.stop_grace
                for n in running:  # a replica the runner stopped keeps exit_code None
                    self._handles[n].wait(max(0.0, stop_by - time.monotonic()))
            except KeyboardInterrupt:
                pass
            for handle in self._handles:
                handle.kill()  # also what a replica left behind
            for handle in self._handles:
                handle.wait(5.0)
                handle.wait_output(5.0)
        finally:
            for log in self._logs:
                log.close()
            self.backend.cleanup()

    def _let_finish(self, running: list[int]) -> None:
        """After the primary succeeded, servers stop now; others may end on their own."""
        finish_by = time.monotonic() + self.finish_grace
        for n in running:
            if self.replicas[n].role not in SERVER_ROLES:
                code = self._handles[n].wait(max(0.0, finish_by - time.monotonic()))
                if code is not None:
                    self._exit_codes[n] = code
        running[:] = [n for n in running if n not in self._exit_codes]

    def _finish(self, state: str, error: str) -> JobResult:
        for n, code in self._exit_codes.items():
            self.result.replicas[n].exit_code = code
        for n, log in enumerate(self._logs):
            self.result.replicas[n].lines = log.line_count
        self.result.error = error or (self._failure() if self._failed else "")
        lost_output = next((log.error for log in self._logs if log.error), "")
        if lost_output and state == "SUCCEEDED":  # its last lines could not be kept
            state, self.result.error = "FAILED", lost_output
        self.result.end_time = now_rfc3339()
        self._set_state(state)
        try:
            self._write_status()
        except OSError as exc:  # the job is over and says how; only its record on disk is missing
            self._note(f"cannot write {self.job_dir / 'status.json'}: {describe_os_error(exc)}")
        return self.result

    def _set_state(self, state: str) -> None:
        self.state = self.result.state = state
        if self.on_state:
            self.on_state(state)

    def _note(self, text: str) -> None:
        if self.on_note:
            self.on_note(text)

    def _write_status(self) -> None:
        if self.job_dir.is_dir():
            paths.write_private(self.job_dir / "status.json", json.dumps(self.result.to_dict(), indent=2) + "\n")


def run_job(job: JobSpec, **kwargs: Any) -> JobResult:
    """Run `job` on this machine (see `Supervisor` for the options)."""
    return Supervisor(job, **kwargs).run()
