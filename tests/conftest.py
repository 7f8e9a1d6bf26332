from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

pytest_plugins = ("services.fixtures",)

ROOT = Path(__file__).resolve().parent.parent
TRAINERS = ROOT / "tests" / "trainers"


@pytest.fixture(autouse=True)
def _workbench_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own workbench data folder."""
    home = tmp_path_factory.mktemp("vtrain-home")
    monkeypatch.setenv("VTRAIN_HOME", str(home))
    return home


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
def sdk_service(module_home: Path) -> Iterator[dict]:
    """The module's local service, with the real Vertex AI SDK pointed at it (its global config is
    reset afterwards, so later modules do not inherit this service as their default)."""
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer
    from google.oauth2.credentials import Credentials

    from jupyter_ext.service import daemon

    info = daemon.ensure_running()
    aiplatform.init(project="local", location="us-central1", api_endpoint=info["endpoint"], api_transport="rest",
                    credentials=Credentials(token=daemon.read_token()), staging_bucket="gs://local-bucket")
    yield info
    initializer.global_config.__init__()


@pytest.fixture
def fast_sdk_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK waits 5 s between polls of a running job; tests need not."""
    from google.cloud.aiplatform import jobs

    monkeypatch.setattr(jobs, "_JOB_WAIT_TIME", 0.2)


def pool(script: str, count: int = 1, *args: str, machine: str = "n1-standard-4") -> dict:
    """A pool whose replicas run tests/trainers/<script> on this host."""
    return {"machineSpec": {"machineType": machine}, "replicaCount": count,
            "containerSpec": {"imageUri": "local/test-trainer",
                              "command": ["python", str(TRAINERS / script)], "args": list(args)}}


def write_spec(path: Path, pools: list[dict], **spec: object) -> Path:
    path.write_text(yaml.safe_dump({"workerPoolSpecs": pools, **spec}))
    return path


def vtrain(*args: str, timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI as a user would."""
    return subprocess.run([sys.executable, "-m", "jupyter_ext.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **kwargs.pop("env", {})}, **kwargs)  # type: ignore[arg-type]


def processes_of_job(job_id: str) -> list[int]:
    """Every process on this machine whose environment names the job (replicas and what they started)."""
    from jupyter_ext.runner.process import processes_with

    return processes_with(f"CLOUD_ML_JOB_ID={job_id}".encode())
