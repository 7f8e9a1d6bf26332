"""CustomJobs inside the local service: each runs with the shared supervisor.

The job's state follows the supervisor's (PENDING, RUNNING, CANCELLING); the
end comes with the error as a google.rpc.Status: INVALID_ARGUMENT when a
replica failed, DEADLINE_EXCEEDED past `scheduling.timeout`, CANCELLED.
"""

from __future__ import annotations

from typing import Any

from google.cloud.aiplatform_v1 import types as v1

from .. import failure, limits, states, validate
from ..api import CUSTOM_JOBS
from ..environment import Runtime
from ..runner import Supervisor, service_backend
from ..spec import JobSpec
from .resources import CANCELLED, DEADLINE_EXCEEDED, INVALID_ARGUMENT, ResourceManager
from .store import StoredJob


class JobManager(ResourceManager):
    collection = CUSTOM_JOBS

    def check(self, resource: v1.CustomJob) -> JobSpec:
        limits.check_job(resource.job_spec.worker_pool_specs, self.queue.limits)  # first: nothing is built per replica
        return validate.check(JobSpec.load(resource))

    def replicas(self, resource: v1.CustomJob) -> int:
        return limits.job_replicas(resource.job_spec.worker_pool_specs)

    def start_run(self, stored: StoredJob, checked: JobSpec, runtime: Runtime) -> _JobRun:
        backend = service_backend(stored.backend, stored.job_dir, runtime)
        return _JobRun(self, stored, Supervisor(checked, backend=backend, job_dir=stored.job_dir, job_id=stored.id,
                                                on_state=lambda state: self._on_state(stored, state)))

    def _on_state(self, stored: StoredJob, state: str) -> None:
        if not states.is_final(state):  # the end is written with its error when the run returns
            self.save_state(stored, states.name(state))


class _JobRun:
    def __init__(self, manager: JobManager, stored: StoredJob, supervisor: Supervisor) -> None:
        self.manager, self.stored, self.supervisor = manager, stored, supervisor

    def run(self) -> tuple[str, int, str]:
        result = self.supervisor.run()
        code = {"FAILED": INVALID_ARGUMENT, "CANCELLED": CANCELLED}.get(result.state, 0)
        if failure.is_timeout(result.error):
            code = DEADLINE_EXCEEDED
        return states.name(result.state), code, result.error

    def cancel(self, reason: str) -> None:
        self.supervisor.cancel(reason)

    def snapshot(self) -> Any | None:
        return None  # every state change is in the store
