"""What Vertex AI would refuse, or what cannot work there, found before anything is built,
pushed, uploaded or created: one line per problem, naming the field.

The local service runs what Vertex AI would not: images only this machine can
reach, packages and outputs in local folders, commands that start programs of
this machine. A job for Vertex AI is checked for those here:

- the staging bucket and the base output directory are `gs://` URIs;
- every image can be pulled by Vertex AI: not `localhost`/`127.0.0.1`, not an
  unqualified local name (when the endpoint is the local service, standing in
  for Vertex AI in tests, its registry on 127.0.0.1 is allowed);
- a `pythonPackageSpec` runs on one of Vertex AI's prebuilt training images, and
  its packages are in Cloud Storage, or local ones with a staging bucket to
  upload them to;
- `containerSpec.command` names no file of this machine (the home folder, the
  current or temporary folder, this Python environment): on Vertex AI it runs
  inside the image.

`region_of(target)` is the region whose offer a job is checked against (none for
the local service); `notices(job, target)` are the lines worth showing before a
job goes (deprecated choices, what runs differently on this machine).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from .. import packaging, paths, scheduling, validate
from ..errors import ValidationError, WorkbenchError
from ..spec import JobSpec
from ..staging import is_local, split_uri
from .target import Session, Target

_LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "0.0.0.0")


def check(job: JobSpec, target: Target) -> None:
    """Raise ValidationError with every problem of `job` for Vertex AI (nothing for local targets)."""
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
        return
    if target.staging_bucket:
        yield from _gs("--staging-bucket", target.staging_bucket)
    base = job.custom_job_spec().base_output_directory.output_uri_prefix
    if base:
        yield from _gs("baseOutputDirectory.outputUriPrefix", base)
    local_registry_ok = Session.of(target).local_service() is not None
    for pos, pool in job.pools:
        where = f"workerPoolSpecs[{pos}]"
        if "container_spec" in pool:
            spec = pool.container_spec
            if not local_registry_ok and _only_here(spec.image_uri):
                yield (f"{where}.containerSpec.imageUri: {spec.image_uri!r} is only on this machine; Vertex AI "
                       "pulls images from a registry it can reach (push it, e.g. --image "
                       "us-central1-docker.pkg.dev/PROJECT/REPO/trainer)")
            for n, part in enumerate(spec.command):
                if _on_this_machine(part):
                    yield (f"{where}.containerSpec.command[{n}]: {part} is a file of this machine; on Vertex AI "
                           "the command runs inside the image")
        else:
            spec = pool.python_package_spec
            if not packaging.is_prebuilt_training_image(spec.executor_image_uri):
                yield (f"{where}.pythonPackageSpec.executorImageUri: {spec.executor_image_uri!r} is not one of "
                       "Vertex AI's prebuilt training images (e.g. --base-image tf gives "
                       "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest); for your own image, "
                       "use a containerSpec")
            for n, uri in enumerate(spec.package_uris):
                at = f"{where}.pythonPackageSpec.packageUris[{n}]"
                if is_local(uri):
                    if not target.staging_bucket:
                        yield (f"{at}: {uri!r} is on this machine; give --staging-bucket gs://BUCKET to upload it "
                               "for Vertex AI")
                else:
                    yield from _gs(at, uri)


def _gs(where: str, uri: str) -> Iterator[str]:
    try:
        split_uri(uri, where)
    except WorkbenchError as exc:
        yield f"{exc}; Vertex AI reads and writes Cloud Storage"


def _only_here(image: str) -> bool:
    """An image reference Vertex AI cannot pull: a loopback registry, or no registry host at all."""
    first = image.split("/", 1)[0]
    if "/" not in image or not ("." in first or ":" in first or first == "localhost"):
        return True  # `trainer:1`, `vtrain/trainer`: names in this machine's Docker engine
    return first.split(":", 1)[0] in _LOOPBACK or first.startswith("[::1]")


def _on_this_machine(part: str) -> bool:
    """An absolute path into this machine's own folders (not a system path an image also has)."""
    if not part.startswith("/"):
        return False
    places = [Path.home(), Path.cwd(), Path(tempfile.gettempdir()), paths.data_dir()]
    if sys.prefix not in ("/usr", "/usr/local"):
        places.append(Path(sys.prefix))
    path = Path(os.path.normpath(part))
    return path == Path(sys.executable) or any(path.is_relative_to(place) for place in places)
