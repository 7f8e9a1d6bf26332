"""A validated job made ready for where it will run: the CustomJob to send.

Locally: relative package paths become absolute (the service runs elsewhere
than the caller) and a label names the backend. On Vertex AI (packages already
staged, see `staging`): what `aiplatform.init` set fills what the job leaves
open (service account, network, encryption key), as the SDK does, and without a
base output directory the job gets one under the staging bucket, named as the
SDK names it (`<bucket>/<prefix>-<time>`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from google.cloud.aiplatform_v1 import types as v1

from ..runner.backend import BACKEND_LABEL, DEFAULT_BACKEND
from ..spec import JobSpec
from .target import Target


def prepare(job: JobSpec, target: Target, output_prefix: str) -> v1.CustomJob:
    resource = job.custom_job()
    if target.local:
        if target.backend != DEFAULT_BACKEND:
            resource.labels[BACKEND_LABEL] = target.backend
        absolute_packages(resource.job_spec, job.source_dir or Path.cwd())
        if (folder := local_output_folder(job)) is not None:
            resource.job_spec.base_output_directory.output_uri_prefix = str(folder)
        return resource
    spec = resource.job_spec
    spec.service_account = spec.service_account or target.service_account
    spec.network = spec.network or target.network
    if target.encryption_key and not resource.encryption_spec.kms_key_name:
        resource.encryption_spec.kms_key_name = target.encryption_key
    if not spec.base_output_directory.output_uri_prefix and target.staging_bucket:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d-%H-%M-%S-%f")[:-3]
        spec.base_output_directory.output_uri_prefix = f"{target.staging_bucket.rstrip('/')}/{output_prefix}-{stamp}"
    return resource


def local_output_folder(job: JobSpec) -> Path | None:
    """A local job's base output directory when it is a folder of this machine (not gs://), made absolute
    from the job's folder (a job file's; a cell's is the kernel's): the local service runs in a folder
    of its own."""
    base = job.custom_job_spec().base_output_directory.output_uri_prefix
    if not base or "://" in base:
        return None
    return Path(job.source_dir or Path.cwd()) / Path(base).expanduser()


def absolute_packages(spec: v1.CustomJobSpec, base: Path) -> None:
    """Relative local package paths made absolute, from `base` (the job file's folder)."""
    for pool in spec.worker_pool_specs:
        if "python_package_spec" in pool:
            uris = pool.python_package_spec.package_uris
            for n, uri in enumerate(uris):
                if "://" not in uri:
                    uris[n] = str((base / uri).resolve())
