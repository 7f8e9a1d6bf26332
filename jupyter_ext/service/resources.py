"""What the local service does with any job resource: create, get, list, cancel, delete,
recover after a crash, and shut down.

A `ResourceManager` keeps its collection's resources in a `JobStore` table and
runs each created resource in a thread of the service. What differs between
collections is small: how a resource is checked (`check`), how it runs
(`start_run`, a `Run`), and what recovery marks besides the job itself
(`recovered`). State changes are written as Vertex reports them (QUEUED,
PENDING, RUNNING, then SUCCEEDED, FAILED, or CANCELLING and CANCELLED), with the
times and, on failure or cancel, `error` as a google.rpc.Status.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

from .. import paths, states
from ..api import Collection
from ..environment import Runtime
from ..errors import ServiceError, WorkbenchError
from ..runner.backend import BACKEND_LABEL, backend_for, backend_of, get_backend
from ..spec import JobSpec
from .store import JobStore, StoredJob

# google.rpc.Code values for a job's `error`
CANCELLED, INVALID_ARGUMENT, DEADLINE_EXCEEDED, UNAVAILABLE = 1, 3, 4, 14
SERVICE_STOPPED = "the local service stopped while the job was running"


class Run(Protocol):
    """One resource's run in the service's thread."""

    def run(self) -> tuple[str, int, str]:
        """Run to the end: (final JobState name, google.rpc code or 0, error message)."""

    def cancel(self, reason: str) -> None:
        """Stop from another thread; `run` then returns CANCELLED."""

    def snapshot(self) -> Any | None:
        """The live resource while it runs, when it changes faster than the store (else None)."""


class ResourceManager:
    collection: ClassVar[Collection]

    def __init__(self, store: JobStore, jobs_root: Path, on_note: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.jobs_root = jobs_root
        self.on_note = on_note or (lambda text: print(text, flush=True))  # the service's log
        self._running: dict[str, tuple[Run, threading.Thread]] = {}
        self._lock = threading.Lock()

    # ---- what a collection decides -------------------------------------------------------
    def check(self, resource: Any) -> JobSpec:
        """The job the resource runs (a tuning job's trial job); raises WorkbenchError naming the field."""
        raise NotImplementedError

    def start_run(self, stored: StoredJob, checked: JobSpec, runtime: Runtime) -> Run:
        """The run of a created resource; process replicas run with `runtime` (the client's)."""
        raise NotImplementedError

    def recovered(self, stored: StoredJob) -> None:
        """After a crash: stop what is left of the resource's replicas and mark its parts."""
        stop_leftovers(stored.backend, stored.id)

    # ---- API -----------------------------------------------------------------------------
    def create(self, parent: str, resource: Any, runtime: Runtime | None = None) -> Any:
        """Store and start a resource; `runtime`: the submitting client's Python (default: the service's)."""
        try:
            checked = self.check(resource)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", str(exc).replace("\n", "; ")) from None
        backend = resource.labels.get(BACKEND_LABEL) or backend_for(checked)
        try:
            get_backend(backend)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", f"labels.{BACKEND_LABEL}: {exc}") from None
        job_id = paths.new_job_id()
        stored = StoredJob(job_id, parent, self.jobs_root / job_id, backend, type(resource)(resource))
        r, now = stored.resource, _now()
        for output_only in ("error", "start_time", "end_time"):
            r._pb.ClearField(output_only)
        r.name, r.state, r.create_time, r.update_time = f"{parent}/{self.collection.path}/{job_id}", \
            "JOB_STATE_QUEUED", now, now
        if backend != backend_of(r.labels):  # chosen here: say so, as the job's views read it
            r.labels[BACKEND_LABEL] = backend
        stored.job_dir.mkdir(parents=True, exist_ok=True)
        run = self.start_run(stored, checked, runtime or Runtime.here())  # may add to the resource (labels)
        self.store.add(stored)
        created = type(resource).deserialize(type(resource).serialize(r))  # the run's thread changes the original
        thread = threading.Thread(target=self._run, args=(stored, run), name=f"{self.collection.path}-{job_id}",
                                  daemon=True)
        with self._lock:
            self._running[job_id] = (run, thread)
        thread.start()
        return created

    def get(self, job_id: str) -> StoredJob:
        with self._lock:
            running = self._running.get(job_id)
        live = running[0].snapshot() if running else None
        stored = self.store.get(job_id)
        if stored is None:
            raise ServiceError(404, "NOT_FOUND", f"{self.collection.kind} {job_id} does not exist")
        if live is not None:
            stored.resource = live
        return stored

    def list(self, parent: str, **kwargs: Any) -> list[StoredJob]:
        return self.store.list(parent, **kwargs)

    def cancel(self, job_id: str) -> None:
        stored = self.get(job_id)
        if states.is_final(stored.state):
            raise ServiceError(400, "FAILED_PRECONDITION", f"{self.collection.kind} {job_id} is already "
                                                           f"{stored.state.name}; only a running job can be cancelled")
        with self._lock:
            running = self._running.get(job_id)
        if running:
            running[0].cancel("cancelled by the user")

    def delete(self, job_id: str) -> None:
        """Removes the job resource; its logs stay on disk, as Cloud Logging keeps them."""
        stored = self.get(job_id)
        if not states.is_final(stored.state):
            raise ServiceError(400, "FAILED_PRECONDITION",
                               f"{self.collection.kind} {job_id} is {stored.state.name}; cancel it first")
        self.store.delete(job_id)

    # ---- lifecycle -----------------------------------------------------------------------
    def recover(self) -> list[str]:
        """After a crash: resources the store still calls unfinished are failed and what is
        left of their replicas is stopped. Returns their IDs."""
        recovered = []
        for stored in self.store.unfinished():
            self.recovered(stored)
            self.finish(stored, "JOB_STATE_FAILED", UNAVAILABLE, SERVICE_STOPPED)
            recovered.append(stored.id)
        return recovered

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel every running resource and wait for its replicas to stop."""
        with self._lock:
            running = list(self._running.values())
        for run, _ in running:
            run.cancel("cancelled: the local service was stopped")
        for _, thread in running:
            thread.join(timeout)

    # ---- state changes -------------------------------------------------------------------
    def save_state(self, stored: StoredJob, state: str) -> None:
        """A state change before the end (PENDING, RUNNING, CANCELLING)."""
        r = stored.resource
        if r.state.name == state:
            return
        r.state, r.update_time = state, _now()
        if state == "JOB_STATE_RUNNING" and not r.start_time:
            r.start_time = r.update_time
        self.store.save(stored)

    def finish(self, stored: StoredJob, state: str, code: int, message: str) -> None:
        r = stored.resource
        r.state, r.update_time = state, _now()
        r.end_time = r.update_time
        if code:
            r.error = {"code": code, "message": message or state}
        self.store.save(stored)

    def _run(self, stored: StoredJob, run: Run) -> None:
        outcome = ("JOB_STATE_FAILED", UNAVAILABLE, "the local runner failed")
        try:
            outcome = run.run()
        except Exception as exc:  # a bug in the runner must not leave the job RUNNING
            outcome = ("JOB_STATE_FAILED", UNAVAILABLE, f"the local runner failed: {exc!r}")
            raise
        finally:
            with self._lock:  # readers go to the store from now on, which gets the final state next
                self._running.pop(stored.id, None)
            self.finish(stored, *outcome)


def stop_leftovers(backend: str, *job_ids: str) -> None:
    """Stop what a crashed service left of jobs: the backend knows how to find them. A backend
    that is no longer installed has nothing left to stop here."""
    try:
        found = get_backend(backend)
    except WorkbenchError:
        return
    for job_id in job_ids:
        found.cleanup_job(job_id)


def _now() -> datetime:
    return datetime.now(timezone.utc)
