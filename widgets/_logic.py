"""What the pool configurator and the cluster inspector show, as plain functions.

No widgets here, so everything is tested without a browser. The UI state is a
plain dict (see `default_state`); `build_job(state)` turns it into the core's
`JobSpec`, and `state_from_job(job)` goes back. Every rule and every fact comes
from the core (catalog, validate, spec, cluster): this module only arranges it.

State layout::

    {"display_name": str, "region": str, "image": str,  # image: the primary's
     "pools": [pool, pool, pool, pool],                  # positions 0..3
     "extra": {...}}                                     # what the UI does not edit

    pool = {"enabled", "replica_count", "machine_type", "accelerator_type",
            "accelerator_count", "tpu_topology", "image", "boot_disk_type",
            "boot_disk_size_gb", "mode", "base"}

A pool's `image` left empty means "the primary's image" (or, in Reduction Server
mode, the reducer image of the region). `base` holds the pool's REST fields the
cards do not edit (command, args, env, pythonPackageSpec, ...), so a loaded job
comes back unchanged; `None` means a pool made in the UI, which runs the
primary's code.
"""

from __future__ import annotations

import copy
import json
import pprint
import shlex
import textwrap
from typing import Any

import pandas as pd

from jupyter_ext import catalog, cluster, validate
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.spec import POOL_ROLES, JobSpec, is_empty_pool, message_to_dict

DEFAULT_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
DEFAULT_MACHINE = "n1-standard-4"
DEFAULT_REGION = "us-central1"
DEFAULT_NAME = "vertex-training-job"
DEFAULT_DISK_TYPE = validate.BOOT_DISK_TYPES[0]
DEFAULT_DISK_GB = validate.BOOT_DISK_GB[0]
PARAMETER_SERVER, REDUCTION_SERVER = "parameter_server", "reduction_server"
MODES = (("Parameter servers", PARAMETER_SERVER), ("Reduction Server", REDUCTION_SERVER))
POOL_TITLES = tuple(role.capitalize() for role in POOL_ROLES)
# machineSpec fields the cards edit; any other (reservationAffinity, ...) is kept from `base`
_MACHINE_KEYS = ("machineType", "acceleratorType", "acceleratorCount", "tpuTopology")
_CODE_KEYS = ("containerSpec", "pythonPackageSpec")


# ---- state -----------------------------------------------------------------

def default_pool(enabled: bool) -> dict[str, Any]:
    return {"enabled": enabled, "replica_count": 1, "machine_type": DEFAULT_MACHINE, "accelerator_type": "",
            "accelerator_count": 0, "tpu_topology": "", "image": "", "boot_disk_type": DEFAULT_DISK_TYPE,
            "boot_disk_size_gb": DEFAULT_DISK_GB, "mode": PARAMETER_SERVER, "base": None}


def default_state(display_name: str = DEFAULT_NAME, region: str = DEFAULT_REGION,
                  image: str = DEFAULT_IMAGE) -> dict[str, Any]:
    """The codelab's layout: a primary (chief) and one worker, both n1-standard-4."""
    pools = [default_pool(True), default_pool(True), default_pool(False), default_pool(False)]
    return {"display_name": display_name, "region": region, "image": image, "pools": pools, "extra": {}}


def is_tpu_machine(name: str) -> bool:
    machine = catalog.machine(name)
    return machine is not None and machine.kind == "tpu"


def update_pool(state: dict[str, Any], pos: int, field: str, value: Any) -> dict[str, Any]:
    """The state after the user sets one field of pool `pos`, with the pickers that
    depend on it moved to something the catalog offers."""
    state = copy.deepcopy(state)
    pools = state["pools"]
    pool = pools[pos]
    if pos == 0 and field == "image":
        state["image"] = value
        return state
    pool[field] = value
    if field == "machine_type":
        _fit_accelerators(pool)
        machine = catalog.machine(value)
        topologies = list(machine.tpu_topologies) if machine else []
        if pool["tpu_topology"] not in topologies:
            pool["tpu_topology"] = topologies[0] if topologies else ""
        if pos == 0 and is_tpu_machine(value):  # TPU jobs run one pool
            for other in pools[1:]:
                other["enabled"] = False
    elif field == "accelerator_type":
        offered = catalog.valid_accelerators(pool["machine_type"]).get(value, ())
        pool["accelerator_count"] = _fit_count(offered, pool["accelerator_count"]) if value else 0
    elif field == "mode":
        pool.update(enabled=True, image="", base=None)
        if value == REDUCTION_SERVER:  # reducers use no accelerators
            pool.update(machine_type=catalog.RECOMMENDED_REDUCER, accelerator_type="", accelerator_count=0,
                        tpu_topology="")
    pools[0]["enabled"] = True
    return state


def _fit_accelerators(pool: dict[str, Any]) -> None:
    machine = catalog.machine(pool["machine_type"])
    offered = catalog.valid_accelerators(pool["machine_type"])
    if machine is not None and machine.fixed_accelerator:
        pool["accelerator_type"], pool["accelerator_count"] = machine.fixed_accelerator
    elif pool["accelerator_type"] in offered:
        pool["accelerator_count"] = _fit_count(offered[pool["accelerator_type"]], pool["accelerator_count"])
    elif offered and machine is not None and machine.kind == "tpu":  # cloud-tpu needs one
        pool["accelerator_type"] = next(iter(offered))
        pool["accelerator_count"] = offered[pool["accelerator_type"]][0]
    else:
        pool["accelerator_type"], pool["accelerator_count"] = "", 0


def _fit_count(counts: tuple[int, ...], current: int) -> int:
    """Keep `current` if offered, else the smallest offered count above it, else the largest."""
    if not counts or current in counts:
        return current if counts else 0
    return min((c for c in counts if c > current), default=max(counts))


def apply_reducer_suggestion(state: dict[str, Any]) -> dict[str, Any]:
    """Pool 2 as a Reduction Server sized to the workers' bandwidth."""
    count, _ = reducer_suggestion(state)
    if state["pools"][2]["mode"] != REDUCTION_SERVER or not state["pools"][2]["enabled"]:
        state = update_pool(state, 2, "mode", REDUCTION_SERVER)
    state = update_pool(state, 2, "machine_type", catalog.RECOMMENDED_REDUCER)
    if count:
        state = update_pool(state, 2, "replica_count", count)
    return state


# ---- state -> job -------------------------------------------------------------

def build_job(state: dict[str, Any]) -> JobSpec:
    """The JobSpec the UI state describes (parsed by the core; may be invalid, see `problems`)."""
    extra = state.get("extra") or {}
    pools: list[dict[str, Any]] = [_pool_body(state, pos) if pos == 0 or p["enabled"] else {}
                                   for pos, p in enumerate(state["pools"])]
    pools += copy.deepcopy(extra.get("more_pools", []))
    while len(pools) > max(1, extra.get("pool_count", 0)) and not pools[-1]:
        pools.pop()
    spec = JobSpec.from_dict({**copy.deepcopy(extra.get("spec", {})), "workerPoolSpecs": pools}).spec
    return JobSpec(state["display_name"], spec, dict(extra.get("labels", {})), copy.deepcopy(extra.get("legacy")))


def pool_image(state: dict[str, Any], pos: int) -> str:
    """The image pool `pos` runs: its own, else the reducer image (Reduction Server) or the primary's."""
    pool = state["pools"][pos]
    if pos == 0:
        return state["image"]
    if pool["image"]:
        return pool["image"]
    if pos == 2 and pool["mode"] == REDUCTION_SERVER:
        return catalog.reduction_server_image(state["region"])
    return state["image"]


def _pool_body(state: dict[str, Any], pos: int) -> dict[str, Any]:
    pool = state["pools"][pos]
    reducer = pos == 2 and pool["mode"] == REDUCTION_SERVER
    if pool["base"] is not None:
        body = copy.deepcopy(pool["base"])
    elif pos == 0 or reducer:
        body = {}
    else:  # a pool made in the UI runs the primary's code
        body = {k: copy.deepcopy(v) for k, v in (state["pools"][0]["base"] or {}).items() if k in _CODE_KEYS}
    machine = {k: v for k, v in body.pop("machineSpec", {}).items() if k not in _MACHINE_KEYS}
    machine["machineType"] = pool["machine_type"]
    if pool["accelerator_type"]:
        machine["acceleratorType"] = pool["accelerator_type"]
    if pool["accelerator_count"]:
        machine["acceleratorCount"] = pool["accelerator_count"]
    if pool["tpu_topology"]:
        machine["tpuTopology"] = pool["tpu_topology"]
    body["machineSpec"] = machine
    body["replicaCount"] = pool["replica_count"]
    disk = body.pop("diskSpec", {})
    if pool["boot_disk_type"] != DEFAULT_DISK_TYPE or "bootDiskType" in disk:
        disk["bootDiskType"] = pool["boot_disk_type"]
    if pool["boot_disk_size_gb"] != DEFAULT_DISK_GB or "bootDiskSizeGb" in disk:
        disk["bootDiskSizeGb"] = pool["boot_disk_size_gb"]
    if disk:
        body["diskSpec"] = disk
    image = pool_image(state, pos)
    if reducer:
        body.pop("pythonPackageSpec", None)
    if "pythonPackageSpec" in body:
        body["pythonPackageSpec"]["executorImageUri"] = image
    else:
        body.setdefault("containerSpec", {})["imageUri"] = image
    return body


def state_from_job(job: JobSpec, region: str = DEFAULT_REGION) -> dict[str, Any]:
    """The UI state of a job; `build_job(state_from_job(job)) == job`."""
    pools = [message_to_dict(p) if not is_empty_pool(p) else {} for p in job.spec.worker_pool_specs]
    primary_image = _image_of(pools[0]) if pools and pools[0] else DEFAULT_IMAGE
    state_pools = [_pool_state(pools[pos] if pos < len(pools) else {}, pos, primary_image, region)
                   for pos in range(4)]
    spec = message_to_dict(job.spec)
    spec.pop("workerPoolSpecs", None)
    extra = {"spec": spec, "labels": dict(job.labels), "legacy": copy.deepcopy(job.legacy),
             "pool_count": len(pools), "more_pools": pools[4:]}
    return {"display_name": job.display_name, "region": region, "image": primary_image, "pools": state_pools,
            "extra": extra}


def _image_of(body: dict[str, Any]) -> str:
    return (body.get("containerSpec") or {}).get("imageUri") or \
        (body.get("pythonPackageSpec") or {}).get("executorImageUri", "")


def _pool_state(body: dict[str, Any], pos: int, primary_image: str, region: str) -> dict[str, Any]:
    if not body:
        return default_pool(pos == 0)
    base = copy.deepcopy(body)
    ms = base.pop("machineSpec", {})
    if kept := {k: v for k, v in ms.items() if k not in _MACHINE_KEYS}:
        base["machineSpec"] = kept
    disk = base.get("diskSpec", {})
    image = _image_of(base)
    reducer = pos == 2 and catalog.is_reduction_server_image(image)
    default_image = catalog.reduction_server_image(region) if reducer else primary_image
    return {"enabled": True, "replica_count": int(base.pop("replicaCount", 0)),
            "machine_type": ms.get("machineType", ""), "accelerator_type": str(ms.get("acceleratorType", "")),
            "accelerator_count": int(ms.get("acceleratorCount", 0)), "tpu_topology": ms.get("tpuTopology", ""),
            "image": "" if pos == 0 or image == default_image else image,
            "boot_disk_type": disk.get("bootDiskType", DEFAULT_DISK_TYPE),
            "boot_disk_size_gb": int(disk.get("bootDiskSizeGb", DEFAULT_DISK_GB)),
            "mode": REDUCTION_SERVER if reducer else PARAMETER_SERVER, "base": base}


def problems(state: dict[str, Any]) -> tuple[JobSpec | None, list[str]]:
    """The job and validate.problems of it; a job the core cannot parse gives its error."""
    try:
        job = build_job(state)
    except WorkbenchError as exc:
        return None, [str(exc)]
    return job, validate.problems(job)


# ---- what a pool card shows ----------------------------------------------------

def machine_label(machine: catalog.Machine) -> str:
    """E.g. "n1-standard-8 — 8 vCPU, 30 GB"; the name alone when sizes are unknown."""
    if machine.vcpus is None or machine.memory_gb is None:
        return machine.name
    return f"{machine.name} — {machine.vcpus} vCPU, {machine.memory_gb:g} GB"


def machine_options(include_tpu: bool = True) -> list[tuple[str, str]]:
    """(label, name) of every training machine, family by family in the catalog's order."""
    return [(machine_label(m), m.name) for ms in catalog.families().values() for m in ms
            if include_tpu or m.kind != "tpu"]


def accelerator_type_options(machine_name: str) -> list[tuple[str, str]]:
    """Only what catalog.valid_accelerators offers; "None" where the machine may run without one."""
    machine = catalog.machine(machine_name)
    offered = catalog.valid_accelerators(machine_name)
    none = [("None", "")] if not offered or (machine is not None and machine.kind == "cpu") else []
    return none + [(_accelerator_label(a), a) for a in offered]


def accelerator_count_options(machine_name: str, accelerator: str) -> list[tuple[str, int]]:
    if not accelerator:
        return [("-", 0)]
    return [(str(c), c) for c in catalog.valid_accelerators(machine_name).get(accelerator, ())]


def topology_options(machine_name: str) -> list[tuple[str, str]]:
    machine = catalog.machine(machine_name)
    topologies = machine.tpu_topologies if machine else {}
    return [(f"{t} — {chips} chips, {vms} VM{'s' if vms != 1 else ''}", t) for t, (chips, vms) in topologies.items()]


def _accelerator_label(name: str) -> str:
    label = catalog.accelerator_label(name)
    return f"{label} (deprecated)" if catalog.is_deprecated(name) else label


def _with_current(options: list[tuple[str, Any]], current: Any, label: str) -> list[tuple[str, Any]]:
    """A loaded value the catalog does not offer stays visible (validation says what is wrong)."""
    if any(value == current for _, value in options):
        return options
    return options + [(label, current)]


def pool_view(state: dict[str, Any], pos: int) -> dict[str, Any]:
    """Everything a pool card shows: values, options, what is disabled or hidden."""
    pool = state["pools"][pos]
    machine = catalog.machine(pool["machine_type"])
    tpu_job = is_tpu_machine(state["pools"][0]["machine_type"])
    active = pos == 0 or pool["enabled"]
    reducer = pos == 2 and pool["mode"] == REDUCTION_SERVER
    fixed = machine.fixed_accelerator if machine else None
    accel, count = pool["accelerator_type"], pool["accelerator_count"]
    topologies = topology_options(pool["machine_type"])
    title = "Reduction Server" if reducer else POOL_TITLES[pos]
    view = {
        "pos": pos, "title": f"{pos} · {title}", "enabled": active,
        # a TPU job has one pool: other pools may only be switched off
        "toggle_disabled": pos == 0 or (tpu_job and not pool["enabled"]),
        "mode": pool["mode"] if pos == 2 else None,
        "replica_count": pool["replica_count"], "replicas_disabled": pos == 0,
        "machine_type": pool["machine_type"],
        "machine_options": _with_current(machine_options(include_tpu=pos == 0), pool["machine_type"],
                                         pool["machine_type"] or "(none)"),
        "accelerator_type": accel,
        "accelerator_type_options": _with_current(accelerator_type_options(pool["machine_type"]), accel,
                                                  _accelerator_label(accel)),
        "accelerator_count": count,
        "accelerator_count_options": _with_current(accelerator_count_options(pool["machine_type"], accel),
                                                   count, str(count)),
        "accelerators_fixed": fixed is not None and (accel, count) == fixed,
        "tpu_topology": pool["tpu_topology"],
        "topology_options": _with_current(topologies, pool["tpu_topology"], pool["tpu_topology"] or "(none)"),
        "show_topology": bool(topologies or pool["tpu_topology"]),
        "image": state["image"] if pos == 0 else pool["image"],
        "image_placeholder": catalog.reduction_server_image(state["region"]) if reducer else state["image"],
        "image_disabled": reducer,
        "boot_disk_type": pool["boot_disk_type"],
        "boot_disk_type_options": _with_current([(t, t) for t in validate.BOOT_DISK_TYPES], pool["boot_disk_type"],
                                                pool["boot_disk_type"] or "(none)"),
        "boot_disk_size_gb": pool["boot_disk_size_gb"],
        "suggestion": reducer_suggestion(state)[1] if reducer and active else "",
    }
    return view


# ---- Reduction Server ----------------------------------------------------------

def reducer_suggestion(state: dict[str, Any]) -> tuple[int, str]:
    """Reducers matching the bandwidth of pools 0 and 1, and the arithmetic as text."""
    try:
        job = build_job(state)
    except WorkbenchError as exc:  # a state the core cannot parse has no bandwidth
        return 0, f"no suggestion: {exc}"
    parts, pools = [], []
    for pos, pool in job.pools:
        if pos > 1:
            continue
        ms = pool.machine_spec
        accel = ms.accelerator_type.name if ms.accelerator_type else None
        gbps = catalog.egress_gbps(ms.machine_type, accel, ms.accelerator_count)
        pools.append((ms.machine_type, accel, ms.accelerator_count, pool.replica_count))
        gpus = f" with {ms.accelerator_count} x {catalog.accelerator_label(accel)}" if accel else ""
        speed = f" at {gbps:g} Gbps" if gbps else " (bandwidth unknown, counted as 0)"
        parts.append(f"{pool.replica_count} x {ms.machine_type}{gpus}{speed}")
    total = catalog.workers_bandwidth(pools)
    count, arithmetic = catalog.suggest_reducers(total)
    reducer = catalog.RECOMMENDED_REDUCER
    per = catalog.egress_gbps(reducer) or 0
    text = (f"Workers: {' + '.join(parts)} = {total:g} Gbps. Reducers: {arithmetic} "
            f"({count} x {reducer} = {count * per:g} Gbps).")
    return count, text


# ---- tables --------------------------------------------------------------------

def accelerators_text(ms: Any) -> str:
    if ms.accelerator_count and ms.accelerator_type:
        return f"{ms.accelerator_count} x {catalog.accelerator_label(ms.accelerator_type.name)}"
    if ms.tpu_topology:
        return f"TPU {ms.tpu_topology}"
    return "-"


def replica_frame(job: JobSpec) -> pd.DataFrame:
    """One row per replica: task name, role, machine, accelerators."""
    pools = dict(job.pools)
    rows = [{"task name": r.task_name, "role": r.role, "machine": pools[r.pool].machine_spec.machine_type,
             "accelerators": accelerators_text(pools[r.pool].machine_spec)} for r in cluster.replicas(job)]
    return pd.DataFrame(rows, columns=["task name", "role", "machine", "accelerators"])


INSPECTOR_COLUMNS = ["task_name", "role", "index", "address", "tf_config_task"]


def inspector_frame(replicas: list[cluster.Replica]) -> pd.DataFrame:
    """task_name, role, index, address (as `vtrain inspect --json`) and the TF_CONFIG task, e.g. chief:0."""
    rows = [{"task_name": r.task_name, "role": r.role, "index": r.index, "address": r.address,
             "tf_config_task": f"{r.tf_task}:{r.index}" if r.tf_task else "-"} for r in replicas]
    return pd.DataFrame(rows, columns=INSPECTOR_COLUMNS)


def env_json(replica: cluster.Replica, key: str) -> str:
    """CLUSTER_SPEC or TF_CONFIG pretty-printed; "" when the replica has none."""
    raw = replica.env.get(key)
    return json.dumps(json.loads(raw), indent=2) if raw else ""


# ---- exports -------------------------------------------------------------------

# top-level CustomJobSpec fields that have their own gcloud flag
_GCLOUD_FLAGS = {"serviceAccount": "--service-account", "network": "--network",
                 "enableWebAccess": "--enable-web-access", "enableDashboardAccess": "--enable-dashboard-access",
                 "persistentResourceId": "--persistent-resource-id"}


def gcloud_command(job: JobSpec, region: str) -> str:
    """`gcloud ai custom-jobs create ...` with one --worker-pool-spec per pool (gcloud's key names).

    What the flags cannot say (per-pool args, env, disks, scheduling, ...) is named in
    a comment: use `--config` with the config.yaml export for those jobs.
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
    if job.labels:
        flags.append("--labels=" + ",".join(f"{k}={v}" for k, v in job.labels.items()))
    lost += list(body)
    lines = ["gcloud ai custom-jobs create"] + [shlex.quote(f) for f in flags]
    text = " \\\n  ".join(lines) + "\n"
    if lost:
        text = (textwrap.fill(f"Not expressible as flags: {', '.join(lost)}.", 100, initial_indent="# ",
                              subsequent_indent="#   ") + "\n"
                f"# For this job use: gcloud ai custom-jobs create --region={shlex.quote(region)} "
                f"--display-name={shlex.quote(job.display_name)} --config=config.yaml\n") + text
    return text


def _pool_keys(pool: dict[str, Any], pos: int, shared: dict[str, list[str]], lost: list[str]) -> list[tuple[str, Any]]:
    if not pool:
        return []
    pool = copy.deepcopy(pool)
    ms = pool.pop("machineSpec", {})
    keys: list[tuple[str, Any]] = [("machine-type", ms.pop("machineType", "")),
                                   ("replica-count", pool.pop("replicaCount", 0))]
    if "acceleratorType" in ms:
        keys += [("accelerator-type", ms.pop("acceleratorType")), ("accelerator-count", ms.pop("acceleratorCount", 0))]
    if container := pool.pop("containerSpec", None):
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


# CustomJobSpec fields (SDK form) -> (where, keyword) in aiplatform.CustomJob(...) / .run(...)
_SDK_ARGS = {"base_output_dir": ("init", "base_output_dir"), "labels": ("init", "labels"),
             "persistent_resource_id": ("init", "persistent_resource_id"),
             "service_account": ("run", "service_account"), "network": ("run", "network"),
             "enable_web_access": ("run", "enable_web_access"), "tensorboard": ("run", "tensorboard")}
_SCHEDULING_ARGS = {"restart_job_on_worker_restart": "restart_job_on_worker_restart",
                    "disable_retries": "disable_retries"}


def sdk_snippet(job: JobSpec, region: str) -> str:
    """Python that creates and runs the same job with google-cloud-aiplatform."""
    body = job.to_dict("sdk")
    pools = body.pop("worker_pool_specs")
    name = body.pop("display_name")
    init: dict[str, Any] = {}
    run: dict[str, Any] = {}
    for key, (where, arg) in _SDK_ARGS.items():
        if key in body:
            (init if where == "init" else run)[arg] = body.pop(key)
    scheduling = body.pop("scheduling", {})
    if "timeout" in scheduling:
        run["timeout"] = int(float(scheduling.pop("timeout").rstrip("s")))
    for key, arg in _SCHEDULING_ARGS.items():
        if key in scheduling:
            run[arg] = scheduling.pop(key)
    lost = list(body) + [f"scheduling.{k}" for k in scheduling]
    lines = ["from google.cloud import aiplatform", "",
             f"aiplatform.init(project={'YOUR_PROJECT'!r}, location={region!r}, staging_bucket={'gs://YOUR_BUCKET'!r})",
             ""]
    if lost:
        lines.append(f"# Not set by this snippet: {', '.join(lost)} (see the config.yaml export)")
    lines += ["aiplatform.CustomJob(", f"    display_name={name!r},", "    worker_pool_specs=["]
    lines += ["        " + pprint.pformat(p, width=100, sort_dicts=False).replace("\n", "\n        ") + ","
              for p in pools]
    lines.append("    ],")
    lines += [f"    {k}={v!r}," for k, v in init.items()]
    lines.append(").run(" + ", ".join(f"{k}={v!r}" for k, v in run.items()) + ")")
    return "\n".join(lines) + "\n"


def config_yaml(job: JobSpec) -> str:
    """The gcloud `--config` file (a CustomJobSpec)."""
    return job.dump("gcloud", as_yaml=True)


EXPORTS = {"gcloud": "gcloud command", "sdk": "Python SDK", "yaml": "config.yaml"}


def export_text(job: JobSpec, kind: str, region: str) -> str:
    if kind == "gcloud":
        return gcloud_command(job, region)
    if kind == "sdk":
        return sdk_snippet(job, region)
    if kind == "yaml":
        return config_yaml(job)
    raise ValueError(f"unknown export {kind!r} (valid: {', '.join(EXPORTS)})")


# ---- topology picture -------------------------------------------------------------

_ROLE_COLOURS = {"primary": "#1a73e8", "worker": "#188038", "parameter_server": "#e37400",
                 "reduction_server": "#a142f4", "evaluator": "#5f6368"}
_BOX_W, _BOX_H, _GAP, _PAD, _HEAD = 300, 40, 8, 12, 26


def topology_svg(replicas: list[cluster.Replica], max_per_pool: int = 6) -> str:
    """Primary, workers and servers inside a frame (<g id="training-cluster">), evaluators
    outside it (<g id="evaluators">); one labelled box per replica with its address."""
    from html import escape

    by_pool: dict[int, list[cluster.Replica]] = {}
    for r in replicas:
        by_pool.setdefault(r.pool, []).append(r)

    def column(pos: int, x: int, y: int) -> tuple[str, int]:
        reps = by_pool[pos]
        title = {0: "primary", 1: "workers", 2: reps[0].role.replace("_", " ") + "s", 3: "evaluators"}[pos]
        parts = [f'<g class="pool" data-pool="{pos}">',
                 f'<text x="{x}" y="{y + 16}" class="pool-title">{escape(title)} ({len(reps)})</text>']
        top = y + _HEAD
        for r in reps[:max_per_pool]:
            colour = _ROLE_COLOURS.get(r.role, "#5f6368")
            tf = f" · {r.tf_task}:{r.index}" if r.tf_task else ""
            parts.append(
                f'<g class="replica" data-task="{escape(r.task_name)}" data-role="{escape(r.role)}">'
                f"<title>{escape(r.role)}</title>"
                f'<rect x="{x}" y="{top}" width="{_BOX_W}" height="{_BOX_H}" rx="5" fill="{colour}" '
                f'fill-opacity="0.12" stroke="{colour}"/>'
                f'<text x="{x + 8}" y="{top + 16}" font-weight="600">{escape(r.task_name + tf)}</text>'
                f'<text x="{x + 8}" y="{top + 32}" font-family="monospace" font-size="10">{escape(r.address)}</text>'
                "</g>")
            top += _BOX_H + _GAP
        if len(reps) > max_per_pool:
            parts.append(f'<text x="{x + 8}" y="{top + 14}" class="more">… and {len(reps) - max_per_pool} more '
                         f"(to {escape(reps[-1].task_name)})</text>")
            top += _BOX_H // 2 + _GAP
        parts.append("</g>")
        return "".join(parts), top

    x, bottom, cluster_parts = _PAD * 2, _PAD + 20, []
    for pos in (pos for pos in (0, 1, 2) if pos in by_pool):
        svg, top = column(pos, x, _PAD + 20)
        cluster_parts.append(svg)
        bottom = max(bottom, top)
        x += _BOX_W + _GAP * 2
    frame_w, frame_h = x - _GAP * 2, bottom - _PAD  # the frame spans x in [_PAD, _PAD + frame_w]
    width, height = _PAD * 2 + frame_w, bottom + _PAD
    evaluators = ""
    if 3 in by_pool:  # outside the frame: evaluators are not part of the training cluster
        svg, top = column(3, width + _PAD, _PAD + 20)
        evaluators = f'<g id="evaluators">{svg}</g>'
        width += _PAD + _BOX_W + _PAD
        height = max(height, top + _PAD)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" style="max-width:100%">'
            f'<g id="training-cluster"><rect x="{_PAD}" y="{_PAD}" width="{frame_w}" height="{frame_h}" rx="8" '
            f'fill="none" stroke="#9aa0a6" stroke-dasharray="6 4"/>'
            f'<text x="{_PAD * 2}" y="{_PAD + 14}" fill="#5f6368">training cluster</text>'
            f"{''.join(cluster_parts)}</g>{evaluators}</svg>")
