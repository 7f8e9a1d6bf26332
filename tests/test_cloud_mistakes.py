"""Mistakes on the way to Vertex AI, each one line naming what to fix: never a traceback, a hang or
the secret in a token file. A token file that holds no token, or a token the endpoint refuses; an
endpoint that does not answer, or a service of this machine written without `http://`; Cloud Storage
that does not answer; a project that cannot be in a resource name; and the local service named by
another of this machine's host names. Through the real CLI and magics, against the local service
standing in for Vertex AI's endpoint (README, "Where jobs run")."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from IPython.core.error import UsageError

from conftest import pool, vtrain, vtrain_in_process, wait_for, write_spec
from jupyter_ext.launch import Session, Target
from jupyter_ext.launch.logs import ReadPace
from jupyter_ext.launch.target import ENDPOINT_VARIABLE, TOKEN_VARIABLE
from jupyter_ext.service import daemon

PLACE_VARIABLES = ("GOOGLE_CLOUD_PROJECT", "CLOUD_ML_REGION", ENDPOINT_VARIABLE, TOKEN_VARIABLE)
UNREACHABLE = "http://127.0.0.1:1"  # only root may listen on port 1, and nothing does
REFUSED = f"cannot reach the API endpoint {UNREACHABLE}: connection refused"
IMAGE = "us-docker.pkg.dev/p/r/trainer:1"
CELL = "print('never run')\n"
SECRET = "ya29.SECRET1"


@pytest.fixture(scope="module")
def stand_in(module_home: Path) -> dict[str, Any]:
    """The local service, here only as Vertex AI's endpoint (flags name it; aiplatform.init does not)."""
    return daemon.ensure_running()


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The module's data folder; nothing set by aiplatform.init or the environment but what a test sets."""
    from google.cloud.aiplatform import initializer

    for name in PLACE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    initializer.global_config.__init__()
    yield module_home
    initializer.global_config.__init__()


@pytest.fixture
def token(tmp_path: Path) -> str:
    """A token file the endpoint is never asked about (where nothing answers)."""
    path = tmp_path / "token"
    path.write_text("ya29.a-token\n")
    return str(path)


def _job(tmp_path: Path, image: str = IMAGE) -> str:
    return str(write_spec(tmp_path / "job.yaml", [pool(1, command=["python", "-c", "print('ran')"], image=image)]))


def _init(**settings: Any) -> None:
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    aiplatform.init(**{"credentials": Credentials(token="ya29.a-token"), **settings})


# ---- a token file that holds no token -------------------------------------------------------

NOT_TOKENS = {  # what the file holds: how the one line describes it
    "two-lines": (f"{SECRET}\nSECRET2\n".encode(), "holds more than one word or line"),
    "a-space": (f"{SECRET} SECRET2".encode(), "holds more than one word or line"),
    "binary": (b"\xa3SECRET\x00\x01\xff", "holds characters an access token cannot (control characters or "
                                          "non-ASCII)"),
}
HINT = "an access token is one line (gcloud auth print-access-token > FILE)"


@pytest.mark.parametrize("kind", NOT_TOKENS)
def test_a_token_file_that_holds_no_token_is_one_line_naming_the_flag_and_never_the_token(
        capsys: pytest.CaptureFixture[str], ipython: Any, tmp_path: Path, kind: str) -> None:
    content, problem = NOT_TOKENS[kind]
    path = tmp_path / "two.tok"
    path.write_bytes(content)
    line = f"--access-token-file: {path} {problem}; {HINT}"
    at = ["--project", "P1", "--endpoint", UNREACHABLE, "--access-token-file", str(path)]
    for command in (["submit", _job(tmp_path), *at], ["jobs", *at]):
        code, out, err = vtrain_in_process(capsys, *command)
        assert (code, err.splitlines()) == (2, [f"vtrain: error: {line}"])
        assert "SECRET" not in out + err
    with pytest.raises(UsageError) as refused:
        ipython.run_cell_magic("vertex_train", " ".join(at), CELL)
    assert str(refused.value) == line


def test_gclouds_token_variable_is_named_when_its_file_holds_no_token(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "two.tok"
    path.write_bytes(NOT_TOKENS["two-lines"][0])
    monkeypatch.setenv(TOKEN_VARIABLE, str(path))
    code, out, err = vtrain_in_process(capsys, "jobs", "--project", "P1", "--endpoint", UNREACHABLE)
    assert (code, err.splitlines()) == (2, [f"vtrain: error: ${TOKEN_VARIABLE}: {path} holds more than one word "
                                            f"or line; {HINT}"])
    assert "SECRET" not in out + err


def test_a_token_file_without_end_is_read_no_further_than_a_token_could_be() -> None:
    # in a process of its own: one that reads on fills the memory until it is killed
    done = vtrain("jobs", "--project", "P1", "--endpoint", UNREACHABLE, "--access-token-file", "/dev/zero", timeout=60)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"vtrain: error: --access-token-file: /dev/zero is larger than 16 KiB; {HINT}"])


# ---- a token the endpoint refuses -----------------------------------------------------------

def test_a_token_the_endpoint_refuses_is_said_so_naming_its_file(capsys: pytest.CaptureFixture[str], ipython: Any,
                                                                 stand_in: dict[str, Any], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "stale.tok"
    path.write_text(SECRET)
    refused = (f"Google Cloud credentials: the API endpoint refused the access token of {{}} {path} (HTTP 401: "
               f"expired, revoked or not a token); write a new one: gcloud auth print-access-token > {path}")
    at = ["--project", "p", "--endpoint", stand_in["endpoint"]]
    code, out, err = vtrain_in_process(capsys, "jobs", *at, "--access-token-file", str(path))
    assert (code, err.splitlines()) == (2, ["vtrain: error: " + refused.format("--access-token-file")])
    with pytest.raises(UsageError) as in_the_magic:
        ipython.run_line_magic("vertex_jobs", " ".join([*at, "--access-token-file", str(path)]))
    assert str(in_the_magic.value) == refused.format("--access-token-file")
    monkeypatch.setenv(TOKEN_VARIABLE, str(path))
    code, out, err = vtrain_in_process(capsys, "jobs", *at)
    assert (code, err.splitlines()) == (2, ["vtrain: error: " + refused.format(f"${TOKEN_VARIABLE}")])
    assert "SECRET" not in out + err


# ---- an endpoint that does not answer -------------------------------------------------------

@pytest.mark.parametrize("command", ["submit", "jobs", "logs"])
def test_an_endpoint_that_does_not_answer_is_one_line_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                token: str, command: str) -> None:
    what = {"submit": [_job(tmp_path)], "jobs": [], "logs": ["1234567890"]}[command]
    code, _, err = vtrain_in_process(capsys, command, *what, "--project", "p", "--endpoint", UNREACHABLE,
                                     "--access-token-file", token)
    assert (code, err.splitlines()) == (2, [f"vtrain: error: {REFUSED}"])


def test_the_magic_says_the_same_of_aiplatform_inits_endpoint(ipython: Any, gcs: Any) -> None:
    _init(project="p", api_endpoint=UNREACHABLE)
    with pytest.raises(UsageError, match=f"^{REFUSED}$"):
        ipython.run_line_magic("vertex_jobs", "--vertex")
    with pytest.raises(UsageError, match=f"^{REFUSED}$"):  # after the package went to the bucket
        ipython.run_cell_magic("vertex_train", f"--vertex --staging-bucket gs://{gcs.bucket.name}", CELL)
    assert [blob.name.rsplit("/", 1)[1] for blob in gcs.client.list_blobs(gcs.bucket)] == ["trainer-0.1.tar.gz"]


# ---- a service of this machine written without http:// ------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_service_of_this_machine_without_a_scheme_is_refused_at_once(ipython: Any, stand_in: dict[str, Any],
                                                                       host: str) -> None:
    """Without a scheme the clients speak HTTPS, which the local service never answers."""
    port = stand_in["endpoint"].rsplit(":", 1)[1]
    written = f"{host}:{port}"
    advice = (f"{written!r} has no scheme, so the clients would speak HTTPS to it; a service on this machine such "
              f"as the local one is http://{written}")
    done = vtrain("jobs", "--project", "p", "--endpoint", written, "--access-token-file", stand_in["token_file"],
                  timeout=60)
    assert (done.returncode, done.stderr.splitlines()) == (2, [f"vtrain: error: --endpoint: {advice}"])
    _init(project="p", api_endpoint=written)
    with pytest.raises(UsageError, match=f"^aiplatform.init\\(api_endpoint=...\\): {advice}$"):
        ipython.run_line_magic("vertex_jobs", "--vertex")


@pytest.fixture
def impatient_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A local service of its own that closes a connection without a complete request after 1 s."""
    monkeypatch.setenv("VTRAIN_HOME", str(tmp_path / "home"))
    process = subprocess.Popen([sys.executable, "-m", "jupyter_ext.service", "--idle-timeout", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        yield wait_for(lambda: process.poll() is None and daemon.status(), 30,
                       lambda: f"the service to start ({process.poll()=})")
    finally:
        process.terminate()
        process.wait(30)


def test_the_service_closes_a_connection_that_never_sends_a_request(impatient_service: dict[str, Any],
                                                                    tmp_path: Path) -> None:
    """As a client speaking TLS to it does: even `https://` written on purpose ends, in one line."""
    port = int(impatient_service["endpoint"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a TLS ClientHello begins
        assert connection.recv(1) == b""  # closed (after 30 s recv raises instead)
    https = f"https://127.0.0.1:{port}"
    done = vtrain("jobs", "--project", "p", "--endpoint", https, "--access-token-file",
                  impatient_service["token_file"], timeout=60)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"vtrain: error: cannot reach the API endpoint {https}: the TLS handshake failed (is it a plain http:// "
        "service?)"])


# ---- Cloud Storage that does not answer -------------------------------------------------------

def test_cloud_storage_that_does_not_answer_is_one_line_naming_the_bucket_soon(tmp_path: Path, token: str) -> None:
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("print('never run')\n")
    spec = write_spec(tmp_path / "package.yaml", [pool(1, containerSpec=None, pythonPackageSpec={
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
        "packageUris": ["trainer"], "pythonModule": "trainer.task"})])
    started = time.monotonic()
    done = vtrain("submit", str(spec), "--project", "p", "--endpoint", UNREACHABLE, "--access-token-file", token,
                  "--staging-bucket", "gs://bkt", env={"STORAGE_EMULATOR_HOST": UNREACHABLE}, timeout=60)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"vtrain: error: --staging-bucket gs://bkt: cannot reach Cloud Storage at {UNREACHABLE}: connection refused"])
    assert time.monotonic() - started < 30  # the client library's own retries would take two minutes


# ---- a project that cannot be in a resource name --------------------------------------------

@pytest.mark.parametrize("project", ["a/b", "p?x", "P#1", "p%2F", "my project", "p\x01"])
def test_a_project_that_cannot_be_in_a_resource_name_is_one_line_naming_where_it_came_from(
        capsys: pytest.CaptureFixture[str], ipython: Any, token: str, project: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem = (f"{project!r} is not a Google Cloud project ID or number (letters, digits, '-', e.g. my-project or "
               "123456789012)")
    at = ["--endpoint", UNREACHABLE, "--access-token-file", token]
    code, _, err = vtrain_in_process(capsys, "jobs", "--project", project, *at)
    assert (code, err.splitlines()) == (2, [f"vtrain: error: --project: {problem}"])
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", project)
    code, _, err = vtrain_in_process(capsys, "jobs", "--vertex", *at)
    assert (code, err.splitlines()) == (2, [f"vtrain: error: $GOOGLE_CLOUD_PROJECT: {problem}"])
    _init(project=project, api_endpoint=UNREACHABLE)
    with pytest.raises(UsageError) as refused:
        ipython.run_line_magic("vertex_jobs", "--vertex")
    assert str(refused.value) == f"aiplatform.init(project=...): {problem}"


@pytest.mark.parametrize("project", ["p", "P1", "my-project", "example.com:my-project", "123456789012"])
def test_project_ids_numbers_and_domain_scoped_ids_pass(project: str) -> None:
    assert Target.resolve(project=project).parent == f"projects/{project}/locations/us-central1"


# ---- the local service under another of this machine's names ---------------------------------

def test_the_local_service_as_localhost_is_the_local_service(capsys: pytest.CaptureFixture[str],
                                                             stand_in: dict[str, Any], tmp_path: Path) -> None:
    """Its registry on 127.0.0.1 is allowed, and its logs are followed at its pace, not Google's."""
    endpoint = stand_in["endpoint"].replace("127.0.0.1", "localhost")
    at = ["--project", "p", "--endpoint", endpoint, "--access-token-file", stand_in["token_file"]]
    code, out, err = vtrain_in_process(capsys, "submit", _job(tmp_path, image="127.0.0.1:5000/trainer:1"), *at)
    assert code == 0, err
    assert out.startswith("submitted projects/p/locations/us-central1/customJobs/")
    session = Session.of(Target.resolve(project="p", endpoint=endpoint, access_token_file=stand_in["token_file"]))
    assert session.local_service() == daemon.status()
    assert ReadPace.of(session) == ReadPace.of(Session.of(Target()))  # the local service's own pace
