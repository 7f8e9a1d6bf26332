"""The small interface every replica backend implements, the backend registry, and
the job label that picks a backend (`vtrain-backend: docker`)."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, ClassVar, Mapping, Protocol

from google.cloud.aiplatform_v1 import types as v1

from ..cluster import Replica
from ..environment import Runtime
from ..errors import UnknownBackendError
from ..names import DEFAULT_BACKEND
from ..spec import JobSpec

# Called by a backend with a chunk of a replica's output: (stream, data).
# A backend calls it from one thread per replica at a time; b"" on a stream means end of that stream.
OutputSink = Callable[[str, bytes], None]


class ReplicaHandle(Protocol):
    ident: str  # the backend's name for the replica: a process group ID, a container ID

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the replica has exited (negative: killed by that signal), else None."""

    def terminate(self) -> None:
        """Ask the replica and everything it started to stop (SIGTERM)."""

    def kill(self) -> None:
        """Stop the replica and everything it started now. Safe to call after it exited."""

    def wait_output(self, timeout: float) -> bool:
        """Wait until all of its output was delivered; False on timeout."""


class Backend(Protocol):
    name: ClassVar[str]
    address_style: ClassVar[str]  # a cluster.ADDRESS_STYLES value
    cwd: Path | None  # the folder replicas start in (None: the caller's); the service sets the job's folder
    runtime: Runtime | None  # the Python process replicas run with (the submitting client's); None: not processes

    def ports(self, count: int) -> list[int] | None:
        """One port per replica for process-style addresses, no other run's, held until `cleanup`; or None."""

    def prepare(self, job_dir: Path, job: JobSpec) -> list[str]:
        """Get ready to start the job's replicas (and to stop them if this process dies: see
        `reaper`); returns notes to show the user."""

    def start(self, replica: Replica, pool: v1.WorkerPoolSpec, sink: OutputSink) -> ReplicaHandle:
        """Start one replica; raises BackendError with a readable reason."""

    def cleanup(self) -> None:
        """Remove whatever `prepare` and `start` created, and whatever carries this run's marker.
        Called once, on every outcome."""

    def cleanup_job(self, job_id: str) -> None:
        """Stop what is left of a job whose supervisor could not clean up (a crashed service)."""


BACKEND_LABEL = "vtrain-backend"  # a job label that picks the local backend; absent: DEFAULT_BACKEND

_registry: dict[str, Callable[[], Backend]] = {}
_entry_points_read = False


def register(name: str, factory: Callable[[], Backend]) -> None:
    _registry[name] = factory


def get_backend(name: str) -> Backend:
    """A new backend by name; plug-ins come from the `jupyter_ext.backends` entry point group."""
    return _factory(name)()


def service_backend(name: str, folder: Path, runtime: Runtime) -> Backend:
    """A backend for a job (or trial) the local service runs: the submitter's folder is unknown
    there, so replicas start in `folder`; process replicas run with the submitting client's Python."""
    backend = get_backend(name)
    backend.cwd = folder
    if backend.runtime is not None:
        backend.runtime = runtime
    return backend


def _factory(name: str) -> Callable[[], Backend]:
    global _entry_points_read
    if not _entry_points_read:
        _entry_points_read = True
        for ep in entry_points(group="jupyter_ext.backends"):
            _registry.setdefault(ep.name, ep.load())
    if name not in _registry:
        raise UnknownBackendError(name, list(_registry))
    return _registry[name]


def backend_of(labels: Mapping[str, str]) -> str:
    """The backend a local job runs on, from its labels (the service records its choice there)."""
    return labels.get(BACKEND_LABEL, DEFAULT_BACKEND)


def backend_for(job: JobSpec) -> str:
    """The backend a job needs when its labels name none, as a job sent for Vertex AI: containers
    when a pool runs an image's own entrypoint (a containerSpec without command: only the image
    knows what it runs), else processes."""
    needs_image = any("container_spec" in pool and not pool.container_spec.command for _, pool in job.pools)
    return "docker" if needs_image else DEFAULT_BACKEND


def address_style(backend: str) -> str:
    """The address style of a backend's replicas (`process`, `docker`), without starting one."""
    return _factory(backend).address_style  # type: ignore[attr-defined]


def backend_names() -> list[str]:
    return sorted(_registry)
