from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Sequence, TypeVar

import pytest
import yaml

pytest_plugins = ("services.fixtures",)

ROOT = Path(__file__).resolve().parent.parent
TRAINERS = ROOT / "tests" / "trainers"
SPEC_IMAGE = "gcr.io/p/trainer:1"  # a pool that is only a spec: never run
LOCAL_IMAGE = "local/test-trainer"  # a pool run on this host (the process backend ignores the image)

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _workbench_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own workbench data folder; a local service a test started there is
    stopped after it."""
    from jupyter_ext.service import daemon

    home = tmp_path_factory.mktemp("vtrain-home")
    monkeypatch.setenv("VTRAIN_HOME", str(home))
    yield home
    daemon.stop()


@pytest.fixture(autouse=True, scope="session")
def _no_service_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the session, no local service of the tests' data folders may still run: one found is
    stopped and named (a fixture that should have stopped it did not)."""
    yield
    base = str(tmp_path_factory.getbasetemp())
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            env = dict(item.split(b"=", 1) for item in (entry / "environ").read_bytes().split(b"\0") if b"=" in item)
        except (OSError, ValueError):
            continue
        home = env.get(b"VTRAIN_HOME", b"").decode()
        # a test that lost its VTRAIN_HOME starts one in the user's own folder
        started_by_tests = home.startswith(base) or not home and b"PYTEST_VERSION" in env
        if argv[1:3] == [b"-m", b"jupyter_ext.service"] and started_by_tests:
            print(f"\n[tests] a local service was left running in {home or 'the default data folder'} "
                  f"(pid {entry.name}): stopped", file=sys.stderr)
            os.kill(int(entry.name), signal.SIGTERM)


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One workbench home, and so one local service, for a whole test module (a module
    uses it by overriding `_workbench_home`); the service is stopped afterwards."""
    from jupyter_ext.service import daemon

    path = tmp_path_factory.mktemp("module-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VTRAIN_HOME", str(path))
        yield path
        daemon.stop()


@pytest.fixture(scope="module")
def service(module_home: Path) -> Iterator[dict]:
    """The module's local service, with the real Vertex AI SDK pointed at it (its global config is
    reset afterwards, so later modules do not inherit this service as their default)."""
    from google.cloud.aiplatform import initializer

    from jupyter_ext.service import daemon

    info = daemon.ensure_running()
    point_sdk_at(info, project="local", location="us-central1", api_transport="rest",
                 staging_bucket="gs://local-bucket")
    yield info
    initializer.global_config.__init__()


@pytest.fixture(scope="session")
def ipython() -> Any:
    """The test session's IPython shell with the workbench loaded (IPython makes one per process)."""
    from IPython.testing.globalipapp import get_ipython, start_ipython

    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "jupyter_ext")
    return shell


@pytest.fixture
def fast_sdk_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK waits 5 s between polls of a running job; tests need not."""
    from google.cloud.aiplatform import jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)


def pool(replicas: int | str = 1, *, machine: str = "n1-standard-4", accelerator: str | int | None = None,
         accelerator_count: int | str | None = None, topology: str | None = None, image: str | None = None,
         trainer: str | None = None, code: str | None = None, command: Sequence[str] | None = None,
         args: Sequence[str] = (), env: dict[str, str] | None = None, form: Literal["rest", "sdk"] = "rest",
         **fields: Any) -> dict:
    """One worker pool, as a REST body holds it (`form="sdk"`: the snake_case keys that
    `aiplatform.CustomJob(worker_pool_specs=...)` takes).

    What a replica runs is at most one of: `trainer`, a script in tests/trainers run on this host;
    `code`, run with `python -c`; or `command`. The image defaults to LOCAL_IMAGE for a pool run on
    this host and SPEC_IMAGE otherwise. `fields` are set on the pool last, replacing its own (a field
    given as None is left out: `containerSpec=None, pythonPackageSpec=...` makes a package pool).
    """
    if sum(x is not None for x in (trainer, code, command)) > 1:
        raise TypeError("pool(): give at most one of trainer, code and command")
    if trainer is not None:
        command = [sys.executable, str(TRAINERS / trainer)]  # absolute: replicas start in the job's folder
    elif code is not None:
        command = [sys.executable, "-c", code]
    machine_spec: dict[str, Any] = {"machineType": machine}
    for key, value in (("acceleratorType", accelerator), ("acceleratorCount", accelerator_count),
                       ("tpuTopology", topology)):
        if value is not None:
            machine_spec[key] = value
    container: dict[str, Any] = {"imageUri": image or (LOCAL_IMAGE if command else SPEC_IMAGE)}
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    if env:
        container["env"] = [{"name": name, "value": value} for name, value in env.items()]
    body = {"machineSpec": machine_spec, "replicaCount": replicas, "containerSpec": container}
    body = {key: value for key, value in {**body, **fields}.items() if value is not None}
    return _snake_case(body) if form == "sdk" else body


def _snake_case(value: Any) -> Any:
    """The same body with snake_case keys, as the Vertex AI SDK's proto-plus types take it."""
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): _snake_case(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_snake_case(item) for item in value]
    return value


def legacy_job(job_id: str = "census", image: str = SPEC_IMAGE, **training_input: Any) -> Any:
    """A legacy AI Platform job (`trainingInput`): the CUSTOM tier, a `standard` master running `image`."""
    from jupyter_ext.spec import JobSpec

    base = {"scaleTier": "CUSTOM", "masterType": "standard", "masterConfig": {"imageUri": image},
            "workerType": "standard", "parameterServerType": "standard", "evaluatorType": "standard"}
    return JobSpec.from_dict({"jobId": job_id, "trainingInput": {**base, **training_input}})


def write_file(path: Path, data: Any) -> Path:
    """A job file as a user writes one: JSON for a .json path, YAML otherwise."""
    path.write_text(json.dumps(data) if path.suffix == ".json" else yaml.safe_dump(data))
    return path


def write_spec(path: Path, pools: list[dict], **spec: object) -> Path:
    """A gcloud `--config` file (a CustomJobSpec) with these pools."""
    return write_file(path, {"workerPoolSpecs": pools, **spec})


def job_status(job_dir: Path) -> dict:
    """The runner's status.json of a job: its state, times and every replica's exit code and address."""
    return json.loads((job_dir / "status.json").read_text())


def log_lines(job_dir: Path, task: str) -> list[tuple[str, str, str]]:
    """A replica's log file as the runner writes it: (timestamp, stream, text) for each line."""
    # split on "\n" alone: a line may hold "\r" (progress bars), which read_text() would turn into line ends
    lines = (job_dir / "logs" / f"{task}.log").read_bytes().decode().split("\n")[:-1]
    return [tuple(line.split(" ", 2)) for line in lines]  # type: ignore[misc]


def cli_log_lines(stdout: str) -> dict[str, list[str]]:
    """What `vtrain logs` printed, by replica: `HH:MM:SS.mmm [TASK] TEXT` rows."""
    lines: dict[str, list[str]] = {}
    for row in stdout.splitlines():
        if m := re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} \[(workerpool\d-\d)\] (.*)", row):
            lines.setdefault(m[1], []).append(m[2])
    return lines


def job_id(resource_name: str) -> str:
    """The job's ID, the last part of its resource name (projects/*/locations/*/customJobs/ID)."""
    return resource_name.rsplit("/", 1)[1]


def wait_for(condition: Callable[[], T], timeout: float, what: str | Callable[[], str], poll: float = 0.1) -> T:
    """Poll `condition` until it returns something true, and return that; at the deadline fail the
    test, naming `what` (a text, or a function that describes what was seen then)."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() >= deadline:
            pytest.fail(f"waited {timeout:g} s for {what if isinstance(what, str) else what()}")
        time.sleep(poll)
    return result


async def async_wait_for(condition: Callable[[], T], timeout: float, what: str, poll: float = 0.1) -> T:
    """`wait_for` for a coroutine test: it sleeps without blocking the event loop (and the server on it)."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() >= deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        await asyncio.sleep(poll)
    return result


def wait_state(job: Any, state: str, timeout: float = 60) -> None:
    """Wait until a job is in `state`: an SDK job (its `state` an enum) or a launch handle (a name)."""
    def current() -> str:
        return getattr(job.state, "name", job.state)

    wait_for(lambda: current() == state, timeout, lambda: f"{state}; the job is still {current()}", poll=0.2)


def point_sdk_at(info: dict, **settings: Any) -> None:
    """Point the Vertex AI SDK at a local service (its token is read again: a new service has a new one)."""
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    from jupyter_ext.service import daemon

    aiplatform.init(api_endpoint=info["endpoint"], credentials=Credentials(token=daemon.read_token()), **settings)


def kill_service(service: dict) -> None:
    """Crash the local service (SIGKILL: it cannot clean up) and wait until it is gone."""
    from jupyter_ext.service import daemon

    os.kill(service["pid"], signal.SIGKILL)
    wait_for(lambda: (daemon.status() or {}).get("pid") != service["pid"], 10, "the killed service to be gone")


def restart_service(service: dict) -> None:
    """Start the local service again after a test stopped or killed it: `service` and the SDK follow
    the new one, so the module's later tests do not depend on this one."""
    from jupyter_ext.service import daemon

    service.update(daemon.ensure_running())
    point_sdk_at(service)



def relayed_service() -> str:
    """The running local service behind a TCP relay on a port of its own (`http://127.0.0.1:PORT`): to the
    workbench a Vertex AI endpoint that is not the local service, so its log readers take Google's pace
    (and have a read quota of their own, as another endpoint has), answered by the local service."""
    from jupyter_ext.service import daemon

    return _relay(daemon.status()["endpoint"])


@functools.cache
def _relay(endpoint: str) -> str:
    from urllib.parse import urlsplit

    service = urlsplit(endpoint)

    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with socket.create_connection((service.hostname, service.port)) as upstream:
                pipes = [threading.Thread(target=_pipe, args=pair, daemon=True)
                         for pair in ((self.request, upstream), (upstream, self.request))]
                for pipe in pipes:
                    pipe.start()
                for pipe in pipes:
                    pipe.join()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="relay", daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def vtrain(*args: str, timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI as a user would."""
    return subprocess.run([sys.executable, "-m", "jupyter_ext.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **kwargs.pop("env", {})}, **kwargs)  # type: ignore[arg-type]


def vtrain_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process (fast; no new interpreter): its exit code, stdout and stderr."""
    from jupyter_ext import cli

    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def processes_of_job(job_id: str) -> list[int]:
    """Every process on this machine whose environment names the job (replicas and what they started)."""
    from jupyter_ext.runner.reaper import processes_with

    return processes_with(f"CLOUD_ML_JOB_ID={job_id}".encode())


def recorded_requests() -> list[dict]:
    """What a local service started with `record_requests` was asked, in order (method, path, body, ...)."""
    from jupyter_ext.service import daemon

    path = daemon.runtime_dir() / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def created_jobs(since: int = 0) -> list[tuple[str, dict]]:
    """(path, body) of every CustomJob and HyperparameterTuningJob the service was asked to create,
    after its first `since` requests: the requests Vertex AI would get."""
    return [(r["path"], json.loads(r["body"])) for r in recorded_requests()[since:]
            if r["method"] == "POST" and r["path"].endswith(("/customJobs", "/hyperparameterTuningJobs"))]


async def follow_like_the_panel(jp_fetch: Any, job_id: str) -> dict[str, list[str]]:
    """What the panel's job view does: GET logs with the server's cursor until `done`, as often as the
    server says (`next_poll_ms`)."""
    lines: dict[str, list[str]] = defaultdict(list)
    cursor = ""
    while True:
        response = await jp_fetch("vertex-train", "jobs", job_id, "logs", params={"cursor": cursor})
        page = json.loads(response.body)
        for entry in page["entries"]:
            lines[entry["replica"]].append(entry["text"])
        cursor = page["next_cursor"]
        if page["done"]:
            return dict(lines)
        await asyncio.sleep(page["next_poll_ms"] / 1000)
