"""What the local service does with any job resource: create, get, list, cancel, delete,
recover after a crash, and shut down.

A `ResourceManager` keeps its collection's resources in a `JobStore` table and
runs each created resource in a thread of the service, once the shared `JobQueue`
lets it start (until then it is QUEUED). What differs between collections is
small: how a resource is checked (`check`, the local limits first), what it
holds while it runs (`replicas`), how it runs (`start_run`, a `Run`), and what
recovery marks besides the job itself (`recovered`). State changes are written as
Vertex reports them (QUEUED, PENDING, RUNNING, then SUCCEEDED, FAILED, or
CANCELLING and CANCELLED), with the times and, on failure or cancel, `error` as a
google.rpc.Status.

A state change the store cannot save (an SQLite error: disk full, I/O error)
fails the job at once: its replicas are stopped, the reason is written next to
its files (UNSAVED_FILE) and the service answers the job as FAILED from memory;
the next start reconciles the store from that file. Deleting a job deletes its
folder too (its logs, and its outputs when it had no base output directory), first:
a folder that cannot be removed whole answers 400 FAILED_PRECONDITION naming what
is left, and the job stays listed, so the user can fix it and delete it again
(deleting the job first would leave files nothing lists, gc included).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

from .. import paths, states
from ..api import Collection
from ..environment import Runtime
from ..errors import ServiceError, WorkbenchError
from ..runner.backend import BACKEND_LABEL, backend_for, backend_of, get_backend
from ..spec import JobSpec
from .queueing import JobQueue
from .store import JobStore, StoredJob

# google.rpc.Code values for a job's `error`
CANCELLED, INVALID_ARGUMENT, DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE = 1, 3, 4, 13, 14
SERVICE_STOPPED = "the local service stopped while the job was running"
STOPPED_QUEUED = "the local service stopped before the job started"
UNSAVED_FILE = "unsaved-state.txt"  # in the job's folder: why its state could not be saved


class Run(Protocol):
    """One resource's run in the service's thread."""

    def run(self) -> tuple[str, int, str]:
        """Run to the end: (final JobState name, google.rpc code or 0, error message)."""

    def cancel(self, reason: str) -> None:
        """Stop from another thread; `run` then returns CANCELLED."""

    def snapshot(self) -> Any | None:
        """The live resource while it runs, when it changes faster than the store (else None)."""


@dataclass
class _Active:
    """A created resource that has not ended: waiting in the queue (no thread yet) or running."""

    stored: StoredJob
    run: Run
    thread: threading.Thread | None = None


class ResourceManager:
    collection: ClassVar[Collection]

    def __init__(self, store: JobStore, jobs_root: Path, queue: JobQueue | None = None,
                 on_note: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.jobs_root = jobs_root
        self.queue = queue or JobQueue()  # shared by the service's managers: one set of limits
        self.on_note = on_note or (lambda text: print(text, flush=True))  # the service's log
        self._active: dict[str, _Active] = {}
        self._unsaved: dict[str, StoredJob] = {}  # ended, but the store could not save the end
        self._save_errors: dict[str, str] = {}  # job ID: why a state change could not be saved
        self._lock = threading.Lock()

    # ---- what a collection decides -------------------------------------------------------
    def check(self, resource: Any) -> JobSpec:
        """The job the resource runs (a tuning job's trial job); raises WorkbenchError naming the field."""
        raise NotImplementedError

    def replicas(self, resource: Any) -> int:
        """The replicas the resource holds while it runs (what the queue counts)."""
        raise NotImplementedError

    def start_run(self, stored: StoredJob, checked: JobSpec, runtime: Runtime) -> Run:
        """The run of a created resource; process replicas run with `runtime` (the client's)."""
        raise NotImplementedError

    def recovered(self, stored: StoredJob) -> None:
        """After a crash: stop what is left of the resource's replicas and mark its parts."""
        stop_leftovers(stored.backend, stored.id)

    # ---- API -----------------------------------------------------------------------------
    def create(self, parent: str, resource: Any, runtime: Runtime | None = None) -> Any:
        """Store a resource and queue it; `runtime`: the submitting client's Python (default: the service's)."""
        try:
            checked = self.check(resource)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", str(exc).replace("\n", "; ")) from None
        backend = resource.labels.get(BACKEND_LABEL) or backend_for(checked)
        try:
            get_backend(backend)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", f"labels.{BACKEND_LABEL}: {exc}") from None
        try:
            job_id = self._new_folder()
        except OSError as exc:
            raise ServiceError(503, "UNAVAILABLE", f"the local service could not create the job: "
                                                   f"{type(exc).__name__}: {exc}") from None
        stored = StoredJob(job_id, parent, self.jobs_root / job_id, backend, type(resource)(resource))
        r, now = stored.resource, _now()
        for output_only in ("error", "start_time", "end_time"):
            r._pb.ClearField(output_only)
        r.name, r.state, r.create_time, r.update_time = f"{parent}/{self.collection.path}/{job_id}", \
            "JOB_STATE_QUEUED", now, now
        if backend != backend_of(r.labels):  # chosen here: say so, as the job's views read it
            r.labels[BACKEND_LABEL] = backend
        try:
            run = self.start_run(stored, checked, runtime or Runtime.here())  # may add to the resource (labels)
            self.store.add(stored)
        except (OSError, sqlite3.Error) as exc:
            paths.remove_tree(stored.job_dir)  # made for this job just now
            raise ServiceError(503, "UNAVAILABLE", f"the local service could not create the job: "
                                                   f"{type(exc).__name__}: {exc}") from None
        created = type(resource).deserialize(type(resource).serialize(r))  # the run's thread changes the original
        with self._lock:
            self._active[job_id] = _Active(stored, run)
        self.queue.submit(job_id, self.replicas(resource), lambda: self._start(job_id))
        return created

    def get(self, job_id: str) -> StoredJob:
        with self._lock:
            active, unsaved = self._active.get(job_id), self._unsaved.get(job_id)
        if unsaved is not None:
            return unsaved
        live = active.run.snapshot() if active else None
        stored = self.store.get(job_id)
        if stored is None:
            raise ServiceError(404, "NOT_FOUND", f"{self.collection.kind} {job_id} does not exist")
        if live is not None:
            stored.resource = live
        return stored

    def list(self, parent: str, **kwargs: Any) -> list[StoredJob]:
        rows = self.store.list(parent, **kwargs)
        with self._lock:
            return [self._unsaved.get(row.id, row) for row in rows]

    def cancel(self, job_id: str) -> None:
        stored = self.get(job_id)
        if states.is_final(stored.state):
            raise ServiceError(400, "FAILED_PRECONDITION", f"{self.collection.kind} {job_id} is already "
                                                           f"{stored.state.name}; only a running job can be cancelled")
        self._stop(job_id, "cancelled by the user")

    def delete(self, job_id: str) -> None:
        """Removes the job resource and its folder (see the module notes)."""
        stored = self.get(job_id)
        if not states.is_final(stored.state):
            raise ServiceError(400, "FAILED_PRECONDITION",
                               f"{self.collection.kind} {job_id} is {stored.state.name}; cancel it first")
        job_dir = stored.job_dir.resolve()
        if job_dir.parent == self.jobs_root.resolve() and job_dir.name == job_id:  # never anything else
            if problem := paths.remove_tree(job_dir):
                raise ServiceError(400, "FAILED_PRECONDITION",
                                   f"{self.collection.kind} {job_id} was not deleted: its folder {job_dir} could not "
                                   f"be removed whole ({problem}); remove what is left and delete it again")
        self.store.delete(job_id)
        with self._lock:
            self._unsaved.pop(job_id, None)

    # ---- lifecycle -----------------------------------------------------------------------
    def recover(self) -> list[str]:
        """After a crash: resources the store still calls unfinished are failed and what is
        left of their replicas is stopped (the reason is why a state change could not be
        saved, when that is what stopped it). Returns their IDs."""
        recovered = []
        for stored in self.store.unfinished():
            queued = stored.state.name == "JOB_STATE_QUEUED"
            self.recovered(stored)
            try:
                unsaved = (stored.job_dir / UNSAVED_FILE).read_text().strip()
            except OSError:
                unsaved = ""
            if unsaved:
                self.finish(stored, "JOB_STATE_FAILED", INTERNAL, unsaved)
            else:
                self.finish(stored, "JOB_STATE_FAILED", UNAVAILABLE, STOPPED_QUEUED if queued else SERVICE_STOPPED)
            recovered.append(stored.id)
        return recovered

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel every queued and running resource and wait for its replicas to stop; save what
        could not be saved before, if the store works again."""
        reason = "cancelled: the local service was stopped"
        with self._lock:
            active = list(self._active)
        for job_id in active:  # the queued first, so none starts when a running one ends
            if self.queue.withdraw(job_id):
                self._stop(job_id, reason, queued=True)
        for job_id in active:
            self._stop(job_id, reason)
        with self._lock:
            threads = [a.thread for a in self._active.values() if a.thread is not None]
        for thread in threads:
            thread.join(timeout)
        with self._lock:
            unsaved = list(self._unsaved.values())
        for stored in unsaved:
            self.save(stored)

    # ---- state changes -------------------------------------------------------------------
    def save_state(self, stored: StoredJob, state: str) -> None:
        """A state change before the end (PENDING, RUNNING, CANCELLING)."""
        r = stored.resource
        if r.state.name == state:
            return
        r.state, r.update_time = state, _now()
        if state == "JOB_STATE_RUNNING" and not r.start_time:
            r.start_time = r.update_time
        self.save(stored)

    def finish(self, stored: StoredJob, state: str, code: int, message: str) -> None:
        r = stored.resource
        r.state, r.update_time = state, _now()
        r.end_time = r.update_time
        if code:
            r.error = {"code": code, "message": message or state}
        if self.save(stored):
            with self._lock:
                self._unsaved.pop(stored.id, None)
                self._save_errors.pop(stored.id, None)
            try:
                (stored.job_dir / UNSAVED_FILE).unlink(missing_ok=True)
            except OSError:
                pass
        else:
            with self._lock:
                self._unsaved[stored.id] = stored

    def save(self, stored: StoredJob) -> bool:
        """Write the resource to the store. When the store fails, the job fails: its run is
        stopped and the reason kept next to its files for the next start. False then."""
        try:
            self.store.save(stored)
            return True
        except sqlite3.Error as exc:
            reason = (f"the local service could not save the job's state ({type(exc).__name__}: {exc}); "
                      "its replicas were stopped")
        with self._lock:
            first = stored.id not in self._save_errors
            self._save_errors.setdefault(stored.id, reason)
            active = self._active.get(stored.id)
        if first:
            self.on_note(f"{self.collection.kind} {stored.id}: {reason}")
            try:
                paths.write_private(stored.job_dir / UNSAVED_FILE, reason + "\n")
            except OSError:
                pass  # the next start then says the service stopped while the job ran
        if active is not None:
            active.run.cancel(reason)
        return False

    def _stop(self, job_id: str, reason: str, queued: bool = False) -> None:
        """Cancel a job: one still queued (or just `queued`: withdrawn) ends CANCELLED at once, a
        running one is stopped."""
        with self._lock:
            active = self._active.get(job_id)
        if active is None:
            return
        if queued or self.queue.withdraw(job_id):  # it never started
            with self._lock:
                self._active.pop(job_id, None)
            self.finish(active.stored, "JOB_STATE_CANCELLED", CANCELLED, reason)
        else:
            active.run.cancel(reason)

    def _new_folder(self) -> str:
        """A new job ID and its folder, made here (IDs are random: never reuse another job's folder)."""
        paths.private_dir(self.jobs_root)
        while True:
            job_id = paths.new_job_id()
            try:
                (self.jobs_root / job_id).mkdir(mode=paths.DIR_MODE)
                return job_id
            except FileExistsError:
                continue

    def _start(self, job_id: str) -> None:
        """The queue's turn for a job: run it in its own thread."""
        with self._lock:
            active = self._active[job_id]
            active.thread = threading.Thread(target=self._run, args=(active.stored, active.run),
                                             name=f"{self.collection.path}-{job_id}", daemon=True)
        active.thread.start()

    def _run(self, stored: StoredJob, run: Run) -> None:
        outcome = ("JOB_STATE_FAILED", UNAVAILABLE, "the local runner failed")
        try:
            outcome = run.run()
        except Exception as exc:  # a bug in the runner must not leave the job RUNNING
            outcome = ("JOB_STATE_FAILED", UNAVAILABLE, f"the local runner failed: {exc!r}")
            raise
        finally:
            with self._lock:  # readers go to the store from now on, which gets the final state next
                self._active.pop(stored.id, None)
                unsaved = self._save_errors.get(stored.id)
            try:
                self.finish(stored, *(("JOB_STATE_FAILED", INTERNAL, unsaved) if unsaved else outcome))
            finally:
                self.queue.done(stored.id)


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
