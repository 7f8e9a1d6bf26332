"""What Vertex AI would refuse, or what cannot work there, found before anything is built,
pushed, uploaded or created: one line per problem, naming the field.

The local service runs what Vertex AI would not: images only this machine can
reach, packages and outputs in local folders, commands that start programs of
this machine, a label that picks a local backend. A job for Vertex AI is checked
for those here:

- the staging bucket and the base output directory are `gs://` URIs (not a local
  folder or `file://`);
- no `vtrain-backend` label: it picks this machine's backend, and means nothing on
  Vertex AI's machines;
- every image can be pulled by Vertex AI: not on a host of this machine (localhost,
  127.0.0.0/8, ::1, in any case), not a name without a registry host (`trainer:1`,
  `tensorflow/tensorflow`: Docker Hub's images are written `docker.io/...`); when the endpoint is the local service,
  standing in for Vertex AI in tests, its registry on 127.0.0.1 is allowed;
- a `pythonPackageSpec` runs on one of Vertex AI's prebuilt training images, and
  its packages are in Cloud Storage, or local ones that exist, with a staging
  bucket to upload them to (all checked before the first is uploaded);
- `containerSpec.command` names no file that only this machine has (under the
  workbench's data folder, or the home or current folder unless that is a folder
  images have too): on Vertex AI it runs inside the image.

For a local job, the one check is that a base output directory in a local folder
(relative to the job file's folder, or the kernel's) can be made and written.

`region_of(target)` is the region whose offer a job is checked against (none for
the local service); `notices(job, target)` are the lines worth showing before a
job goes (deprecated choices, what runs differently on this machine).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from .. import packaging, paths, scheduling, validate
from ..errors import ValidationError, WorkbenchError
from ..runner.backend import BACKEND_LABEL
from ..spec import JobSpec
from ..staging import DISTRIBUTIONS, is_local, split_uri
from .prepare import local_output_folder
from .target import Session, Target, loopback

# Folders images have too: `/`, root's home (images run as root; Dockerfiles use WORKDIR /root)
# and system prefixes (/usr/bin/python3, /opt/conda/bin/python are in many images). A home or
# current folder that is one of them, or inside a system prefix, proves nothing about a path.
_IMAGE_FOLDERS = (Path("/"), Path("/root"))
_SYSTEM_PREFIXES = tuple(Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt"))


def check(job: JobSpec, target: Target) -> None:
    """Raise ValidationError with every problem of `job` for Vertex AI (for a local target: an output
    folder this machine cannot make)."""
    found = list(problems(job, target))
    if found:
        raise ValidationError(found)


def region_of(target: Target) -> str | None:
    """The Vertex AI region whose machines and accelerators a job for `target` must use."""
    return None if target.local else target.region


def notices(job: JobSpec, target: Target) -> list[str]:
    found = validate.notices(job, region_of(target))
    if target.local and (note := scheduling.local_notice(job)):
        found.append(note)
    return found


def problems(job: JobSpec, target: Target) -> Iterator[str]:
    if target.local:
        if (folder := local_output_folder(job)) is not None and (problem := paths.folder_problem(folder)):
            yield f"baseOutputDirectory.outputUriPrefix: {problem}"
        return
    if target.staging_bucket:
        yield from _gs("--staging-bucket", target.staging_bucket)
    base = job.custom_job_spec().base_output_directory.output_uri_prefix
    if base:
        yield from _gs("baseOutputDirectory.outputUriPrefix", base)
    if BACKEND_LABEL in job.labels:
        yield (f"labels.{BACKEND_LABEL}: {job.labels[BACKEND_LABEL]!r} picks a backend of this machine's local "
               "service; Vertex AI runs the job on its own machines (remove the label)")
    local_registry_ok = Session.of(target).local_service() is not None
    here = _this_machines_folders()
    for pos, pool in job.pools:
        where = f"workerPoolSpecs[{pos}]"
        if "container_spec" in pool:
            spec = pool.container_spec
            if not local_registry_ok and (problem := _image_problem(spec.image_uri)):
                yield f"{where}.containerSpec.imageUri: {problem}"
            for n, part in enumerate(spec.command):
                if part.startswith("/") and (folder := _folder_of(part, here)):
                    yield (f"{where}.containerSpec.command[{n}]: {part} is a file of this machine (under {folder}); "
                           "on Vertex AI the command runs inside the image")
        else:
            spec = pool.python_package_spec
            if not packaging.is_prebuilt_training_image(spec.executor_image_uri):
                yield (f"{where}.pythonPackageSpec.executorImageUri: {spec.executor_image_uri!r} is not one of "
                       "Vertex AI's prebuilt training images (e.g. --base-image tf gives "
                       "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest); for your own image, "
                       "use --image (the magic) or a containerSpec")
            for n, uri in enumerate(spec.package_uris):
                at = f"{where}.pythonPackageSpec.packageUris[{n}]"
                if not is_local(uri):
                    yield from _gs(at, uri)
                elif not target.staging_bucket:
                    yield (f"{at}: {uri!r} is on this machine; give --staging-bucket gs://BUCKET to upload it "
                           "for Vertex AI")
                elif problem := _unstageable(uri, job.source_dir or Path.cwd()):
                    yield f"{at}: {problem}"


def _gs(where: str, uri: str) -> Iterator[str]:
    try:
        split_uri(uri, where)
    except WorkbenchError as exc:
        yield f"{exc}; Vertex AI reads and writes Cloud Storage"


def _image_problem(image: str) -> str | None:
    """Why Vertex AI could not pull `image`, or None.

    A name without a registry host is refused even though Docker reads `python:3.11` and
    `tensorflow/tensorflow` as Docker Hub's: this machine's own builds look the same
    (`trainer:1`, `vtrain/trainer`, `me/trainer`), and a job sent with one fails only after
    Vertex AI has set up its machines. `docker.io/NAME` says Docker Hub, which Vertex AI pulls
    from (data/SOURCES.md, "Images from Docker Hub")."""
    host = image.split("/", 1)[0]
    if "/" not in image or not ("." in host or ":" in host or host.lower() == "localhost"):
        hub = f"docker.io/{image}" if "/" in image else f"docker.io/library/{image}"
        return (f"{image!r} names no registry, so it may be an image only this machine has; push it (e.g. --image "
                f"us-central1-docker.pkg.dev/PROJECT/REPO/trainer), or for Docker Hub's image write {hub}")
    name = host[1:].partition("]")[0] if host.startswith("[") else host.rsplit(":", 1)[0]  # without its port
    if loopback(name):
        return (f"{image!r} is only on this machine; Vertex AI pulls images from a registry it can reach (push "
                "it, e.g. --image us-central1-docker.pkg.dev/PROJECT/REPO/trainer)")
    return None


def _this_machines_folders() -> list[Path]:
    """Folders whose files only this machine has: the workbench's data folder, the home and the
    current folder, but none that images have too (see _IMAGE_FOLDERS). A project folder copied
    into the image at the same path is still refused: rare, and the message says which folder."""
    places = (Path(os.path.abspath(p)) for p in (paths.data_dir(), Path.home(), Path.cwd()))
    return [p for p in places if p not in _IMAGE_FOLDERS and not any(p.is_relative_to(s) for s in _SYSTEM_PREFIXES)]


def _folder_of(part: str, places: list[Path]) -> Path | None:
    path = Path(os.path.normpath(part))
    return next((place for place in places if path.is_relative_to(place)), None)


def _unstageable(uri: str, base: Path) -> str | None:
    """Why a local package could not be uploaded, or None; found here so that no package of the job
    is uploaded before a later one fails. Resolved as `staging.stage_packages` resolves it."""
    path = (base / urlparse(uri).path if uri.startswith("file:") else base / uri).resolve()
    if path.is_dir():
        return None
    if not path.is_file():
        return f"{uri!r}: {path} does not exist"
    if not path.name.endswith(DISTRIBUTIONS):
        return f"{uri!r}: {path.name} is not an sdist (.tar.gz) or a wheel (.whl)"
    return None
