"""The Cloud Storage emulator behind the `gcs` fixture: a real stand-in for what the
workbench does with google-cloud-storage, and started and stopped like the Docker
test services."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from google.api_core.exceptions import NotFound
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.cloud.storage import blob as blob_module
from services import gcs_emulator as gcs_svc
from services.docker_services import ServiceError
from services.fixtures import Gcs


def test_small_and_large_uploads_round_trip(gcs: Gcs, tmp_path: Path) -> None:
    gcs.bucket.blob("small.txt").upload_from_string(b"hello")  # multipart
    large = tmp_path / "large.bin"
    large.write_bytes(os.urandom(10 * 1024 * 1024))
    # Above this size the library switches to a resumable upload session.
    assert large.stat().st_size > blob_module._MAX_MULTIPART_SIZE
    gcs.bucket.blob("large.bin").upload_from_filename(large)

    assert gcs.bucket.blob("small.txt").download_as_bytes() == b"hello"
    copy = tmp_path / "copy.bin"
    gcs.bucket.get_blob("large.bin").download_to_filename(copy)
    assert copy.read_bytes() == large.read_bytes()


def test_chunked_resumable_upload(gcs: Gcs) -> None:
    data = os.urandom(3 * 256 * 1024 + 7)
    blob = gcs.bucket.blob("chunked.bin", chunk_size=256 * 1024)  # several requests in one session
    blob.upload_from_string(data)
    assert gcs.bucket.blob("chunked.bin").download_as_bytes() == data


def test_list_by_prefix(gcs: Gcs) -> None:
    for name in ("runs/a/model.txt", "runs/a/log.txt", "runs/b/model.txt", "other.txt"):
        gcs.bucket.blob(name).upload_from_string(name)
    assert sorted(b.name for b in gcs.client.list_blobs(gcs.bucket, prefix="runs/a/")) == [
        "runs/a/log.txt", "runs/a/model.txt"]
    listing = gcs.client.list_blobs(gcs.bucket, prefix="runs/", delimiter="/")
    assert list(listing) == [] and listing.prefixes == {"runs/a/", "runs/b/"}


def test_missing_bucket_is_not_found(gcs: Gcs) -> None:
    with pytest.raises(NotFound):
        gcs.client.get_bucket("no-such-bucket-vtrain")
    with pytest.raises(NotFound):
        gcs.client.bucket("no-such-bucket-vtrain").blob("x").upload_from_string(b"x")


@pytest.mark.parametrize("round", [1, 2])
def test_each_test_gets_an_empty_bucket_of_its_own(gcs: Gcs, round: int) -> None:
    assert list(gcs.client.list_blobs(gcs.bucket)) == []
    gcs.bucket.blob("left-behind.txt").upload_from_string(str(round))


def test_the_sdk_upload_helper_stages_into_the_bucket(gcs: Gcs, tmp_path: Path) -> None:
    from google.cloud.aiplatform import utils

    local = tmp_path / "trainer-0.1.tar.gz"
    local.write_bytes(b"sdist bytes")
    # The SDK makes its own client: it finds the emulator through STORAGE_EMULATOR_HOST.
    uri = utils._timestamped_copy_to_gcs(str(local), gcs.uri("staging"), project="test",
                                         credentials=AnonymousCredentials())
    prefix = gcs.uri("staging/aiplatform-")
    assert uri.startswith(prefix) and uri.endswith("-trainer-0.1.tar.gz")
    assert gcs.bucket.blob(uri.removeprefix(gcs.uri())).download_as_bytes() == b"sdist bytes"


def test_a_bucket_made_by_the_emulator_helper_is_usable(gcs_emulator: gcs_svc.Emulator,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in gcs_emulator.env().items():
        monkeypatch.setenv(name, value)
    name = gcs_emulator.create_bucket(prefix="staging")
    client = storage.Client(project="test", credentials=AnonymousCredentials())
    client.bucket(name).blob("x").upload_from_string(b"x")
    assert [b.name for b in client.list_blobs(name)] == ["x"]
    client.bucket(name).delete(force=True)


# ---- starting and stopping (in a services folder of their own) -------------------------

@pytest.fixture
def own_services_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VTRAIN_SERVICES_DIR", str(tmp_path / "services"))
    monkeypatch.delenv("VTRAIN_KEEP_SERVICES", raising=False)
    return tmp_path / "services"


def _emulator_pid() -> int | None:
    return gcs_svc.status()["pid"]  # type: ignore[return-value]


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"


def test_a_session_stops_the_emulator_it_started(own_services_dir: Path) -> None:
    first = gcs_svc.acquire()
    pid = _emulator_pid()
    assert first.started and pid is not None and gcs_svc.status()["answers"]
    again = gcs_svc.up("session")
    assert (again.url, again.started, _emulator_pid()) == (first.url, False, pid)  # reused

    assert gcs_svc.release() is True
    assert _gone(pid) and gcs_svc.status()["pid"] is None


def test_down_stops_a_manual_emulator_that_release_keeps(own_services_dir: Path) -> None:
    gcs_svc.up("manual")
    pid = _emulator_pid()
    assert pid is not None
    assert gcs_svc.release() is False and not _gone(pid)
    assert gcs_svc.down() is True
    assert _gone(pid)


def test_a_recorded_pid_that_is_not_the_emulator_is_left_alone(own_services_dir: Path) -> None:
    other = subprocess.Popen(["sleep", "60"])
    try:
        gcs_svc.folder().mkdir(parents=True)
        (gcs_svc.folder() / "emulator.json").write_text(
            f'{{"pid": {other.pid}, "url": "http://127.0.0.1:9", "command": ["fake-gcs-server"], "owner": "session"}}')
        assert gcs_svc.down() is False
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_missing_platform_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcs_svc.platform, "machine", lambda: "sparc64")
    with pytest.raises(ServiceError, match="no binary for .*/sparc64"):
        gcs_svc.binary()
