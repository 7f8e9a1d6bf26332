"""Run a job's replicas on this machine: one supervisor, pluggable backends."""

from . import docker as _docker  # noqa: F401  (registers the docker backend)
from . import process as _process  # noqa: F401  (registers the process backend)
from .backend import Backend, ReplicaHandle, backend_names, get_backend, register
from .supervisor import FINAL_STATES, JobResult, ReplicaResult, Supervisor, run_job

__all__ = ["Backend", "ReplicaHandle", "backend_names", "get_backend", "register", "FINAL_STATES", "JobResult",
           "ReplicaResult", "Supervisor", "run_job"]
