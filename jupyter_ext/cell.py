"""From a notebook cell and a pool layout to a job ready for its target.

The magic stays thin: it parses flags and calls these functions. A cell
becomes the codelab's trainer package (`trainer/task.py` and a Dockerfile); the
job's pools then run it as the target needs:
- as a package (`for_package`): `python -m trainer.task` from the package folder
  (a pythonPackageSpec pointing at it) on a prebuilt image: local processes run
  it as is; for Vertex AI the folder is uploaded as an sdist (see `staging`),
  with no Docker engine needed;
- as an image (`for_image`): local containers, and Vertex AI with `--image`.
A Reduction Server pool keeps its own image.
"""

from __future__ import annotations

import ast
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.cloud.aiplatform_v1 import types as v1

from . import catalog, cluster, cost, packaging, paths, sensitive, staging, validate
from .environment import Runtime
from .errors import WorkbenchError
from .spec import JobSpec, message_to_dict


@dataclass
class Layout:
    """The inline flags of `%%vertex_train` for the common layouts."""

    workers: int = 0
    machine_type: str = catalog.DEFAULT_MACHINE
    accelerator: str = ""  # TYPE:COUNT
    ps: int = 0
    evaluators: int = 0
    reduction_server: int = 0
    tpu: str = ""  # cloud-tpu:TPU_V3:8 or ct5lp-hightpu-4t:2x2


def layout_job(layout: Layout, name: str) -> JobSpec:
    """A job from the inline flags; the image is filled in later for the target."""
    if layout.ps and layout.reduction_server:
        raise WorkbenchError("--ps and --reduction-server: pool 2 holds either parameter servers or a Reduction Server")
    if layout.tpu:
        return JobSpec(name, v1.CustomJobSpec(worker_pool_specs=[_pool(_tpu_machine(layout.tpu), 1)]))
    machine = {"machine_type": layout.machine_type}
    if layout.accelerator:
        kind, _, count = layout.accelerator.partition(":")
        if not count.isdigit():
            raise WorkbenchError(f"--accelerator: {layout.accelerator!r} is not TYPE:COUNT, e.g. NVIDIA_TESLA_T4:1")
        machine.update(accelerator_type=kind.upper(), accelerator_count=int(count))
    pools = [_pool(machine, 1), _pool(machine, layout.workers) if layout.workers else {}]
    if layout.ps:
        pools.append(_pool({"machine_type": layout.machine_type}, layout.ps))
    elif layout.reduction_server:
        pools.append(_pool({"machine_type": catalog.RECOMMENDED_REDUCER}, layout.reduction_server,
                           catalog.reduction_server_image()))
    else:
        pools.append({})
    pools.append(_pool({"machine_type": layout.machine_type}, layout.evaluators) if layout.evaluators else {})
    while not pools[-1]:
        pools.pop()
    try:
        return JobSpec.from_dict({"worker_pool_specs": pools, "display_name": name})
    except WorkbenchError as exc:
        raise WorkbenchError(f"--accelerator: {exc}") from None


def _pool(machine: dict[str, Any], count: int, image: str = "") -> dict[str, Any]:
    return {"machine_spec": machine, "replica_count": count, "container_spec": {"image_uri": image or "trainer"}}


def _tpu_machine(text: str) -> dict[str, Any]:
    parts = text.split(":")
    if parts[0] == "cloud-tpu" and len(parts) == 3 and parts[2].isdigit():
        return {"machine_type": "cloud-tpu", "accelerator_type": parts[1].upper(), "accelerator_count": int(parts[2])}
    if len(parts) == 2:
        return {"machine_type": parts[0], "tpu_topology": parts[1]}
    raise WorkbenchError(f"--tpu: {text!r} is neither cloud-tpu:TYPE:COUNT (e.g. cloud-tpu:TPU_V3:8) nor "
                         "MACHINE:TOPOLOGY (e.g. ct5lp-hightpu-4t:2x2)")


def check_trainer(source: str) -> None:
    """The cell must be a trainer: Python with at least one statement. An empty cell (or one of only
    comments) would launch a job that does nothing, and a syntax error would fail every replica
    after the build; both are refused before anything is built or launched."""
    try:
        statements = ast.parse(source).body
    except SyntaxError as exc:
        raise WorkbenchError(f"the cell: line {exc.lineno}: {exc.msg} (nothing was launched)") from None
    except ValueError as exc:  # e.g. a NUL character
        raise WorkbenchError(f"the cell: {exc} (nothing was launched)") from None
    if not statements:
        raise WorkbenchError("the cell: no trainer code below the %%vertex_train line (nothing was launched)")


def context_for(source: str, *, requirements: list[str] | None, base_image: str | None,
                job: JobSpec, region: str = "us") -> tuple[packaging.BuildContext, Path]:
    """The cell's build context (prebuilt images from the `region` multi-region), written once under
    the data folder by its content hash: re-running an unchanged cell reuses it."""
    context = packaging.build_context(source, requirements=requirements or None, base_image=base_image,
                                      gpu=packaging.primary_has_gpu(job), region=region,
                                      platform=catalog.image_platform(job))
    folder = paths.private_dir(paths.data_dir() / "contexts") / context.tag
    if not (folder / "Dockerfile").is_file():
        packaging.write_context(context, folder)
    return context, folder


def for_package(job: JobSpec, folder: Path, base_image: str, args: list[str]) -> JobSpec:
    """Every training pool runs the trainer package from `folder` as a Python package job on
    `base_image`, the prebuilt image the Dockerfile starts from."""
    result = job.copy()
    for _, pool in result.training_pools():
        pool.python_package_spec = v1.PythonPackageSpec(executor_image_uri=base_image, package_uris=[str(folder)],
                                                        python_module=packaging.MODULE, args=args, env=_env(pool))
    return result


def for_image(job: JobSpec, image: str, args: list[str]) -> JobSpec:
    """Every training pool runs `image` (the image's ENTRYPOINT runs the trainer)."""
    result = job.copy()
    for _, pool in result.training_pools():
        pool.container_spec = v1.ContainerSpec(image_uri=image, args=args, env=_env(pool))
    return result


def _env(pool: v1.WorkerPoolSpec) -> list[v1.EnvVar]:
    """A pool's environment variables, whichever spec it has now."""
    return list((pool.container_spec if "container_spec" in pool else pool.python_package_spec).env)


def with_job_dir(job: JobSpec, job_dir: str) -> JobSpec:
    """`--job-dir`: outputs go there (AIP_MODEL_DIR and friends), as the base output directory."""
    result = job.copy()
    if job_dir.startswith("gs://"):
        job_dir = staging.normalise_uri(job_dir, "--job-dir")
    result.spec.base_output_directory.output_uri_prefix = job_dir
    return result


def dry_run_text(job: JobSpec, context: packaging.BuildContext, style: str, region: str,
                 show_env_values: bool = False, *, offered_in: str | None = None,
                 tuning_job: v1.HyperparameterTuningJob | None = None) -> str:
    """What a dry run shows: the Dockerfile, the job as submitted (the tuning job whose trials run it,
    if any), what it costs per hour in `region`, every replica's environment. The job is checked as
    the real run checks it, against what `offered_in` offers (a Vertex AI region; None: locally).
    The job's `env` values are *** unless `show_env_values`."""
    validate.check(job, offered_in)
    body = job.to_dict("rest")
    parts = ["# Dockerfile", context.files["Dockerfile"].decode(),
             "# CustomJob (REST body)", _json(body, show_env_values)]
    if tuning_job is not None:
        parts += ["# HyperparameterTuningJob (REST body; its trials run the CustomJob above)",
                  _json(message_to_dict(tuning_job), show_env_values)]
    parts += [f"# Cost per hour in {region}", cost.estimate(job, region).text(cost.spot_by_default(job)).rstrip(),
              f"# Per-replica environment ({style} addresses)"]
    if style == "process":
        parts.append(f"# {Runtime.here().describe()}")
    for replica in cluster.replicas(job, style=style, mask_env=not show_env_values):
        parts.append(f"## {replica.task_name} ({replica.role})")
        for key in ("TF_CONFIG", "CLUSTER_SPEC"):
            if key in replica.env:
                parts.append(f"{key}={json.dumps(json.loads(replica.env[key]))}")
        parts += [f"{k}={v}" for k, v in sorted(replica.env.items()) if k not in ("TF_CONFIG", "CLUSTER_SPEC")]
    return "\n".join(parts) + "\n"


def _json(body: dict[str, Any], show_env_values: bool) -> str:
    return json.dumps(body if show_env_values else sensitive.mask_job(body), indent=2, ensure_ascii=False) + "\n"


def split_args(text: str | None) -> list[str]:
    try:
        return shlex.split(text or "")
    except ValueError as exc:
        raise WorkbenchError(f"--args: {exc}") from None
