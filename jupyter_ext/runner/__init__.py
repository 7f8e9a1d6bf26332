"""Run a job's replicas on this machine: one supervisor, pluggable backends."""

from . import docker as _docker  # noqa: F401  (registers the docker backend)
from . import process as _process  # noqa: F401  (registers the process backend)
from .backend import (BACKEND_LABEL, DEFAULT_BACKEND, Backend, ReplicaHandle, address_style, backend_names,
                      backend_of, get_backend, register, service_backend)
from .supervisor import JobResult, ReplicaResult, Supervisor, run_job

__all__ = ["BACKEND_LABEL", "DEFAULT_BACKEND", "Backend", "ReplicaHandle", "address_style", "backend_names",
           "backend_of", "get_backend", "register", "service_backend", "JobResult", "ReplicaResult", "Supervisor",
           "run_job"]
