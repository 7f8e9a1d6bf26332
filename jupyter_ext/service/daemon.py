"""Start, find and stop the local service.

The service runs detached from whoever started it, so local jobs outlive a
notebook kernel or a terminal. `<data dir>/service/` holds `service.json`
(endpoint, pid, token file, the options, local limits and pruning policy it runs with), `token`
(readable by the user only; a new one at every start) and `service.log`, which a start moves to
`service.log.1` once it holds more than LOG_BYTES.

The pruning policy (`gc`, VTRAIN_GC_* variables) is read from the environment of whoever starts
the service: a bad value fails the start with one line naming the variable.

One service per data folder: a service holds `service.lock` (fcntl.flock, with its
pid inside) for its whole life, and takes it before it recovers jobs or writes
anything. A second start finds it held, says "already running (pid N, endpoint
URL)" and exits 1, leaving the token and service.json as they were.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, Iterator
from urllib.parse import urlparse

from .. import gc, paths
from ..errors import WorkbenchError
from .emulation import Options

START_TIMEOUT = 60.0
LOG_BYTES = 5 * 1024 * 1024  # of service.log, before a start moves it aside


def runtime_dir() -> Path:
    return paths.data_dir() / "service"


def info_file() -> Path:
    return runtime_dir() / "service.json"


def token_file() -> Path:
    return runtime_dir() / "token"


def lock_file() -> Path:
    return runtime_dir() / "service.lock"


def hold_lock() -> IO[str] | None:
    """Take the service lock for this process's life (keep the file open), or None when another
    service holds it. Only the holder may recover jobs and write the runtime files."""
    paths.private_dir(runtime_dir())
    lock = open(lock_file(), "a+", opener=paths.private_opener)  # noqa: SIM115 (held open for the process's life; not truncated: it names the holder)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    lock.truncate(0)
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def holder() -> int | None:
    """The pid of the running service that holds the lock (it may not answer yet), else None."""
    try:
        pid = int(lock_file().read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) and _is_service(pid) else None


def already_running() -> str:
    """What a second start says: the running service's pid and endpoint."""
    pid = holder()
    try:
        info = json.loads(info_file().read_text())
    except (OSError, ValueError):
        info = {}
    endpoint = info.get("endpoint") if pid and info.get("pid") == pid else "not listening yet"
    return f"already running (pid {pid or 'unknown'}, endpoint {endpoint})"


def status() -> dict[str, Any] | None:
    """The running service's endpoint, pid and token file, or None."""
    try:
        info = json.loads(info_file().read_text())
    except (OSError, ValueError):
        return None
    pid = info.get("pid", 0)
    return info if _alive(pid) and _is_service(pid) and _answers(info.get("endpoint", "")) else None


def ensure_running(options: Options | None = None) -> dict[str, Any]:
    """The running service, started (detached) when there is none; with `options`, one that runs
    with them (a running service with others is an error: stop it first). `already_running` in
    the answer says whether it ran before."""
    with _start_lock():
        info = status()
        if info:
            _check_options(info, options)
            return {**info, "already_running": True}
        gc.Policy.from_env()  # a bad VTRAIN_GC_* value is the user's to fix now, not a line in service.log
        paths.private_dir(runtime_dir())
        stopped_marker().unlink(missing_ok=True)
        log = open(_rotated(runtime_dir() / "service.log"), "ab", opener=paths.private_opener)
        argv = [sys.executable, "-m", "jupyter_ext.service", *(options or Options()).argv()]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            info = status()
            if info and info.get("pid") == proc.pid:
                return {**info, "already_running": False}
            if proc.poll() is not None:  # it found a service starting (or one not answering) beside it
                if info:
                    _check_options(info, options)
                    return {**info, "already_running": True}
                if holder() is None:
                    break
            time.sleep(0.05)
        if (pid := holder()) and pid != proc.pid:
            raise WorkbenchError(f"the local service (pid {pid}) runs but does not answer; stop it (kill {pid}) "
                                 "and start again")
        raise WorkbenchError(f"the local service did not start; see {runtime_dir() / 'service.log'}")


def _check_options(info: dict[str, Any], options: Options | None) -> None:
    running = Options.from_info(info)
    if options is not None and running != options:
        flags = " ".join(running.argv()) or "no options"
        raise WorkbenchError(f"the local service already runs (pid {info['pid']}, {info['endpoint']}) with "
                             f"{flags}; `vtrain service stop` it first")


def stop(timeout: float = 60.0) -> bool:
    """Stop the service (it cancels its running jobs first), even one that does not answer. False
    when none ran."""
    info = status()
    pid = info["pid"] if info else holder()
    if not pid:
        return False
    paths.write_private(stopped_marker(), f"{pid}\n")  # readers that only look (the lab panel) leave it stopped
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:  # it just exited
        return True
    deadline = time.monotonic() + timeout
    while _alive(pid) and _is_service(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid) and _is_service(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return True


def stopped_marker() -> Path:
    """Left by `stop` until the next start: the service was stopped on purpose."""
    return runtime_dir() / "stopped"


def stopped_on_purpose() -> bool:
    """The service was stopped (`vtrain service stop`) and nothing started it since: what only lists jobs
    (the lab panel's refreshes) must not start it again, or a restart with other limits would find it running."""
    return stopped_marker().exists() and status() is None


def read_token() -> str:
    try:
        return token_file().read_text().strip()
    except OSError:
        raise WorkbenchError(f"no service token in {token_file()}; is the local service running?") from None


def write_runtime(endpoint: str, token: str, options: Options) -> None:
    """Called by the service once it listens: token first, then where to find it."""
    paths.write_private(token_file(), token)
    paths.write_private(info_file(), json.dumps({"endpoint": endpoint, "pid": os.getpid(),
                                                 "token_file": str(token_file()), "options": options.as_dict(),
                                                 "limits": asdict(options.limits), "gc": _gc_policy()}))


def _gc_policy() -> dict[str, Any] | None:
    """The pruning policy the service applies (as `gc.keep_pruning` reads it), None when off."""
    try:
        policy = gc.Policy.from_env()
    except WorkbenchError as exc:  # started without `ensure_running`: it does not prune, and says so
        return {"error": str(exc)}
    return asdict(policy) if policy else None


def _rotated(log: Path) -> Path:
    """`log`, moved to `<log>.1` first (replacing the one before) when it has grown past LOG_BYTES."""
    try:
        if log.stat().st_size > LOG_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))
    except FileNotFoundError:
        pass
    return log


def clear_runtime() -> None:
    try:
        if json.loads(info_file().read_text()).get("pid") == os.getpid():
            info_file().unlink()
    except (OSError, ValueError):
        pass


@contextmanager
def _start_lock() -> Iterator[None]:
    paths.private_dir(runtime_dir())
    with open(runtime_dir() / "start.lock", "w", opener=paths.private_opener) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _alive(pid: int) -> bool:
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited


def _is_service(pid: int) -> bool:
    """The process is a local service (process IDs are reused: a stale file must not name another)."""
    try:
        return b"jupyter_ext.service" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _answers(endpoint: str) -> bool:
    url = urlparse(endpoint)
    try:
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=1.0):
            return True
    except OSError:
        return False
