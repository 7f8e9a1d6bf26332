"""Trainer packages to and from Cloud Storage, as Vertex AI needs them for `pythonPackageSpec`.

A job for Vertex AI names its packages by `gs://` URI. `stage_packages` turns
every local package of a job (a trainer folder, an sdist, a wheel) into a file
in the staging bucket and rewrites the URI; `download` fetches a `gs://` file
back, which is how the local service runs a job whose packages are in a bucket.

Everything goes through `google-cloud-storage`, so its conventions hold: with
`STORAGE_EMULATOR_HOST` set it talks to that emulator (anonymously), otherwise
to Cloud Storage with the target's credentials (default: the user's
application-default credentials). Uploads are content-addressed
(`<bucket>/vertex-workbench/packages/<sha256 prefix>/<file>`), so staging the
same package again sends nothing.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from . import packaging, paths
from .errors import SpecError, WorkbenchError, no_answer

if TYPE_CHECKING:
    from .launch.target import Target
    from .spec import JobSpec

PREFIX = "vertex-workbench/packages"
_BUCKET = re.compile(r"[A-Za-z0-9][\w.-]*")  # loose: Cloud Storage itself says what else it refuses
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode's control characters (category Cc)
DISTRIBUTIONS = (".tar.gz", ".tgz", ".whl", ".zip")
# The first call to a bucket retries for this long at most, and waits this long for each answer: the
# library's default (120 s of retries) makes an unreachable Cloud Storage (no network, a wrong
# $STORAGE_EMULATOR_HOST) look like a hang. Once it has answered, the upload keeps the library's patience.
PROBE_SECONDS = 10.0


def split_uri(uri: str, where: str) -> tuple[str, str]:
    """(bucket, object path) of `gs://bucket/path`, the path normalised (`a/./b//../c` is `a/c`); one
    SpecError line naming `where` for anything else, for a path that climbs out of its bucket, and for
    a control character (Cloud Storage object names cannot hold CR or LF; NUL is no file name)."""
    bucket, _, path = uri[len("gs://"):].partition("/")
    if not uri.startswith("gs://") or not _BUCKET.fullmatch(bucket):
        raise SpecError(where, f"{uri!r} is not a Cloud Storage URI (gs://BUCKET/...)")
    if char := _CONTROL.search(path):
        raise SpecError(where, f"{uri!r} holds a control character ({char.group()!r}); a Cloud Storage path "
                               "cannot hold one")
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if not parts:
                raise SpecError(where, f"{uri!r} leaves its bucket ('..' climbs above gs://{bucket}/)")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return bucket, "/".join(parts)


def normalise_uri(uri: str, where: str) -> str:
    """`uri` with its object path normalised as `split_uri` does (a final `/` is kept)."""
    bucket, path = split_uri(uri, where)
    return f"gs://{bucket}" + (f"/{path}" if path else "") + ("/" if uri.endswith("/") and "/" in uri[5:] else "")


def is_local(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file")


def distribution(path: Path, where: str) -> tuple[str, bytes]:
    """The file Vertex AI installs for a local package: an sdist or wheel as it is; a trainer
    folder (a `trainer/` package, or `task.py` at its top) as an sdist whose install_requires are
    its requirements.txt, as Vertex installs them (see `packaging.sdist`)."""
    if path.is_file():
        if not path.name.endswith(DISTRIBUTIONS):
            raise WorkbenchError(f"{where}: {path.name} is not an sdist (.tar.gz) or a wheel (.whl)")
        return path.name, path.read_bytes()
    if path.is_dir():
        return packaging.sdist(packaging.build_context(path))
    raise WorkbenchError(f"{where}: {path} does not exist")


def stage_packages(job: JobSpec, target: Target) -> JobSpec:
    """`job` with every local packageUri uploaded to the target's staging bucket (relative paths are
    relative to the job file's folder); a job without local packages comes back unchanged."""
    result = job.copy()
    base = job.source_dir or Path.cwd()
    uploaded: dict[str, str] = {}
    for pos, pool in result.pools:
        if "python_package_spec" not in pool:
            continue
        uris = pool.python_package_spec.package_uris
        for n, uri in enumerate(uris):
            if not is_local(uri):
                continue
            where = f"workerPoolSpecs[{pos}].pythonPackageSpec.packageUris[{n}]"
            if not target.staging_bucket:
                raise WorkbenchError(f"{where}: {uri!r} is on this machine; give --staging-bucket gs://BUCKET to "
                                     "upload it for Vertex AI")
            if uri not in uploaded:
                path = (base / urlparse(uri).path if uri.startswith("file:") else base / uri).resolve()
                name, data = distribution(path, where)
                uploaded[uri] = upload(data, name, target)
            uris[n] = uploaded[uri]
    return result


def upload(data: bytes, name: str, target: Target) -> str:
    """Put `data` in the staging bucket under a name made from its content; its gs:// URI."""
    bucket_name, prefix = split_uri(target.staging_bucket, "--staging-bucket")
    path = "/".join(p for p in (prefix.rstrip("/"), PREFIX, hashlib.sha256(data).hexdigest()[:16], name) if p)
    blob = _client(target).bucket(bucket_name).blob(path)
    from google.api_core.exceptions import NotFound, RetryError
    from google.cloud.storage.retry import DEFAULT_RETRY

    try:
        if not blob.exists(timeout=PROBE_SECONDS, retry=DEFAULT_RETRY.with_timeout(PROBE_SECONDS)):
            blob.upload_from_string(data, content_type="application/gzip")
    except NotFound:
        raise WorkbenchError(f"--staging-bucket: bucket {bucket_name} does not exist (create it with "
                             f"`gcloud storage buckets create gs://{bucket_name} --location=REGION`)") from None
    except RetryError as exc:
        raise WorkbenchError(f"--staging-bucket gs://{bucket_name}: {_failure(exc)}") from None
    return f"gs://{bucket_name}/{path}"


def download(uri: str, folder: Path, where: str) -> Path:
    """A gs:// file fetched into `folder` (once: an existing copy is reused); the local path.
    Uses the environment's Cloud Storage (STORAGE_EMULATOR_HOST, or the user's credentials)."""
    bucket_name, path = split_uri(uri, where)
    if not path:
        raise WorkbenchError(f"{where}: {uri!r} names a bucket, not a file in it")
    # a name safe on PYTHONPATH (the SDK's staged names hold ':')
    local = folder / hashlib.sha256(uri.encode()).hexdigest()[:16] / re.sub(r"[^\w.-]", "_", Path(path).name)
    if local.is_file():
        return local
    from google.api_core.exceptions import GoogleAPICallError, RetryError
    from google.auth.exceptions import GoogleAuthError

    partial = paths.private_file(local.with_name(local.name + ".partial"))  # the job's folder: the owner's only
    try:
        _client(None).bucket(bucket_name).blob(path).download_to_filename(str(partial))
    except RetryError as exc:
        partial.unlink(missing_ok=True)
        raise WorkbenchError(f"{where}: cannot read {uri}: {_failure(exc)}") from None
    except (GoogleAPICallError, GoogleAuthError) as exc:
        partial.unlink(missing_ok=True)
        raise WorkbenchError(f"{where}: cannot read {uri}: {getattr(exc, 'message', exc)}") from None
    partial.rename(local)
    return local


def _failure(exc: Any) -> str:
    """What the retries of a Cloud Storage call that never succeeded last met, as one line."""
    if (failure := no_answer(exc.cause)) is not None:
        return "cannot reach Cloud Storage at {}: {}".format(*failure)
    return f"Cloud Storage did not answer in time ({exc.cause or exc.message})"


def _client(target: Target | None) -> Any:
    from google.cloud import storage

    if target is None or target.local:
        return storage.Client()  # the environment's: an emulator, or application-default credentials
    return storage.Client(project=target.project, credentials=target.credentials)
