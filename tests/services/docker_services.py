#!/usr/bin/env python3
"""Test services for the Docker tests: a Docker engine, a registry, a Python base image.

    python tests/services/docker_services.py up       start (or reuse) all three; prints their addresses
    python tests/services/docker_services.py status   what runs, and who uses it
    python tests/services/docker_services.py down     stop what these services started
    python tests/services/docker_services.py env      `export` lines for a shell

Everything lives in one folder, `$VTRAIN_SERVICES_DIR` (default
`~/.cache/vtrain-test-services`), so it never clashes with another engine:

    engine/   dockerd's socket (engine/docker.sock), --data-root, --exec-root, pid file, log
    registry/ docker-registry's config, storage, pid and port files, log
    cache/    debootstrap root file systems as tarballs, keyed by the debootstrap arguments
    users/    one file per pytest session using the services (its process id)

- Engine: `dockerd` (Debian's docker.io, run as root) with its own socket, data
  root, exec root, pid file and containerd namespace; no iptables, no default
  bridge (user-defined networks with container DNS work). A running engine
  whose socket answers is reused.
- Registry: `docker-registry serve` (Debian's docker-registry) on 127.0.0.1 and
  a free port, storage under registry/. A running one that answers is reused.
- Base image `vtrain-test/python:<key>`: `debootstrap --variant=minbase
  --include=python3,python3-pip` of this machine's Debian release from the apt
  mirror its sources already use, imported with `docker import`, plus one layer
  that makes `python` run python3 and lets pip install into the system Python.
  Built once: the engine keeps it in its data root; the rootfs tarball in cache/
  rebuilds it without debootstrap when the data root was wiped.

Who stops what: `up` from a pytest session (`acquire()`) registers the session
in users/; `release()` at the end of the session stops the engine and registry
that a test session started once no other live session uses them. Services
started with the `up` command, or while `VTRAIN_KEEP_SERVICES=1`, keep running
for later sessions (cheap reuse) until `down`. Only processes these services
started are stopped, by the process id in their pid files, after checking the
process is still that service.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

BASE_REPOSITORY = "vtrain-test/python"
ROOTFS_REPOSITORY = "vtrain-test/rootfs"
PACKAGES = ("python3", "python3-pip")
# Bump when the recipe below changes: it is part of the cache key.
RECIPE = "2"
# Removed from the root file system before import: keeps the base layer small.
TRIM = ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale")
FIX_LAYER = """\
FROM {rootfs}
RUN ln -s /usr/bin/python3 /usr/local/bin/python \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
ENV PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
CMD ["python"]
"""
ENGINE_START_TIMEOUT = 60.0
Log = Callable[[str], None]


class ServiceError(Exception):
    """A service could not be started; the message is one line."""


@dataclass
class Services:
    engine_url: str  # unix:///.../engine/docker.sock
    registry: str  # 127.0.0.1:PORT
    base_image: str  # vtrain-test/python:<key>
    started: tuple[str, ...] = ()  # what this call started

    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.engine_url, "VTRAIN_TEST_REGISTRY": self.registry,
                "VTRAIN_TEST_BASE_IMAGE": self.base_image}


def services_dir() -> Path:
    return Path(os.environ.get("VTRAIN_SERVICES_DIR") or Path.home() / ".cache" / "vtrain-test-services")


# ---- public ------------------------------------------------------------------

def up(owner: str = "manual", log: Log = lambda _m: None) -> Services:
    """Start or reuse the engine, the registry and the base image.

    `owner`: "session" (a test session; stopped by the last session's `release`)
    or "manual" (kept until `down`).
    """
    root = services_dir()
    root.mkdir(parents=True, exist_ok=True)
    if os.environ.get("VTRAIN_KEEP_SERVICES") == "1":
        owner = "manual"
    with _locked(root):
        started = []
        engine_url, new = _engine(root / "engine", owner, log)
        if new:
            started.append("engine")
        registry, new = _registry(root / "registry", owner, log)
        if new:
            started.append("registry")
        base = _base_image(engine_url, root / "cache", log)
        return Services(engine_url, registry, base, tuple(started))


def acquire(log: Log = lambda _m: None) -> Services:
    """`up` for a test session, registered as a user of the services."""
    users = services_dir() / "users"
    users.mkdir(parents=True, exist_ok=True)
    (users / str(os.getpid())).write_text("")
    try:
        return up("session", log)
    except BaseException:
        release()
        raise


def release() -> list[str]:
    """The session is done; stop session-started services nobody else uses."""
    root = services_dir()
    with contextlib.suppress(FileNotFoundError):
        (root / "users" / str(os.getpid())).unlink()
    if not root.is_dir():
        return []
    with _locked(root):
        if _live_users(root):
            return []
        stopped = []
        for name, pidfile in (("registry", root / "registry" / "registry.pid"), ("engine", root / "engine" / "dockerd.pid")):
            if _owner(pidfile) == "session" and _stop(pidfile, name):
                stopped.append(name)
        return stopped


def down(force: bool = False) -> list[str]:
    """Stop the engine and the registry these services started (any owner)."""
    root = services_dir()
    if not root.is_dir():
        return []
    with _locked(root):
        users = _live_users(root)
        if users and not force:
            raise ServiceError(f"test sessions {', '.join(map(str, users))} still use the services (use --force)")
        stopped = []
        for name, pidfile in (("registry", root / "registry" / "registry.pid"), ("engine", root / "engine" / "dockerd.pid")):
            if _stop(pidfile, name):
                stopped.append(name)
        return stopped


def status() -> dict[str, object]:
    root = services_dir()
    engine, registry = root / "engine", root / "registry"
    port = _read(registry / "registry.port")
    return {
        "dir": str(root),
        "engine": {"url": f"unix://{engine / 'docker.sock'}", "pid": _alive(engine / "dockerd.pid", "dockerd"),
                   "answers": _engine_answers(f"unix://{engine / 'docker.sock'}"),
                   "owner": _owner(engine / "dockerd.pid")},
        "registry": {"address": f"127.0.0.1:{port}" if port else None,
                     "pid": _alive(registry / "registry.pid", "docker-registry"),
                     "answers": bool(port) and _registry_answers(f"127.0.0.1:{port}"),
                     "owner": _owner(registry / "registry.pid")},
        "users": _live_users(root) if root.is_dir() else [],
    }


# ---- engine ------------------------------------------------------------------

def engine_command(folder: Path) -> list[str]:
    url = f"unix://{folder / 'docker.sock'}"
    return [shutil.which("dockerd") or "dockerd", "--host", url, "--data-root", str(folder / "data"),
            "--exec-root", str(folder / "exec"), "--pidfile", str(folder / "dockerd.pid"),
            "--storage-driver=overlay2", "--iptables=false", "--ip6tables=false", "--bridge=none",
            "--containerd-namespace=vtrain-test", "--containerd-plugins-namespace=vtrain-test-plugins",
            # Containers have no way out (no NAT), so the embedded DNS cannot forward a lookup of a
            # name not (yet) on the network: fail it in a second, not glibc's 2 x 5 s, so replicas
            # that resolve peers still starting retry quickly.
            "--dns-opt=timeout:1", "--dns-opt=attempts:1"]


def _engine(folder: Path, owner: str, log: Log) -> tuple[str, bool]:
    sock, pidfile = folder / "docker.sock", folder / "dockerd.pid"
    url = f"unix://{sock}"
    cmd = engine_command(folder)
    if _engine_answers(url):
        pid = _alive(pidfile, "dockerd")
        if pid is None or _cmdline(pid)[1:] == cmd[1:] or _live_users(folder.parent, exclude=os.getpid()):
            return url, False
        log("restarting dockerd: it runs with other options than these services use now")
        _stop(pidfile, "engine")
    if _alive(pidfile, "dockerd"):  # started, not answering yet (or hung): give it a moment
        if _wait(lambda: _engine_answers(url), 20):
            return url, False
        _stop(pidfile, "engine")
    if not shutil.which("dockerd"):
        raise ServiceError("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise ServiceError("starting dockerd needs root")
    for stale in (sock, pidfile):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    log(f"starting dockerd ({url})")
    pid = _spawn(cmd, folder / "dockerd.log")
    (folder / "dockerd.owner").write_text(owner)
    if not _wait(lambda: _engine_answers(url) or not _running(pid), ENGINE_START_TIMEOUT) or not _engine_answers(url):
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
        raise ServiceError(f"dockerd did not start: {_last_line(folder / 'dockerd.log')}")
    return url, True


def _engine_answers(url: str) -> bool:
    path = url.removeprefix("unix://")
    if not os.path.exists(path):
        return False
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(3)
            s.connect(path)
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.0 200") or False
    except OSError:
        return False


# ---- registry ----------------------------------------------------------------

def _registry(folder: Path, owner: str, log: Log) -> tuple[str, bool]:
    pidfile, portfile = folder / "registry.pid", folder / "registry.port"
    port = _read(portfile)
    if port and _alive(pidfile, "docker-registry"):
        if _wait(lambda: _registry_answers(f"127.0.0.1:{port}"), 10):
            return f"127.0.0.1:{port}", False
        _stop(pidfile, "registry")
    binary = shutil.which("docker-registry")
    if not binary:
        raise ServiceError("docker-registry is not installed (apt-get install docker-registry)")
    folder.mkdir(parents=True, exist_ok=True)
    port = str(_free_port())
    config = folder / "config.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folder / "storage")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": "vtrain-test-services"},
    }, indent=2))
    log(f"starting docker-registry (127.0.0.1:{port})")
    pid = _spawn([binary, "serve", str(config)], folder / "registry.log")
    pidfile.write_text(f"{pid}\n")
    portfile.write_text(port)
    (folder / "registry.owner").write_text(owner)
    address = f"127.0.0.1:{port}"
    if not _wait(lambda: _registry_answers(address) or not _running(pid), 20) or not _registry_answers(address):
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
        raise ServiceError(f"docker-registry did not start: {_last_line(folder / 'registry.log')}")
    return address, True


def _registry_answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=3) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- base image --------------------------------------------------------------

def debootstrap_args() -> list[str]:
    suite = _os_release().get("VERSION_CODENAME") or "bookworm"
    if not Path(f"/usr/share/debootstrap/scripts/{suite}").exists():
        suite = "bookworm"
    mirror, keyring = apt_mirror(suite)
    args = ["--variant=minbase", f"--include={','.join(PACKAGES)}"]
    if keyring:
        args.append(f"--keyring={keyring}")
    return args + [suite, "ROOTFS", mirror]


def apt_mirror(suite: str) -> tuple[str, str]:
    """(URI, keyring) of the apt source this machine uses for `suite`'s main archive."""
    entries: list[tuple[str, list[str], str]] = []
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in lists:
        for line in _lines(path):
            m = re.match(r"deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)", line)
            if m:
                signed = re.search(r"signed-by=(\S+)", m["opts"] or "")
                entries.append((m["uri"], [m["suite"]], signed.group(1) if signed else ""))
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", "\n".join(_lines(path, keep_blank=True))):
            pairs = (ln.partition(":") for ln in stanza.splitlines() if ":" in ln)
            fields = {k.strip().lower(): v.strip() for k, _, v in pairs}
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
                for uri in fields.get("uris", "").split():
                    entries.append((uri, fields.get("suites", "").split(), fields.get("signed-by", "")))
    for uri, suites, keyring in entries:
        if suite in suites:
            return uri, keyring if keyring.startswith("/") and Path(keyring).is_file() else ""
    raise ServiceError(f"no apt source for {suite} in /etc/apt/sources.list(.d): cannot debootstrap a base image")


def _base_image(engine_url: str, cache: Path, log: Log) -> str:
    import docker
    import docker.errors

    args = debootstrap_args()
    key = hashlib.sha256(json.dumps([RECIPE, args]).encode()).hexdigest()[:12]
    name = f"{BASE_REPOSITORY}:{key}"
    client = docker.APIClient(base_url=engine_url, version="auto", timeout=600)
    try:
        if _has_image(client, name):
            return name
        rootfs = f"{ROOTFS_REPOSITORY}:{key}"
        if not _has_image(client, rootfs):
            tarball = cache / f"rootfs-{key}.tar"
            if not tarball.exists():
                _debootstrap(args, tarball, log)
            log(f"importing {tarball.name} as {rootfs}")
            client.import_image_from_file(str(tarball), repository=ROOTFS_REPOSITORY, tag=key)
        log(f"building {name}")
        context = _tar({"Dockerfile": FIX_LAYER.format(rootfs=rootfs).encode()})
        errors = []
        for chunk in client.build(fileobj=io.BytesIO(context), custom_context=True, tag=name, rm=True,
                                  forcerm=True, decode=True, network_mode="none"):
            if "error" in chunk:
                errors.append(chunk["error"].strip())
        if errors or not _has_image(client, name):
            raise ServiceError(f"cannot build the base image {name}: {'; '.join(errors) or 'no image'}")
        return name
    except docker.errors.APIError as exc:
        raise ServiceError(f"cannot make the base image {name}: {exc.explanation or exc}") from None
    finally:
        client.close()


def _debootstrap(args: list[str], tarball: Path, log: Log) -> None:
    if not shutil.which("debootstrap"):
        raise ServiceError("debootstrap is not installed (apt-get install debootstrap)")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix="debootstrap-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = ["debootstrap", *[str(rootfs) if a == "ROOTFS" else a for a in args]]
        log(f"running {' '.join(cmd)} (about a minute)")
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["(no output)"]
            raise ServiceError(f"debootstrap failed: {last[0]}")
        for trim in TRIM:
            target = rootfs / trim
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        partial = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
        os.replace(partial, tarball)


def _has_image(client: object, name: str) -> bool:
    import docker.errors

    try:
        client.inspect_image(name)  # type: ignore[attr-defined]
        return True
    except docker.errors.NotFound:
        return False


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ---- processes and files -----------------------------------------------------

def _spawn(cmd: list[str], log_path: Path) -> int:
    """Start a daemon in its own session, not as a child of this process (it may
    outlive it); returns its process id."""
    script = '"$@" >>"$LOG" 2>&1 </dev/null & echo $!'
    done = subprocess.run(["sh", "-c", script, "sh", *cmd], env={**os.environ, "LOG": str(log_path)},
                          capture_output=True, text=True, start_new_session=True, check=True)
    return int(done.stdout.strip())


def _running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


def _alive(pidfile: Path, name: str) -> int | None:
    """The pid in `pidfile` when that process runs and is `name` started by these services."""
    pid = _read(pidfile)
    if not pid or not pid.isdigit() or not _running(int(pid)):
        return None
    cmdline = _cmdline(int(pid))
    if not cmdline or Path(cmdline[0]).name != name:
        return None
    if not any(str(pidfile.parent) in arg for arg in cmdline):  # its own folder is on its command line
        return None
    return int(pid)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def _stop(pidfile: Path, name: str) -> bool:
    binary = "dockerd" if name == "engine" else "docker-registry"
    pid = _alive(pidfile, binary)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    if not _wait(lambda: not _running(pid), 30):
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: not _running(pid), 10)
    if name == "registry":
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()
    else:  # dockerd leaves its network namespace mount (and the data-root mount) behind
        _unmount_under(pidfile.parent)
    return True


def _unmount_under(folder: Path) -> None:
    prefix = str(folder.resolve()) + "/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return
    for point in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, check=False)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _owner(pidfile: Path) -> str:
    owner = pidfile.with_name(pidfile.name.split(".")[0] + ".owner")
    return _read(owner) or "manual"


def _live_users(root: Path, exclude: int | None = None) -> list[int]:
    users = []
    for entry in (root / "users").glob("*") if (root / "users").is_dir() else []:
        if entry.name.isdigit() and _running(int(entry.name)):
            if int(entry.name) != exclude:
                users.append(int(entry.name))
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
    return sorted(users)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    with open(root / "lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _lines(path: Path, keep_blank: bool = False) -> list[str]:
    try:
        text = path.read_text()
    except OSError:
        return []
    lines = [ln.split("#", 1)[0].rstrip() for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    return [ln for ln in lines if keep_blank or ln.strip()]


def _last_line(path: Path) -> str:
    lines = [ln for ln in _read(path).splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "(no output)"


def _os_release() -> dict[str, str]:
    out = {}
    for line in _lines(Path("/etc/os-release")):
        k, _, v = line.partition("=")
        out[k] = v.strip().strip('"')
    return out


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "status"
    try:
        if command == "up":
            services = up("manual", log=lambda m: print(f"services: {m}", file=sys.stderr))
            print(json.dumps(asdict(services), indent=2))
        elif command == "env":
            services = up("manual")
            print("".join(f"export {k}={v}\n" for k, v in services.env().items()), end="")
        elif command == "down":
            stopped = down(force="--force" in argv)
            print(f"stopped: {', '.join(stopped) or 'nothing'}")
        elif command == "status":
            print(json.dumps(status(), indent=2))
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    except ServiceError as exc:
        print(f"services: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
