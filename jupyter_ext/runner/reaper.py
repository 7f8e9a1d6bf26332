"""Replicas die with their runner: run keys, the watchdog, and reaping what dead runners left.

Every run (one job, or one tuning trial, on one backend instance) has a key, and every
replica carries it: process replicas in the environment variable VTRAIN_RUN, as
`<key>:<task name>` (so does everything they start, even what left their process group
with setsid, unless it clears its environment); containers and the job's network in
the label `vtrain.run`. A key begins with the runner's identity:
`<pid namespace>-<pid>-<start time in clock ticks>-<random>`, so anyone on this machine
can tell whether the process that ran it still lives (process IDs are reused; the start
time tells a new process from the old one).

Three ways leftovers go, whatever the runner died of:
- its own cleanup at the end of every run (the backends' `cleanup`);
- a watchdog, one small process per run, started by the backend's `prepare`: it holds
  the read end of a pipe whose write end only the runner holds. When the runner ends
  normally it says `done`; when it dies (SIGKILL, a crash, the OOM killer) the kernel
  closes the pipe and the watchdog kills the run's processes, or removes its containers
  and network, then exits. It runs in its own session (closing the terminal does not
  reach it) and is this file run as a script: it imports only the standard library until
  it must act (then the docker SDK, for containers).
- when the watchdog died too, the next run on this machine (`vtrain run`, a notebook,
  the local service) reaps every key whose runner is dead, when its backend prepares.

The local service reaps more after a restart: everything carrying CLOUD_ML_JOB_ID of a
job it still had running (`Backend.cleanup_job`).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("jupyter_ext.runner.reaper")

RUN_VAR = "VTRAIN_RUN"  # the run key, in every process replica's environment
LABEL_RUN = "vtrain.run"  # the run key, on every container and network of a run
DONE = b"done"  # what a runner that ended normally tells its watchdog


# ---- who runs --------------------------------------------------------------------------
def this_runner() -> str:
    """This process's identity: `<pid namespace>-<pid>-<start ticks>`."""
    start = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]
    return f"{_pid_namespace()}-{os.getpid()}-{start}"


def new_run_key() -> str:
    return f"{this_runner()}-{secrets.token_hex(4)}"


def runner_alive(key: str) -> bool:
    """Whether the runner a key (or a `this_runner()` identity) names still runs. A runner in
    another pid namespace cannot be checked from here: it counts as alive, so nothing of it goes."""
    parts = key.split("-")
    if len(parts) < 3 or not parts[1].isdigit():
        return True  # not a key this module made: not ours to judge
    namespace, pid, start = parts[0], int(parts[1]), parts[2]
    if namespace != _pid_namespace():
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and fields[19] == start  # a zombie has exited; field 22 of stat: start time


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").split("[")[-1].rstrip("]")
    except OSError:
        return "0"


# ---- processes -------------------------------------------------------------------------
def _environments(pgid: int | None = None) -> Iterator[tuple[int, list[bytes]]]:
    """(pid, environment entries) of every process we may read (in process group `pgid` if given)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if pgid is not None and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            yield int(entry.name), (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            pass  # it exited, or is not ours to read


def processes_with(marker: bytes, pgid: int | None = None, prefix: bool = False) -> list[int]:
    """Processes whose environment holds the entry `marker` (`NAME=value`; with `prefix`, an entry
    that starts with it), in process group `pgid` if given. A process that has exited (a zombie)
    has no environment any more: it is not listed."""
    if prefix:
        return [pid for pid, env in _environments(pgid) if any(entry.startswith(marker) for entry in env)]
    return [pid for pid, env in _environments(pgid) if marker in env]


def kill_processes(marker: bytes, prefix: bool = False, sig: int = signal.SIGKILL) -> None:
    """Signal every process carrying `marker` (see `processes_with`); with SIGKILL, again until
    none is left (one may fork meanwhile)."""
    for _ in range(20):
        pids = processes_with(marker, prefix=prefix)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if not pids or sig != signal.SIGKILL:
            return
        time.sleep(0.05)


def replica_env(key: str, task_name: str) -> dict[str, str]:
    """What one replica of a run (and everything it starts) carries in its environment."""
    return {RUN_VAR: f"{key}:{task_name}"}


def replica_marker(key: str, task_name: str) -> bytes:
    """That environment entry, as `processes_with` looks for it."""
    return f"{RUN_VAR}={key}:{task_name}".encode()


def run_marker(key: str) -> bytes:
    """The start of the entry every replica of a run carries."""
    return f"{RUN_VAR}={key}:".encode()


def reap_orphaned_processes() -> None:
    """Kill the processes of every run whose runner is dead (and whose watchdog did not act)."""
    start = f"{RUN_VAR}=".encode()
    keys = {entry[len(start):].decode(errors="replace").split(":")[0] for _, env in _environments()
            for entry in env if entry.startswith(start)}
    for key in keys:
        if not runner_alive(key):
            kill_processes(run_marker(key), prefix=True)


# ---- containers ------------------------------------------------------------------------
def remove_labelled(client: Any, label: str, threads: Iterable[Any] = ()) -> None:
    """Remove the containers, then the networks, that carry `label` (`name=value`) on a
    docker.APIClient; `threads` (their output readers) end with them. Never raises."""
    import docker.errors

    try:
        for c in client.containers(all=True, filters={"label": label}):
            try:
                client.remove_container(c["Id"], force=True, v=True)
            except docker.errors.NotFound:
                pass
        for thread in threads:
            thread.join(5.0)
        for n in client.networks(filters={"label": label}):
            for attempt in range(20):
                try:
                    client.remove_network(n["Id"])
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError:  # endpoints still being released
                    time.sleep(0.1 * (attempt + 1))
    except Exception as exc:  # noqa: BLE001  (the engine went away: nothing more can be done here)
        log.warning("cannot remove the containers and networks labelled %s: %s", label, exc)


def reap_orphaned_containers(client: Any) -> None:
    """Remove the containers and networks of every run whose runner is dead."""
    try:
        labelled = client.containers(all=True, filters={"label": LABEL_RUN}) + \
            client.networks(filters={"label": LABEL_RUN})
    except Exception:  # noqa: BLE001  (the job's own start reports an engine that does not answer)
        return
    keys = {(item.get("Labels") or {}).get(LABEL_RUN, "") for item in labelled}
    for key in sorted(keys - {""}):
        if not runner_alive(key):
            remove_labelled(client, f"{LABEL_RUN}={key}")


def _docker_client(engine: str) -> Any:
    import docker
    import docker.utils

    kwargs = {"base_url": engine} if engine else docker.utils.kwargs_from_env()
    return docker.APIClient(version="auto", timeout=60, **kwargs)


# ---- the watchdog ----------------------------------------------------------------------
class Watchdog:
    """The process that cleans up after this run if this process dies first.
    `kind`: `processes` or `containers`; `engine`: the Docker engine's URL for containers
    ("" for DOCKER_HOST and the rest of the environment)."""

    def __init__(self, kind: str, key: str, engine: str = "") -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-P", __file__, kind, key, engine], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        """The run ended and cleaned up after itself: the watchdog leaves without acting."""
        if self._proc.stdin is None or self._proc.stdin.closed:
            return
        try:
            self._proc.stdin.write(DONE)
            self._proc.stdin.close()
        except OSError:  # it died: nothing to tell it
            pass
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _watch(kind: str, key: str, engine: str) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if sys.stdin.buffer.read() == DONE:  # until the runner says so, or its end of the pipe closes
        return
    if kind == "processes":
        kill_processes(run_marker(key), prefix=True)
    elif kind == "containers":
        client = _docker_client(engine)
        try:
            remove_labelled(client, f"{LABEL_RUN}={key}")
        finally:
            client.close()


if __name__ == "__main__":
    _watch(*sys.argv[1:4])
