"""A validated job made ready for where it will run: the CustomJob to send.

Locally: relative package paths become absolute (the service runs elsewhere
than the caller) and a label names the backend. On Vertex AI: packages must be
in Cloud Storage, and without a base output directory the job gets one under
the staging bucket, named as the SDK names it (`<bucket>/<prefix>-<time>`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from google.cloud.aiplatform_v1 import types as v1

from ..errors import WorkbenchError
from ..runner.backend import BACKEND_LABEL, DEFAULT_BACKEND
from ..spec import JobSpec
from .target import Target


def prepare(job: JobSpec, target: Target, output_prefix: str) -> v1.CustomJob:
    resource = job.custom_job()
    if target.local:
        if target.backend != DEFAULT_BACKEND:
            resource.labels[BACKEND_LABEL] = target.backend
        absolute_packages(resource.job_spec, job.source_dir or Path.cwd())
        return resource
    _check_cloud_packages(resource)
    if not resource.job_spec.base_output_directory.output_uri_prefix and target.staging_bucket:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d-%H-%M-%S-%f")[:-3]
        resource.job_spec.base_output_directory.output_uri_prefix = (
            f"{target.staging_bucket.rstrip('/')}/{output_prefix}-{stamp}")
    return resource


def absolute_packages(spec: v1.CustomJobSpec, base: Path) -> None:
    """Relative local package paths made absolute, from `base` (the job file's folder)."""
    for pool in spec.worker_pool_specs:
        if "python_package_spec" in pool:
            uris = pool.python_package_spec.package_uris
            for n, uri in enumerate(uris):
                if "://" not in uri:
                    uris[n] = str((base / uri).resolve())


def _check_cloud_packages(resource: v1.CustomJob) -> None:
    for pos, pool in enumerate(resource.job_spec.worker_pool_specs):
        if "python_package_spec" in pool:
            for n, uri in enumerate(pool.python_package_spec.package_uris):
                if not uri.startswith("gs://"):
                    raise WorkbenchError(f"workerPoolSpecs[{pos}].pythonPackageSpec.packageUris[{n}]: {uri!r} is not "
                                         "in Cloud Storage; Vertex AI needs a gs:// URI (build an sdist and upload it)")
