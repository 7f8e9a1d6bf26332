"""Docker backend: every replica a container on a per-job network, named as on Vertex AI.

- One user-defined network per job, `vtrain-<job id>`; each replica's container
  has the hostname and network alias `workerpool{P}-{i}`, so the addresses in
  CLUSTER_SPEC and TF_CONFIG (`workerpool{P}-{i}:2222`) resolve and connect as
  on Vertex.
- What a container runs, as Vertex would: `containerSpec.command` replaces the
  image's ENTRYPOINT and `args` its CMD; `pythonPackageSpec` runs
  `python -m <pythonModule> <args>` in `executorImageUri` with the packages
  (folders, wheels, sdists, as the process backend takes them) mounted read-only
  and on PYTHONPATH (dependencies they declare are not installed).
- Environment: the replica's (cluster.py, docker addresses) plus the pool's
  `env` list; not the host's. The job folder, and the AIP_* folders when they are
  elsewhere on the host, are mounted at the same absolute paths, so outputs and
  logs land on the host. Containers run with an init process, so SIGTERM stops a
  replica as it stops a local process.
- Images missing on the engine are pulled before anything starts.
- Output is read from each container's attach stream (stdout and stderr kept
  apart) into the same sink as the process backend's.
- Every container and the network carry the labels `vtrain.run` (this backend
  instance's run key, see `reaper`), `vtrain.job-id` and `vtrain.job-dir`;
  `cleanup()` removes them on every outcome and is safe to call twice;
  `cleanup_job(job_id)` removes what a crashed supervisor left of a job. A
  watchdog removes them when the runner dies first, and `prepare` removes what
  runs whose runner died left.

The engine is DOCKER_HOST (or the `engine` argument); it must run on this
machine, since the job folder is bind-mounted. The workbench's choice is to run
containers as the image's user (root for most images), as Vertex does; files
they write into the job folder belong to that user.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.cloud.aiplatform_v1 import types as v1

from .. import images, paths
from ..cluster import VERTEX_PORT, Replica
from ..errors import BackendError
from ..spec import JobSpec, pool_image
from .backend import OutputSink, register
from .commands import _package_path, pool_env
from .reaper import LABEL_RUN, Watchdog, new_run_key, reap_orphaned_containers, remove_labelled

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

LABEL_JOB_ID = "vtrain.job-id"
LABEL_JOB_DIR = "vtrain.job-dir"
LABEL_TASK = "vtrain.task"
AIP_DIRS = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")


class ContainerHandle:
    """One replica's container: its exit code, its output, stopping it."""

    def __init__(self, client: docker.APIClient, container_id: str, task_name: str) -> None:
        self.client = client
        self.id = self.ident = container_id
        self.task_name = task_name
        self.output_done = threading.Event()
        self._code: int | None = None
        self._lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> int | None:
        import docker.errors
        import requests

        if self._code is not None:
            return self._code
        if timeout is not None and timeout < 0.05:  # a poll: the engine's wait cannot take no time
            return self._poll()
        try:
            status = self.client.wait(self.id, timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return self._code  # timed out (requests names a read timeout on a socket either way)
        except docker.errors.NotFound:
            return self._code if self._code is not None else -signal.SIGKILL  # removed by kill()
        except docker.errors.APIError as exc:
            raise BackendError(f"{self.task_name}: lost its container: {images._api_message(exc)}") from None
        with self._lock:
            if self._code is None:
                self._code = _exit_code(int(status.get("StatusCode", -1)))
        return self._code

    def _poll(self) -> int | None:
        import docker.errors

        try:
            state = self.client.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            return self._code if self._code is not None else -signal.SIGKILL
        if state.get("Running") or state.get("Status") == "created":
            return None
        with self._lock:
            if self._code is None:
                self._code = _exit_code(int(state.get("ExitCode", -1)))
        return self._code

    def terminate(self) -> None:
        self._signal("SIGTERM")

    def kill(self) -> None:
        import docker.errors

        self._signal("SIGKILL")
        self.output_done.wait(5.0)  # its output is complete once the stream ends
        self.wait(5.0)
        try:
            self.client.remove_container(self.id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # e.g. removal already in progress
            log.debug("removing %s: %s", self.task_name, exc)

    def wait_output(self, timeout: float) -> bool:
        return self.output_done.wait(timeout)

    def _signal(self, sig: str) -> None:
        import docker.errors

        try:
            self.client.kill(self.id, signal=sig)
        except docker.errors.APIError:  # not running any more, or already removed
            pass


def _exit_code(status: int) -> int:
    """A container's status; 128+N (the init's report of a replica killed by signal N) becomes -N."""
    if 128 < status <= 128 + 31:
        return -(status - 128)
    return status


class DockerBackend:
    name = "docker"
    address_style = "docker"
    cwd = None  # containers start in their image's WORKDIR
    runtime = None  # and run their image's Python

    def __init__(self, engine: str | None = None, on_event: Callable[[images.Event], None] | None = None) -> None:
        self.engine = engine
        self.on_event = on_event
        self.key = new_run_key()
        self._client: docker.APIClient | None = None
        self._watchdog: Watchdog | None = None
        self._job_dir = Path(".")
        self._source_dir: Path | None = None
        self._network: str | None = None
        self._job_id = ""
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    # ---- Backend protocol ----------------------------------------------------
    def ports(self, count: int) -> None:
        return None

    def prepare(self, job_dir: Path, job: JobSpec) -> list[str]:
        self._job_dir = Path(job_dir).resolve()
        self._source_dir = job.source_dir
        self._client = images.connect(self.engine, max_pool_size=2 * job.replica_count + 8)
        reap_orphaned_containers(self._client)  # what runners that died with their watchdogs left
        self._watchdog = Watchdog("containers", self.key, self.engine or "")
        notes = []
        for image, where in _images(job):
            if images.image_exists(self._client, image):
                continue
            try:
                for event in images.pull(image, client=self._client):
                    if self.on_event:
                        self.on_event(event)
            except images.PullError as exc:
                raise BackendError(f"{where}: image {image} is not on the Docker engine and cannot be pulled: "
                                   f"{str(exc).split(': ', 1)[-1]}") from None
            notes.append(f"pulled {image}")
        for pos, pool in job.pools:  # package paths fail before anything starts
            self._packages(pool, pos)
        return notes

    def start(self, replica: Replica, pool: v1.WorkerPoolSpec, sink: OutputSink) -> ContainerHandle:
        import docker.errors

        client = self._client
        if client is None:
            raise BackendError("the docker backend was not prepared")
        job_id = replica.env.get("CLOUD_ML_JOB_ID", "") or self.key
        if self._network is None:
            self._create_network(job_id)
        labels = {**self._labels(), LABEL_TASK: replica.task_name}
        entrypoint, cmd, env, binds = self._command(replica, pool)
        name = f"{self._network}-{replica.task_name}"
        try:
            container = client.create_container(
                pool_image(pool), command=cmd, entrypoint=entrypoint, environment=env, hostname=replica.task_name,
                labels=labels, name=name, detach=True, stdin_open=False, tty=False,
                ports=[VERTEX_PORT],
                host_config=client.create_host_config(network_mode=self._network, binds=binds, init=True),
                networking_config=client.create_networking_config(
                    {self._network: client.create_endpoint_config(aliases=[replica.task_name])}))
            cid = container["Id"]
            handle = ContainerHandle(client, cid, replica.task_name)
            stream = client.attach(cid, stdout=True, stderr=True, stream=True, logs=True, demux=True)
            client.start(cid)
        except docker.errors.APIError as exc:
            raise BackendError(f"{replica.task_name}: cannot start a container of {pool_image(pool)}: "
                               f"{images._api_message(exc)}") from None
        thread = threading.Thread(target=self._pump, args=(stream, sink, handle), daemon=True,
                                  name=f"output-{replica.task_name}")
        thread.start()
        self._threads.append(thread)
        return handle

    def cleanup(self) -> None:
        """Remove every container and the network of this run. Never raises."""
        with self._lock:
            client, self._client = self._client, None
            watchdog, self._watchdog = self._watchdog, None
        if client is None:
            return
        try:
            remove_labelled(client, f"{LABEL_RUN}={self.key}", self._threads)
        finally:
            client.close()
            if watchdog is not None:
                watchdog.stop()

    def cleanup_job(self, job_id: str) -> None:
        """Remove the containers and network of a job whose supervisor could not (it crashed)."""
        try:
            client = images.connect(self.engine)
        except images.EngineError as exc:
            log.warning("docker backend: cannot clean up job %s: %s", job_id, exc)
            return
        try:
            remove_labelled(client, f"{LABEL_JOB_ID}={job_id}")
        finally:
            client.close()

    # ---- helpers -------------------------------------------------------------
    def _labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.key, LABEL_JOB_ID: self._job_id, LABEL_JOB_DIR: str(self._job_dir)}

    def _create_network(self, job_id: str) -> None:
        import docker.errors

        assert self._client is not None
        self._job_id = job_id
        name = "vtrain-" + re.sub(r"[^A-Za-z0-9_.-]", "-", job_id)
        try:
            self._client.create_network(name, driver="bridge", labels=self._labels(), check_duplicate=True)
        except docker.errors.APIError as exc:
            raise BackendError(f"cannot create the job's network {name}: {images._api_message(exc)}") from None
        self._network = name

    def _packages(self, pool: v1.WorkerPoolSpec, pos: int) -> list[Path]:
        if "python_package_spec" not in pool:
            return []
        where = f"workerPoolSpecs[{pos}].pythonPackageSpec.packageUris"
        return [_package_path(uri, f"{where}[{n}]", self._job_dir, self._source_dir)
                for n, uri in enumerate(pool.python_package_spec.package_uris)]

    def _command(self, replica: Replica, pool: v1.WorkerPoolSpec) -> tuple[
            list[str] | None, list[str] | None, dict[str, str], dict[str, dict[str, str]]]:
        env = dict(replica.env)
        for name in AIP_DIRS:  # relative local folders mean the same folder inside
            if name in env and env[name] and not env[name].startswith("/") and "://" not in env[name]:
                env[name] = str(Path(env[name]).resolve()) + "/"
        binds: dict[str, dict[str, str]] = {str(self._job_dir): {"bind": str(self._job_dir), "mode": "rw"}}
        paths.make_dir(self._job_dir)
        for name in AIP_DIRS:
            folder = env.get(name, "")
            if folder.startswith("/") and not _under(Path(folder), binds):
                paths.make_dir(Path(folder))
                binds[folder.rstrip("/")] = {"bind": folder.rstrip("/"), "mode": "rw"}
        env = pool_env(pool, {**env, "PYTHONUNBUFFERED": "1"})
        if "python_package_spec" in pool:
            spec = pool.python_package_spec
            package_paths = [str(p) for p in self._packages(pool, replica.pool)]
            for p in package_paths:
                binds.setdefault(p, {"bind": p, "mode": "ro"})
            env["PYTHONPATH"] = os.pathsep.join(
                package_paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
            return ["python", "-m", spec.python_module], list(spec.args) or None, env, binds
        spec = pool.container_spec
        entrypoint = list(spec.command) or None
        return entrypoint, list(spec.args) or None, env, binds

    def _pump(self, stream: Any, sink: OutputSink, handle: ContainerHandle) -> None:
        try:
            for out, err in stream:
                if out:
                    sink("stdout", out)
                if err:
                    sink("stderr", err)
        except Exception as exc:  # noqa: BLE001  (the container was removed under the stream)
            log.debug("output of %s ended: %s", handle.task_name, exc)
        finally:
            sink("stdout", b"")
            sink("stderr", b"")
            handle.output_done.set()


def _images(job: JobSpec) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for pos, pool in job.pools:
        field = "containerSpec.imageUri" if "container_spec" in pool else "pythonPackageSpec.executorImageUri"
        image = pool_image(pool)
        if not image:
            raise BackendError(f"workerPoolSpecs[{pos}].{field}: required by the docker backend")
        seen.setdefault(image, f"workerPoolSpecs[{pos}].{field}")
    return list(seen.items())


def _under(path: Path, binds: dict[str, dict[str, str]]) -> bool:
    return any(path == Path(b) or Path(b) in path.parents for b in binds)


register("docker", DockerBackend)
