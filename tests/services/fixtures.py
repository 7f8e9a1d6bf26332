"""pytest fixtures for the test services: the Docker services (docker_services.py) and
the Cloud Storage emulator (gcs_emulator.py).

Load with `pytest_plugins = ("services.fixtures",)` in a test module (or in
tests/conftest.py). Fixtures:

- `docker_services` (session): Services(engine_url, registry, base_image). Under
  CI=true a failure to start them fails the test run; elsewhere the tests that
  need them skip with a one-line reason.
- `docker_env`: the same, with DOCKER_HOST set for the code under test.
- `docker_api`: a low-level `docker.APIClient` on the test engine, for asserting
  with the engine's own API.
- `gcs_emulator` (session): Emulator(url), with `env()` and `create_bucket()`;
  the same CI rule.
- `gcs`: the emulator for one test: STORAGE_EMULATOR_HOST set, a real
  `google.cloud.storage.Client` (anonymous, project "test") and a fresh bucket of
  its own, deleted with its objects afterwards.

The session registers itself as a user of each service it uses and, at its end,
stops what a test session started once no other session uses it
(VTRAIN_KEEP_SERVICES=1 keeps them running for the next session;
`python tests/services/docker_services.py down` and `.../gcs_emulator.py down`
stop them).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from . import docker_services as docker_svc
from . import gcs_emulator as gcs_svc

if TYPE_CHECKING:
    from google.cloud import storage

T = TypeVar("T")
_started: dict[str, Any] = {}  # service name -> what its acquire() returned, once per process
_errors: dict[str, str] = {}  # service name -> why it could not start


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _log(message: str) -> None:
    print(f"[test services] {message}", file=sys.stderr, flush=True)


def _start(name: str, label: str, acquire: Callable[..., T]) -> T:
    """Start a service (once per process) or fail/skip with the reason why not."""
    if name not in _started and name not in _errors:
        try:
            _started[name] = acquire(log=_log)
        except docker_svc.ServiceError as exc:
            _errors[name] = str(exc)
        # A broken service answers with API errors: same outcome, keep the reason.
        except Exception as exc:  # noqa: BLE001
            _errors[name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if name in _errors:
        message = f"{label} unavailable: {_errors[name]}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return _started[name]


@pytest.fixture(scope="session")
def docker_services() -> Iterator[docker_svc.Services]:
    services = _start("docker", "Docker test services", docker_svc.acquire)
    yield services
    if _started.pop("docker", None) is not None:
        stopped = docker_svc.release()
        if stopped:
            print(f"\n[test services] stopped {', '.join(stopped)}", file=sys.stderr)


@pytest.fixture
def docker_env(docker_services: docker_svc.Services, monkeypatch: pytest.MonkeyPatch) -> docker_svc.Services:
    monkeypatch.setenv("DOCKER_HOST", docker_services.engine_url)
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    return docker_services


@pytest.fixture
def docker_api(docker_services: docker_svc.Services) -> Iterator[Any]:
    import docker

    client = docker.APIClient(base_url=docker_services.engine_url, version="auto", timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[gcs_svc.Emulator]:
    emulator = _start("gcs", "Cloud Storage emulator", gcs_svc.acquire)
    yield emulator
    if _started.pop("gcs", None) is not None and gcs_svc.release():
        print("\n[test services] stopped fake-gcs-server", file=sys.stderr)


@dataclass
class Gcs:
    """One test's view of the emulator: a real client and a bucket nobody else uses."""

    client: storage.Client
    bucket: storage.Bucket

    def uri(self, path: str = "") -> str:
        return f"gs://{self.bucket.name}/{path}"


@pytest.fixture
def gcs(gcs_emulator: gcs_svc.Emulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gcs]:
    from google.api_core.exceptions import NotFound
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    for name, value in gcs_emulator.env().items():
        monkeypatch.setenv(name, value)
    client = storage.Client(project="test", credentials=AnonymousCredentials())
    bucket = client.bucket(gcs_emulator.create_bucket())
    yield Gcs(client, bucket)
    with contextlib.suppress(NotFound):  # the test may have deleted it
        for blob in client.list_blobs(bucket):
            blob.delete()
        bucket.delete()
    client.close()
