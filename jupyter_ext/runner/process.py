"""Process backend: every replica a subprocess on this machine, 127.0.0.1 addresses.

Each replica starts in its own process group and carries its run's marker in its
environment (VTRAIN_RUN, see `reaper`), so stopping it also stops every process it
started, even one that left the group with setsid. One that cleared its environment too
is re-parented to the runner when its parent exits (the runner is the replicas' child
subreaper while the run goes on: `reaper.Orphans`), and killed and reaped once every
replica was stopped. A watchdog stops them all if the runner dies first. Ports are leased
for the whole run (see `ports`), so concurrent jobs and trials never share one. One
selector thread reads the output of all replicas, so the cost of a log line does not grow
with the number of replicas.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from google.cloud.aiplatform_v1 import types as v1

from ..cluster import Replica
from ..environment import Runtime
from ..errors import BackendError
from ..spec import JobSpec
from .backend import OutputSink, register
from .commands import host_command, pool_env
from .ports import PortLease
from .reaper import (ORPHANS, Watchdog, kill_processes, new_run_key, processes_with, reap_orphaned_processes,
                     replica_env, replica_marker, run_marker)

READ_SIZE = 1 << 16


class ProcessHandle:
    def __init__(self, proc: subprocess.Popen[bytes], marker: bytes, on_kill: Callable[[], None]) -> None:
        self.proc = proc
        self.ident = str(proc.pid)  # also its process group ID
        self.marker = marker  # an environment entry only this replica and what it started have
        self.killed = False
        self._on_kill = on_kill
        self.output_done = threading.Event()
        self._open_streams = 2

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self) -> None:
        self._signal(signal.SIGTERM, only_group=True)

    def kill(self) -> None:
        self._signal(signal.SIGKILL, only_group=False)  # what left the group (setsid) too
        self.killed = True
        self._on_kill()

    def _signal(self, sig: int, only_group: bool) -> None:
        """Signal the replica and what it started. While the leader is not reaped its group is surely
        ours; after that the group ID may be reused by a new process group (IDs wrap quickly on a busy
        machine), so only processes carrying the replica's marker are hit: those of its group, or
        (`only_group=False`) every one, wherever it went. One pass: the backend's cleanup sweeps the
        whole run again until nothing is left."""
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            if only_group:
                return
        for pid in processes_with(self.marker, pgid=self.proc.pid if only_group else None):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def wait_output(self, timeout: float) -> bool:
        return self.output_done.wait(timeout)

    def stream_closed(self) -> None:
        self._open_streams -= 1
        if self._open_streams == 0:
            self.output_done.set()


class _OutputPump(threading.Thread):
    """Reads every replica's pipes with one selector."""

    def __init__(self) -> None:
        super().__init__(name="replica-output", daemon=True)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closing = False

    def add(self, handle: ProcessHandle, sink: OutputSink) -> None:
        assert handle.proc.stdout is not None and handle.proc.stderr is not None
        for stream, pipe in (("stdout", handle.proc.stdout), ("stderr", handle.proc.stderr)):
            self._selector.register(pipe, selectors.EVENT_READ, (stream, sink, handle))

    def close(self) -> None:
        self._closing = True
        os.write(self._wake_w, b"x")

    def run(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.data is None:
                    os.read(self._wake_r, 1024)
                    if self._closing:
                        self._selector.close()
                        os.close(self._wake_r)
                        os.close(self._wake_w)
                        return
                    continue
                stream, sink, handle = key.data
                data = os.read(key.fd, READ_SIZE)
                sink(stream, data)
                if not data:
                    self._selector.unregister(key.fileobj)
                    key.fileobj.close()
                    handle.stream_closed()


class ProcessBackend:
    name = "process"
    address_style = "process"

    def __init__(self, cwd: Path | None = None, runtime: Runtime | None = None) -> None:
        self.cwd = cwd
        self.runtime = runtime or Runtime.here()
        self.key = new_run_key()
        self._pump: _OutputPump | None = None
        self._watchdog: Watchdog | None = None
        self._lease: PortLease | None = None
        self._job_dir = Path(".")
        self._source_dir: Path | None = None
        self._handles: list[ProcessHandle] = []

    def ports(self, count: int) -> list[int]:
        """Loopback ports no other run on this machine has, held until `cleanup()`."""
        if self._lease is not None:
            self._lease.release()
        self._lease = PortLease(count)
        return self._lease.ports

    def prepare(self, job_dir: Path, job: JobSpec) -> list[str]:
        self._job_dir, self._source_dir = job_dir, job.source_dir
        reap_orphaned_processes()  # what runners that died with their watchdogs left
        self._watchdog = Watchdog("processes", self.key)
        ORPHANS.begin(self.key, self._watchdog)  # what replicas leave behind comes back to this process
        self._pump = _OutputPump()
        self._pump.start()
        for pos, pool in job.pools:  # a pool this backend cannot run fails before anything starts
            host_command(pool, f"workerPoolSpecs[{pos}]", job_dir, self.runtime, job.source_dir)
        on_host = [f"workerPoolSpecs[{pos}]" for pos, pool in job.pools
                   if "container_spec" in pool and pool.container_spec.command]
        return [f"containerSpec.command of {', '.join(on_host)} runs on this host (process backend)"] if on_host else []

    def start(self, replica: Replica, pool: v1.WorkerPoolSpec, sink: OutputSink) -> ProcessHandle:
        assert self._pump is not None, "prepare() first"
        command = host_command(pool, f"workerPoolSpecs[{replica.pool}]", self._job_dir, self.runtime, self._source_dir)
        # what Vertex AI would give, the job's env, and of this machine only what a process needs to start
        env = pool_env(pool, {**self.runtime.env, **command.env, **replica.env, "PYTHONUNBUFFERED": "1"})
        env.update(replica_env(self.key, replica.task_name))
        try:
            proc = ORPHANS.spawn(lambda: subprocess.Popen(
                command.argv, env=env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True))
        except OSError as exc:
            raise BackendError(f"{replica.task_name}: cannot start {command.argv[0]!r}: {exc.strerror}") from None
        handle = ProcessHandle(proc, replica_marker(self.key, replica.task_name), self._replica_killed)
        self._handles.append(handle)
        self._pump.add(handle, sink)
        return handle

    def _replica_killed(self) -> None:
        """Once every replica was killed (the job ends, or its only replica is restarted), what they
        left with a cleared environment goes at once, not at `cleanup`: it may hold their output open."""
        if all(handle.killed for handle in self._handles):
            for handle in self._handles:
                handle.wait(5.0)  # what a replica started is adopted once it has exited
            ORPHANS.sweep(self.key)

    def cleanup_job(self, job_id: str) -> None:
        """Kill every process of a job that an earlier supervisor could not stop (it crashed):
        replicas carry CLOUD_ML_JOB_ID, and so does everything they started."""
        kill_processes(f"CLOUD_ML_JOB_ID={job_id}".encode())

    def cleanup(self) -> None:
        kill_processes(run_marker(self.key), prefix=True)  # a replica not yet handed to the supervisor too
        ORPHANS.end(self.key)  # what replicas left with a cleared environment and setsid
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self._pump is not None:
            self._pump.close()
            self._pump.join(5)
            self._pump = None
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None


register("process", ProcessBackend)
