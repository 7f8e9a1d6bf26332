"""Every export of a job as text: what a user pastes into a request, a shell or a notebook.

One function per export, and `export(job, kind, region)` to pick one by name
(`KINDS` lists the names and their labels):

| kind | text |
|---|---|
| `rest` | the CustomJob REST body (JSON) |
| `gcloud-config` | the `gcloud ai custom-jobs create --config` file: a CustomJobSpec (YAML) |
| `gcloud-command` | the `gcloud ai custom-jobs create ...` command line |
| `sdk-code` | Python that creates and runs the job with `aiplatform.CustomJob` |
| `legacy` | the AI Platform `trainingInput` body (JSON) |

The data formats themselves are `JobSpec.to_dict`/`JobSpec.dump`; this module
only arranges them. It imports no widgets and nothing heavy, so the CLI can use it.
"""

from __future__ import annotations

import copy
import pprint
import shlex
import textwrap
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from .errors import WorkbenchError
from .names import GCLOUD_COMMAND

if TYPE_CHECKING:
    from .spec import JobSpec


def rest_body(job: JobSpec) -> str:
    """The CustomJob body of `POST .../locations/REGION/customJobs`."""
    return job.dump("rest")


def gcloud_config(job: JobSpec) -> str:
    """The gcloud `--config` file (a CustomJobSpec)."""
    return job.dump("gcloud", as_yaml=True)


def legacy_training_input(job: JobSpec) -> str:
    """The AI Platform (legacy) job body: `jobId` and `trainingInput`."""
    return job.dump("legacy")


# top-level CustomJobSpec fields that have their own gcloud flag
_GCLOUD_FLAGS = {"serviceAccount": "--service-account", "network": "--network",
                 "enableWebAccess": "--enable-web-access", "enableDashboardAccess": "--enable-dashboard-access",
                 "persistentResourceId": "--persistent-resource-id"}


def gcloud_command(job: JobSpec, region: str) -> str:
    """`gcloud ai custom-jobs create ...` with one --worker-pool-spec per pool (gcloud's key names).

    What the flags cannot say (per-pool args, env, disks, scheduling, ...) is named in
    a comment: use `--config` with the `gcloud-config` export for those jobs.
    """
    body = job.to_dict("gcloud")
    pools = body.pop("workerPoolSpecs", [])
    flags = [f"--region={region}", f"--display-name={job.display_name}"]
    lost: list[str] = []
    # --args applies to every pool, --command to containers, --python-package-uris to packages
    containers = [p["containerSpec"] for p in pools if "containerSpec" in p]
    packages = [p["pythonPackageSpec"] for p in pools if "pythonPackageSpec" in p]
    shared: dict[str, list[str]] = {}
    for key, specs in (("args", containers + packages), ("command", containers), ("packageUris", packages)):
        values = [spec.get(key, []) for spec in specs]
        if any(values) and all(v == values[0] for v in values):
            shared[key] = values[0]
    for pos, pool in enumerate(pools):
        flags.append("--worker-pool-spec=" + ",".join(f"{k}={v}" for k, v in _pool_keys(pool, pos, shared, lost)))
    if "packageUris" in shared:
        flags.append("--python-package-uris=" + ",".join(shared["packageUris"]))
    for key in ("command", "args"):
        if key in shared:
            flags.append(f"--{key}=" + ",".join(shared[key]))
            if any("," in a for a in shared[key]):
                lost.append(f"{key} (a value contains a comma)")
    for key, flag in _GCLOUD_FLAGS.items():
        if key in body:
            value = body.pop(key)
            flags.append(flag if value is True else f"{flag}={value}")
    # labels and the key are the CustomJob's, not the CustomJobSpec's: no config file holds them, so they
    # are always flags
    labels = ["--labels=" + ",".join(f"{k}={v}" for k, v in job.labels.items())] if job.labels else []
    kms = [f"--kms-key={job.encryption_spec.kms_key_name}"] if job.encryption_spec.kms_key_name else []
    flags += labels + kms
    lost += [f"{key}.{sub}" if isinstance(value, dict) else key for key, value in body.items()
             for sub in (value if isinstance(value, dict) else [key])]
    lines = ["gcloud ai custom-jobs create"] + [shlex.quote(f) for f in flags]
    text = " \\\n  ".join(lines) + "\n"
    if lost:
        config = [f"--region={region}", f"--display-name={job.display_name}", *labels, *kms, "--config=config.yaml"]
        text = (textwrap.fill(f"Not expressible as flags: {', '.join(lost)}.", 100, initial_indent="# ",
                              subsequent_indent="#   ") + "\n"
                f"# For this job use: gcloud ai custom-jobs create {shlex.join(config)}\n") + text
    return text


def _pool_keys(pool: dict[str, Any], pos: int, shared: dict[str, list[str]], lost: list[str]) -> list[tuple[str, Any]]:
    """The keys of one --worker-pool-spec; what they cannot hold is added to `lost`."""
    if not pool:
        return []
    pool = copy.deepcopy(pool)
    ms = pool.pop("machineSpec", {})
    keys: list[tuple[str, Any]] = [("machine-type", ms.pop("machineType", "")),
                                   ("replica-count", pool.pop("replicaCount", 0))]
    if "acceleratorType" in ms:
        keys += [("accelerator-type", ms.pop("acceleratorType")), ("accelerator-count", ms.pop("acceleratorCount", 0))]
    if "containerSpec" in pool:  # present, even empty (`{}`: no image yet), as spec.pool_image reads it
        container = pool.pop("containerSpec")
        keys.append(("container-image-uri", container.pop("imageUri", "")))
        for key in ("command", "args"):
            if container.get(key, []) == shared.get(key, []):
                container.pop(key, None)
        rest = container
        where = "containerSpec"
    else:
        package = pool.pop("pythonPackageSpec", {})
        keys += [("executor-image-uri", package.pop("executorImageUri", "")),
                 ("python-module", package.pop("pythonModule", ""))]
        for key in ("args", "packageUris"):
            if package.get(key, []) == shared.get(key, []):
                package.pop(key, None)
        rest = package
        where = "pythonPackageSpec"
    lost += [f"workerPoolSpecs[{pos}].machineSpec.{k}" for k in ms]
    lost += [f"workerPoolSpecs[{pos}].{where}.{k}" for k in rest]
    lost += [f"workerPoolSpecs[{pos}].{k}" for k in pool]
    return keys


# CustomJob(Spec) fields (SDK form) -> (where, keyword) in aiplatform.CustomJob(...) / .run(...)
# (google-cloud-aiplatform 2.7: inspect.signature(CustomJob.__init__ / CustomJob.run))
_SDK_ARGS = {"base_output_dir": ("init", "base_output_dir"), "labels": ("init", "labels"),
             "encryption_spec_key_name": ("init", "encryption_spec_key_name"),
             "persistent_resource_id": ("init", "persistent_resource_id"),
             "service_account": ("run", "service_account"), "network": ("run", "network"),
             "enable_web_access": ("run", "enable_web_access"), "tensorboard": ("run", "tensorboard")}
# CustomJobSpec fields neither CustomJob() nor run() takes: the snippet sets them on `job.job_spec`
_JOB_SPEC_FIELDS = ("enable_dashboard_access", "reserved_ip_ranges")


def sdk_code(job: JobSpec, region: str) -> str:
    """Python that creates and runs the same job with google-cloud-aiplatform."""
    from .spec import SDK_SCHEDULING  # the SDK form's run() keywords that are scheduling fields

    body = job.to_dict("sdk")
    pools = body.pop("worker_pool_specs")
    name = body.pop("display_name")
    init: dict[str, Any] = {}
    run: dict[str, str] = {}  # keyword -> Python source of its value
    for key, (where, arg) in _SDK_ARGS.items():
        if key in body:
            value = body.pop(key)
            if where == "init":
                init[arg] = value
            else:
                run[arg] = repr(value)
    for key in SDK_SCHEDULING:
        if key in body:
            value = body.pop(key)
            run[key] = repr(value) if key != "scheduling_strategy" else \
                f"Scheduling.Strategy.{value}" if isinstance(value, str) else f"Scheduling.Strategy({value})"
    scheduling = body.pop("scheduling", {})  # what run() cannot say, e.g. a timeout of 1.5 s
    spec_fields = {key: body.pop(key) for key in _JOB_SPEC_FIELDS if key in body}
    lost = list(body) + [f"scheduling.{k}" for k in scheduling]
    lines = ["from google.cloud import aiplatform"]
    if "scheduling_strategy" in run:
        lines.append("from google.cloud.aiplatform_v1.types import Scheduling")
    lines += ["",
              f"aiplatform.init(project={'YOUR_PROJECT'!r}, location={region!r}, staging_bucket={'gs://YOUR_BUCKET'!r})",
              ""]
    if lost:
        lines.append(f"# Not set by this snippet: {', '.join(lost)} (see the config.yaml export)")
    lines += ["job = aiplatform.CustomJob(", f"    display_name={name!r},", "    worker_pool_specs=["]
    lines += ["        " + pprint.pformat(p, width=100, sort_dicts=False).replace("\n", "\n        ") + ","
              for p in pools]
    lines.append("    ],")
    lines += [f"    {k}={v!r}," for k, v in init.items()]
    lines.append(")")
    if spec_fields:
        lines.append("# CustomJob.run() has no argument for these: set them on the job's spec")
        lines += [f"job.job_spec.{key} = {value!r}" for key, value in spec_fields.items()]
    lines.append("job.run(" + ", ".join(f"{k}={v}" for k, v in run.items()) + ")")
    return "\n".join(lines) + "\n"


class Kind(NamedTuple):
    label: str  # what a button or heading calls it
    render: Callable[[JobSpec, str], str]  # (job, region) -> text


KINDS: dict[str, Kind] = {
    "rest": Kind("REST body", lambda job, _region: rest_body(job)),
    "gcloud-config": Kind("config.yaml", lambda job, _region: gcloud_config(job)),
    GCLOUD_COMMAND: Kind("gcloud command", gcloud_command),
    "sdk-code": Kind("Python SDK", sdk_code),
    "legacy": Kind("trainingInput", lambda job, _region: legacy_training_input(job)),
}


def export(job: JobSpec, kind: str, region: str) -> str:
    """The export called `kind` (a key of `KINDS`) of `job`, for a job run in `region`."""
    if kind not in KINDS:
        raise WorkbenchError(f"unknown export {kind!r} (valid: {', '.join(KINDS)})")
    return KINDS[kind].render(job, region)
