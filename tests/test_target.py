"""Where jobs go (README, "Where jobs run"): the order of defaults over `Target.resolve`, one rule
for the CLI, the magics and the lab panel, and where a Vertex AI target's logs are read. The real
SDK's `aiplatform.init` and the real logging client; nothing is sent (end to end: test_cloud_init)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from IPython.core.error import UsageError

from conftest import ROOT, vtrain_in_process
from jupyter_ext import cli
from jupyter_ext.magics import parse_flags
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.handlers import VertexTrain
from jupyter_ext.launch import Session, Target
from jupyter_ext.launch.target import ENDPOINT_VARIABLE

PLACE_VARIABLES = ("GOOGLE_CLOUD_PROJECT", "CLOUD_ML_REGION", ENDPOINT_VARIABLE, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE")
EXAMPLE = ROOT / "jupyter_ext" / "examples" / "multiworker.yaml"
CELL = "print('never run')\n"


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The real SDK, with nothing set by `aiplatform.init` and no place in the environment."""
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer

    for name in PLACE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    initializer.global_config.__init__()
    yield aiplatform
    initializer.global_config.__init__()


# field: (Target.resolve's flag, aiplatform.init's setting, environment variable or None)
NAMES = {
    "project": ("project", "project", "GOOGLE_CLOUD_PROJECT"),
    "region": ("region", "location", "CLOUD_ML_REGION"),
    "endpoint": ("endpoint", "api_endpoint", ENDPOINT_VARIABLE),
    "staging_bucket": ("staging_bucket", "staging_bucket", None),
}
# field: {layer: (what is set there, what the target then holds)}; the default layer sets nothing
LAYERS = ("flag", "init", "environment", "default")
VALUES: dict[str, dict[str, tuple[str | None, str | None]]] = {
    "project": {"flag": ("flag-project",) * 2, "init": ("init-project",) * 2, "environment": ("env-project",) * 2,
                "default": (None, None)},  # None: refused
    "region": {"flag": ("asia-east1",) * 2, "init": ("europe-west4",) * 2, "environment": ("us-east4",) * 2,
               "default": (None, "us-central1")},
    "endpoint": {"flag": ("http://127.0.0.1:8001",) * 2, "init": ("http://127.0.0.1:8002",) * 2,
                 # gcloud's property is a URL with a path; the clients take scheme and host
                 "environment": ("https://us-west1-aiplatform.googleapis.com/",
                                 "https://us-west1-aiplatform.googleapis.com"),
                 "default": (None, "")},  # "": Google's regional endpoint
    "staging_bucket": {"flag": ("gs://flag-bucket",) * 2, "init": ("gs://init-bucket",) * 2,
                       "default": (None, "")},
}
ORDER = [(field, winner) for field in VALUES for winner in LAYERS if winner in VALUES[field]]


@pytest.mark.parametrize("field, winner", ORDER, ids=[f"{f}-{w}" for f, w in ORDER])
def test_each_setting_comes_from_the_flag_else_aiplatform_init_else_the_environment(
        sdk: Any, monkeypatch: pytest.MonkeyPatch, field: str, winner: str) -> None:
    """The winning layer is set together with every layer below it, so it must beat them."""
    flag, setting, variable = NAMES[field]
    below = LAYERS[LAYERS.index(winner):]
    given = {layer: VALUES[field][layer][0] for layer in below if layer in VALUES[field]}
    if given.get("init"):
        sdk.init(**{setting: given["init"]})
    if given.get("environment") and variable:
        monkeypatch.setenv(variable, given["environment"])
    flags = {flag: given.get("flag")}
    if field != "project":
        flags.setdefault("project", "p")  # Vertex AI needs one
    expected = VALUES[field][winner][1]
    if expected is None:
        with pytest.raises(WorkbenchError, match=r"^--project: Vertex AI needs a Google Cloud project"):
            Target.resolve(vertex=True, **flags)
        return
    assert getattr(Target.resolve(vertex=True, **flags), field) == expected


def _cli(flags: str) -> Target:
    return cli._target(cli._parser().parse_args(["submit", str(EXAMPLE), *flags.split()]))


def _magic(ipython: Any, flags: str) -> Target:
    magics = ipython.magics_manager.registry["VertexTrainMagics"]
    return magics._target(parse_flags(magics.vertex_train, flags))


# (flags, environment, aiplatform.init's settings, the panel's equivalent config or None: not the
# panel's case, where the job goes: local stays local, Vertex AI completes from init and the environment)
SAME_INPUTS = [
    ("", {"GOOGLE_CLOUD_PROJECT": "env-project"}, {"project": "init-project"}, None, "local"),
    ("--region europe-west4", {"GOOGLE_CLOUD_PROJECT": "env-project"}, {}, None, "local"),
    ("--vertex", {"GOOGLE_CLOUD_PROJECT": "env-project"}, {"location": "europe-west4"}, {},
     "env-project/europe-west4"),
    ("--project p --region asia-east1", {"CLOUD_ML_REGION": "us-east4"}, {"staging_bucket": "gs://init-bucket"},
     {"project": "p", "region": "asia-east1"}, "p/asia-east1"),
    ("--vertex --region us-east4", {}, {"project": "init-project", "location": "europe-west4"},
     {"region": "us-east4"}, "init-project/us-east4"),
    ("--staging-bucket gs://b", {"CLOUD_ML_REGION": "us-east4"}, {"project": "init-project"}, None,
     "init-project/us-east4"),
]


@pytest.mark.parametrize("flags, environment, settings, panel, where", SAME_INPUTS,
                         ids=["nothing", "region-alone", "vertex", "project", "vertex-region", "staging-bucket"])
def test_the_cli_the_magic_and_the_panel_go_to_the_same_place(
        sdk: Any, ipython: Any, monkeypatch: pytest.MonkeyPatch, flags: str, environment: dict[str, str],
        settings: dict[str, str], panel: dict[str, str] | None, where: str) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    if settings:
        sdk.init(**settings)
    target = _cli(flags)
    assert ("local" if target.local else f"{target.project}/{target.region}") == where
    assert _magic(ipython, flags) == target
    if panel is not None:
        assert VertexTrain(**panel).vertex_target() == target


def test_the_cli_and_the_magic_refuse_the_same_mixes(sdk: Any, ipython: Any,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    message = "--backend docker: only for local jobs; Vertex AI runs its own machines"
    code, _, err = vtrain_in_process(capsys, "submit", str(EXAMPLE), "--project", "p", "--backend", "docker")
    assert code == 2 and err.splitlines() == [f"vtrain: error: {message}"]
    with pytest.raises(UsageError, match=f"^{message}$"):
        ipython.run_cell_magic("vertex_train", "--project p --backend docker", CELL)
    with pytest.raises(UsageError, match=r"^--local: --project, --staging-bucket would send the job to Vertex AI"):
        ipython.run_cell_magic("vertex_train", "--local --project p --staging-bucket gs://b", CELL)


@pytest.mark.parametrize("endpoint, logs", [
    ("europe-west4-aiplatform.googleapis.com", "https://logging.googleapis.com"),
    ("https://us-central1-aiplatform.googleapis.com", "https://logging.googleapis.com"),
    ("us-central1-aiplatform-myvpc.p.googleapis.com", "https://logging.googleapis.com"),  # Private Service Connect
    ("http://127.0.0.1:8123", "http://127.0.0.1:8123"),  # a service standing in for Vertex AI answers both
], ids=["regional", "regional-url", "private", "stand-in"])
def test_logs_are_read_from_cloud_logging_unless_the_endpoint_stands_in(sdk: Any, tmp_path: Path, endpoint: str,
                                                                       logs: str) -> None:
    token = tmp_path / "token"
    token.write_text("a-token")
    sdk.init(project="p", api_endpoint=endpoint)
    session = Session.of(Target.resolve(vertex=True, access_token_file=str(token)))
    url = session.logging(lambda client: client._connection.build_api_url("/entries:list"))
    assert url.startswith(f"{logs}/v2/entries:list")


def test_following_a_job_builds_each_client_once_and_probes_the_service_once(module_home: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """As a monitor does every second: the job's state and its next log lines, over one session."""
    from collections import Counter

    from google.cloud import logging as cloud_logging
    from google.cloud.aiplatform_v1 import JobServiceClient

    from conftest import pool
    from jupyter_ext import launch
    from jupyter_ext.service import daemon

    done = launch.submit({"displayName": "polled", "jobSpec": {"workerPoolSpecs": [pool(1, code="print('hi')")]}})
    assert done.wait(60) == "JOB_STATE_SUCCEEDED"
    Session._sessions.clear()  # as in a new kernel
    counts: Counter[str] = Counter()

    def counting(owner: object, name: str, key: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(owner, name, wrapper)

    counting(daemon, "status", "service probes")
    counting(JobServiceClient, "__init__", "job clients")
    counting(cloud_logging.Client, "__init__", "logging clients")
    handle = launch.attach(done.id)
    reader = handle.log_reader()
    lines = []
    for _ in range(5):
        assert handle.refresh().state.name == "JOB_STATE_SUCCEEDED"
        lines += [record.text for record in reader.poll(wait=False)]
    assert lines == ["hi"]
    assert counts == {"service probes": 1, "job clients": 1, "logging clients": 1}
