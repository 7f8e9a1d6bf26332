"""Jobs inside the local service: create, run with the runner, cancel, recover.

Each job runs in a thread of the service with the shared supervisor; its state
changes are written to the store as Vertex reports them (QUEUED, PENDING,
RUNNING, then SUCCEEDED, FAILED, or CANCELLING and CANCELLED), with the times
and, on failure or cancel, `error` as a google.rpc.Status.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

from google.cloud.aiplatform_v1 import types as v1

from .. import validate
from ..errors import ServiceError, WorkbenchError
from ..paths import new_job_id
from ..runner import Supervisor, get_backend
from ..spec import JobSpec
from .store import FINAL_STATES, JobStore, StoredJob

BACKEND_LABEL = "vtrain-backend"  # a job label that picks the runner backend (process, docker)
# google.rpc.Code values for a job's `error`
CANCELLED, INVALID_ARGUMENT, DEADLINE_EXCEEDED, UNAVAILABLE = 1, 3, 4, 14


class JobManager:
    def __init__(self, store: JobStore, jobs_root: Path, default_backend: str = "process") -> None:
        self.store = store
        self.jobs_root = jobs_root
        self.default_backend = default_backend
        self._running: dict[str, tuple[Supervisor, threading.Thread]] = {}
        self._lock = threading.Lock()

    # ---- API -----------------------------------------------------------------
    def create(self, parent: str, resource: v1.CustomJob) -> v1.CustomJob:
        try:
            job = validate.check(JobSpec.load(resource))
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", str(exc).replace("\n", "; ")) from None
        backend_name = resource.labels.get(BACKEND_LABEL, self.default_backend)
        try:
            backend = get_backend(backend_name)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", f"labels.{BACKEND_LABEL}: {exc}") from None
        job_id = new_job_id()
        now = _now()
        stored = StoredJob(job_id, parent, self.jobs_root / job_id, backend_name, v1.CustomJob(resource))
        if hasattr(backend, "cwd"):
            backend.cwd = stored.job_dir  # the submitter's folder is unknown here: replicas start in the job's
        r = stored.resource
        r.name, r.state, r.create_time, r.update_time = f"{parent}/customJobs/{job_id}", "JOB_STATE_QUEUED", now, now
        self.store.add(stored)
        supervisor = Supervisor(job, backend=backend, job_dir=stored.job_dir, job_id=job_id,
                                on_state=lambda state: self._on_state(stored, state))
        thread = threading.Thread(target=self._run, args=(stored, supervisor), name=f"job-{job_id}", daemon=True)
        with self._lock:
            self._running[job_id] = (supervisor, thread)
        created = v1.CustomJob.deserialize(v1.CustomJob.serialize(stored.resource))  # the thread changes the original
        thread.start()
        return created

    def get(self, job_id: str) -> StoredJob:
        stored = self.store.get(job_id)
        if stored is None:
            raise ServiceError(404, "NOT_FOUND", f"CustomJob {job_id} does not exist")
        return stored

    def cancel(self, job_id: str) -> None:
        stored = self.get(job_id)
        if stored.state in FINAL_STATES:
            raise ServiceError(400, "FAILED_PRECONDITION",
                               f"CustomJob {job_id} is already {stored.state.name}; only a running job can be cancelled")
        with self._lock:
            running = self._running.get(job_id)
        if running:
            running[0].cancel()

    def delete(self, job_id: str) -> None:
        """Removes the job resource; its logs stay on disk, as Cloud Logging keeps them."""
        stored = self.get(job_id)
        if stored.state not in FINAL_STATES:
            raise ServiceError(400, "FAILED_PRECONDITION", f"CustomJob {job_id} is {stored.state.name}; cancel it first")
        self.store.delete(job_id)

    # ---- lifecycle -------------------------------------------------------------
    def recover(self) -> list[str]:
        """After a crash: jobs the store still calls unfinished are failed and what
        is left of their replicas is stopped. Returns their IDs."""
        recovered = []
        for stored in self.store.unfinished():
            stop_leftovers(stored.backend, stored.id)
            self._finish(stored, "JOB_STATE_FAILED", UNAVAILABLE,
                         "the local service stopped while the job was running")
            recovered.append(stored.id)
        return recovered

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel every running job and wait for its replicas to stop."""
        with self._lock:
            running = list(self._running.values())
        for supervisor, _ in running:
            supervisor.cancel("cancelled: the local service was stopped")
        for _, thread in running:
            thread.join(timeout)

    # ---- internals -------------------------------------------------------------
    def _run(self, stored: StoredJob, supervisor: Supervisor) -> None:
        try:
            result = supervisor.run()
            code = {"FAILED": INVALID_ARGUMENT, "CANCELLED": CANCELLED}.get(result.state, 0)
            if "scheduling.timeout" in result.error:
                code = DEADLINE_EXCEEDED
            self._finish(stored, f"JOB_STATE_{result.state}", code, result.error)
        except Exception as exc:  # a bug in the runner must not leave the job RUNNING
            self._finish(stored, "JOB_STATE_FAILED", UNAVAILABLE, f"the local runner failed: {exc!r}")
            raise
        finally:
            with self._lock:
                self._running.pop(stored.id, None)

    def _on_state(self, stored: StoredJob, state: str) -> None:
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return  # written with the error by _finish
        r = stored.resource
        r.state, r.update_time = f"JOB_STATE_{state}", _now()
        if state == "RUNNING":
            r.start_time = r.update_time
        self.store.save(stored)

    def _finish(self, stored: StoredJob, state: str, code: int, message: str) -> None:
        r = stored.resource
        r.state, r.update_time = state, _now()
        r.end_time = r.update_time
        if code:
            r.error = {"code": code, "message": message or state}
        self.store.save(stored)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def stop_leftovers(backend: str, *job_ids: str) -> None:
    """Stop what a crashed service left of jobs: the backend knows how to find them. A backend
    that is no longer installed has nothing left to stop here."""
    try:
        cleanup = getattr(get_backend(backend), "cleanup_job", None)
    except WorkbenchError:
        return
    for job_id in job_ids if cleanup else ():
        cleanup(job_id)
