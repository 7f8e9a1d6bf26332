"""Start, find and stop the local service.

The service runs detached from whoever started it, so local jobs outlive a
notebook kernel or a terminal. `<data dir>/service/` holds `service.json`
(endpoint, pid, token file, the options it runs with), `token` (readable by the
user only; a new one at every start) and `service.log`.
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
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from .. import paths
from ..errors import WorkbenchError
from .emulation import Options

START_TIMEOUT = 60.0


def runtime_dir() -> Path:
    return paths.data_dir() / "service"


def info_file() -> Path:
    return runtime_dir() / "service.json"


def token_file() -> Path:
    return runtime_dir() / "token"


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
    with them (a running service with others is an error: stop it first)."""
    with _start_lock():
        info = status()
        if info:
            running = Options(**info.get("options", {}))
            if options is not None and running != options:
                raise WorkbenchError(f"the local service already runs (pid {info['pid']}, {info['endpoint']}) with "
                                     f"{running}; `vtrain service stop` it first")
            return info
        runtime_dir().mkdir(parents=True, exist_ok=True)
        log = open(runtime_dir() / "service.log", "ab")
        argv = [sys.executable, "-m", "jupyter_ext.service", *(options or Options()).argv()]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            info = status()
            if info and info.get("pid") == proc.pid:
                return info
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise WorkbenchError(f"the local service did not start; see {runtime_dir() / 'service.log'}")


def stop(timeout: float = 60.0) -> bool:
    """Stop the service (it cancels its running jobs first). False when none ran."""
    info = status()
    if not info:
        return False
    pid = info["pid"]
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


def read_token() -> str:
    try:
        return token_file().read_text().strip()
    except OSError:
        raise WorkbenchError(f"no service token in {token_file()}; is the local service running?") from None


def write_runtime(endpoint: str, token: str, options: Options) -> None:
    """Called by the service once it listens: token first, then where to find it."""
    runtime_dir().mkdir(parents=True, exist_ok=True)
    fd = os.open(token_file(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    os.chmod(token_file(), 0o600)
    tmp = info_file().with_suffix(".tmp")
    tmp.write_text(json.dumps({"endpoint": endpoint, "pid": os.getpid(), "token_file": str(token_file()),
                               "options": options.as_dict()}))
    tmp.replace(info_file())


def clear_runtime() -> None:
    try:
        if json.loads(info_file().read_text()).get("pid") == os.getpid():
            info_file().unlink()
    except (OSError, ValueError):
        pass


@contextmanager
def _start_lock() -> Iterator[None]:
    runtime_dir().mkdir(parents=True, exist_ok=True)
    with open(runtime_dir() / "start.lock", "w") as lock:
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
