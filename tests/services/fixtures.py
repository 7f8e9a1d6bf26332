"""pytest fixtures for the Docker test services (see docker_services.py).

Load with `pytest_plugins = ("services.fixtures",)` in a test module (or in
tests/conftest.py). Fixtures:

- `docker_services` (session): Services(engine_url, registry, base_image). Under
  CI=true a failure to start them fails the test run; elsewhere the tests that
  need them skip with a one-line reason.
- `docker_env`: the same, with DOCKER_HOST set for the code under test.
- `docker_api`: a low-level `docker.APIClient` on the test engine, for asserting
  with the engine's own API.

The session registers itself as a user of the services and, at its end, stops
what a test session started once no other session uses it (VTRAIN_KEEP_SERVICES=1
keeps them running for the next session; `python tests/services/docker_services.py down`
stops them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from . import docker_services as svc

_state: dict[str, Any] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _start() -> svc.Services:
    """Start (once per process) or report why not."""
    if "services" not in _state and "error" not in _state:
        try:
            _state["services"] = svc.acquire(
                log=lambda m: print(f"[test services] {m}", file=sys.stderr, flush=True))
        except svc.ServiceError as exc:
            _state["error"] = str(exc)
        except Exception as exc:  # noqa: BLE001  (a broken engine answers with API errors: same outcome, keep the reason)
            _state["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if "error" in _state:
        message = f"Docker test services unavailable: {_state['error']}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return _state["services"]


@pytest.fixture(scope="session")
def docker_services() -> Iterator[svc.Services]:
    services = _start()
    yield services
    if _state.pop("services", None) is not None:
        stopped = svc.release()
        if stopped:
            print(f"\n[test services] stopped {', '.join(stopped)}", file=sys.stderr)


@pytest.fixture
def docker_env(docker_services: svc.Services, monkeypatch: pytest.MonkeyPatch) -> svc.Services:
    monkeypatch.setenv("DOCKER_HOST", docker_services.engine_url)
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    return docker_services


@pytest.fixture
def docker_api(docker_services: svc.Services) -> Iterator[Any]:
    import docker

    client = docker.APIClient(base_url=docker_services.engine_url, version="auto", timeout=120)
    yield client
    client.close()
