"""Replicas die with their runner: run keys, the watchdog, adopted orphans, and reaping what dead
runners left.

Every run (one job, or one tuning trial, on one backend instance) has a key, and every
replica carries it: process replicas in the environment variable VTRAIN_RUN, as
`<key>:<task name>` (so does everything they start, even what left their process group
with setsid, unless it clears its environment); containers and the job's network in
the label `vtrain.run`. A key begins with the runner's identity:
`<pid namespace>-<pid>-<start time in clock ticks>-<random>`, so anyone on this machine
can tell whether the process that ran it still lives (process IDs are reused; the start
time tells a new process from the old one).

What a replica starts with a cleared environment and setsid carries neither the marker nor
the replica's process group. While a process runs process replicas it is their child
subreaper (Linux's PR_SET_CHILD_SUBREAPER, see `Orphans`): whatever a replica or its
descendants leave behind when they exit is re-parented to it, not to init, so it can be
found (a child of the runner that the runner did not start) and reaped.

Three ways leftovers go, whatever the runner died of:
- its own cleanup at the end of every run (the backends' `cleanup`, and `Orphans.end` for
  the runner's adopted orphans);
- a watchdog, one small process per run, started by the backend's `prepare`: it holds
  the read end of a pipe whose write end only the runner holds. When the runner ends
  normally it says `done`; when it dies (SIGKILL, a crash, the OOM killer) the kernel
  closes the pipe and the watchdog kills the run's processes (those with the marker, and
  the orphans without it that the runner had adopted and told it of), or removes its
  containers and network, then exits. It runs in its own session (closing the terminal does not
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
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("jupyter_ext.runner.reaper")

RUN_VAR = "VTRAIN_RUN"  # the run key, in every process replica's environment
LABEL_RUN = "vtrain.run"  # the run key, on every container and network of a run
DONE = b"done"  # what a runner that ended normally tells its watchdog
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
SCAN_INTERVAL = 0.5  # seconds between two looks at the runner's adopted orphans while runs go on

T = TypeVar("T", bound="subprocess.Popen[Any]")


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
    found = _stat(pid)
    return found is not None and found[1].state != "Z" and str(found[1].start) == start  # a zombie has exited


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


# ---- adopted orphans -------------------------------------------------------------------
@dataclass(frozen=True)
class _Child:
    """A child process of this one, from /proc/<pid>/stat."""
    pid: int
    state: str
    sid: int
    start: int  # clock ticks after boot

    @property
    def ident(self) -> tuple[int, int]:
        return self.pid, self.start


@dataclass
class _Run:
    start: int  # clock ticks after boot (as /proc gives a process's start time) when the run began
    watchdog: Watchdog | None
    over: bool = False


def _stat(pid: int | str) -> tuple[int, _Child] | None:
    """(parent pid, the process) from /proc, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), _Child(int(pid), fields[0], int(fields[3]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _children() -> list[_Child]:
    """This process's children, those it started and those it adopted, zombies too."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(entry.name)) is not None and stat[0] == me:
            found.append(stat[1])
    return found


def _now_ticks() -> int:
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def _set_subreaper(on: bool) -> bool:
    """Make this process the child subreaper of its descendants (or no more); False where the
    system has none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _run_key_of(pid: int) -> str | None:
    """The run key in a process's environment, if it carries one."""
    start = f"{RUN_VAR}=".encode()
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((entry[len(start):].decode(errors="replace").split(":")[0] for entry in env
                 if entry.startswith(start)), None)


class Orphans:
    """This process as the child subreaper of the replicas it runs (one per process: `ORPHANS`).

    While a run is on, what a replica's descendants leave behind when their parent exits
    becomes a child of this process, whatever it did to its environment and session. Which
    run it came from: one carrying a run's marker is that run's; one without (it cleared its
    environment) is, of the runs on in this process, of every run that had begun when it
    started (a process is younger than the replica it descends from). It is killed once all
    those runs have stopped their replicas (`sweep`, `end`): never while a run it may belong
    to goes on, so with runs that overlap, one may outlive its own run until the others end
    too. Adopted children that exit are reaped (waited for) every SCAN_INTERVAL, and when
    they are killed.

    Children this process started itself (replicas, watchdogs: `spawn`) are never touched,
    so `subprocess.Popen` still waits for its own; nor are children in this process's own
    session, which no replica's descendant can join (replicas start in sessions of their
    own). The runners (`vtrain run`, the local service) start no other processes; a program
    that runs jobs with the Supervisor as a library, and meanwhile starts processes of its
    own in new sessions, should start them with `spawn`.

    The subreaper flag is set while a run is on, and cleared after the last one ended, so
    between runs orphans of this process's other children go to init as before.
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._runs: dict[str, _Run] = {}
        self._own: set[tuple[int, int]] = set()  # (pid, start) of the children this process started
        self._told: set[tuple[int, int]] = set()  # adopted children the watchdogs were told of
        self._enabled = False
        self._thread: threading.Thread | None = None

    def begin(self, key: str, watchdog: Watchdog | None = None) -> None:
        """A run starts: adopt what its replicas leave behind (before the first replica starts).
        The watchdog, when given, is told of each adopted child without the run's marker."""
        with self._lock:
            if not self._runs:
                self._enabled = _set_subreaper(True)
            self._runs[key] = _Run(_now_ticks(), watchdog)
            if self._enabled and self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="orphan-reaper", daemon=True)
                self._thread.start()
            self._lock.notify_all()

    def spawn(self, start: Callable[[], T]) -> T:
        """Start a child process (`start` returns its Popen) that is this process's own, never
        taken for an orphan."""
        with self._lock:
            proc = start()
            if (stat := _stat(proc.pid)) is not None:
                self._own.add(stat[1].ident)
            return proc

    def sweep(self, key: str) -> None:
        """Every replica of a run was stopped: kill and reap what was adopted of it now, as `end` would."""
        with self._lock:
            run = self._runs.get(key)
            if run is None or not self._enabled:
                return
            over, run.over = run.over, True
            try:
                self._sweep()
            finally:
                run.over = over

    def end(self, key: str) -> None:
        """A run ended (its replicas stopped): kill what was adopted of it, reap it, and stop
        being a subreaper when no run is left."""
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                return
            run.over = True
            try:
                if self._enabled:
                    self._sweep()
            finally:
                del self._runs[key]
                if not self._runs and self._enabled:
                    _set_subreaper(False)
                    self._enabled = False

    # ---- inside -------------------------------------------------------------------------
    def _runs_of(self, child: _Child, key: str | None, session: int) -> list[_Run]:
        """The runs an adopted child may belong to ([] when it is not adopted, or of none)."""
        if child.ident in self._own or child.sid == session:
            return []
        if key is not None and key in self._runs:
            return [self._runs[key]]
        return [run for run in self._runs.values() if run.start <= child.start]

    def _adopted(self) -> Iterator[tuple[_Child, str | None, list[_Run]]]:
        """Each child that runs may own, with its run key and those runs; a zombie is reaped."""
        children, session = _children(), os.getsid(0)
        current = {child.ident for child in children}
        self._own &= current  # the ones Popen has waited for are gone
        self._told &= current
        for child in children:
            key = None if child.state == "Z" else _run_key_of(child.pid)
            runs = self._runs_of(child, key, session)
            if not runs:
                continue
            if child.state == "Z":
                try:
                    os.waitpid(child.pid, os.WNOHANG)  # an adopted child: no Popen waits for it
                except ChildProcessError:
                    pass
            yield child, key, runs

    def _sweep(self) -> None:
        """Kill the adopted children whose runs all ended, until none is left (what they started
        is adopted in turn), and reap them."""
        for _ in range(200):
            busy = False  # a zombie was reaped or one was killed: what it started may be adopted next
            for child, _key, runs in self._adopted():
                if child.state == "Z":
                    busy = True
                elif all(run.over for run in runs):
                    busy = True
                    try:
                        os.kill(child.pid, signal.SIGKILL)  # our child: its pid is not reused until we reap it
                    except ProcessLookupError:
                        pass
            if not busy:
                return
            time.sleep(0.02)

    def _watch(self) -> None:
        """Reap adopted children that exit, and tell the watchdogs of those without a marker."""
        while True:
            with self._lock:
                while not self._runs:
                    self._lock.wait()
                if self._enabled:
                    for child, key, runs in self._adopted():
                        if child.state != "Z" and key not in self._runs and child.ident not in self._told:
                            self._told.add(child.ident)
                            for run in runs:
                                if run.watchdog is not None:
                                    run.watchdog.watch(child.pid, child.start)
                self._lock.wait(SCAN_INTERVAL)


ORPHANS = Orphans()


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
        self._proc = ORPHANS.spawn(lambda: subprocess.Popen(
            [sys.executable, "-P", __file__, kind, key, engine], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))

    def watch(self, pid: int, start: int) -> None:
        """Kill this process too (if it is still the one that started at `start`) if the runner dies."""
        if self._proc.stdin is None or self._proc.stdin.closed:
            return
        try:
            self._proc.stdin.write(f"{pid} {start}\n".encode())
            self._proc.stdin.flush()
        except (OSError, ValueError):  # it died, or was just told `done`
            pass

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
    told = sys.stdin.buffer.read().split(b"\n")  # until the runner says done, or its end of the pipe closes
    if told[-1] == DONE:
        return
    if kind == "processes":
        kill_processes(run_marker(key), prefix=True)
        for line in told:  # orphans without the marker that the runner had adopted: `<pid> <start>`
            pid, _, start = line.decode(errors="replace").partition(" ")
            stat = _stat(pid) if pid.isdigit() else None
            if stat is not None and str(stat[1].start) == start and stat[1].state != "Z":
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
    elif kind == "containers":
        client = _docker_client(engine)
        try:
            remove_labelled(client, f"{LABEL_RUN}={key}")
        finally:
            client.close()


if __name__ == "__main__":
    _watch(*sys.argv[1:4])
