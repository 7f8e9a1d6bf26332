"""The pool configurator's UI state: a plain dict, how one edit changes it, and the job it describes.

No widgets here, so everything is tested without a browser. `build_job(state)`
turns the state into the core's `JobSpec`, and `state_from_job(job)` goes back.
Every rule and every fact comes from the core (catalog, validate, spec,
packaging): this module only arranges it.

State layout::

    {"display_name": str, "region": str, "image": str,  # image: the primary's
     "pools": [pool, pool, pool, pool],                  # positions 0..3
     "access": {...},                                    # the "Scheduling & access" section
     "extra": {...}}                                     # what the UI does not edit

    pool = {"enabled", "replica_count", "machine_type", "accelerator_type",
            "accelerator_count", "tpu_topology", "image", "boot_disk_type",
            "boot_disk_size_gb", "mode", "base"}

A pool's `image` left empty means "the primary's image" (or, in Reduction Server
mode, the reducer image of the region). `base` holds the pool's REST fields the
cards do not edit (command, args, env, pythonPackageSpec, ...), so a loaded job
comes back unchanged; `None` means a pool made in the UI, which runs the
primary's code.

`access` holds the values of the scheduling and access flags the section edits
(`ACCESS_FIELDS`, keywords of `scheduling.apply`): strings as typed ("" for unset;
`reserved_ip_ranges` as comma-separated names) and booleans. `build_job` applies
them last, so they replace what the loaded job had; a `reservation` of None (the
pools use different ones) leaves the pools' own.

`problems(state)` are the core's rules in the chosen region; `notices(state)` and
`estimate(state)` (the cost per hour) follow the region too.
"""

from __future__ import annotations

import copy
from typing import Any

from jupyter_ext import catalog, cost, packaging, scheduling, validate
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.spec import JobSpec, is_empty_pool, is_reduction_server_pool, message_to_dict, pool_image

DEFAULT_NAME = "vertex-training-job"
DEFAULT_DISK_TYPE = validate.BOOT_DISK_TYPES[0]
DEFAULT_DISK_GB = validate.BOOT_DISK_GB[0]
PARAMETER_SERVER, REDUCTION_SERVER = "parameter_server", "reduction_server"
# machineSpec fields the cards edit; any other (reservationAffinity, ...) is kept from `base`
_MACHINE_KEYS = ("machineType", "acceleratorType", "acceleratorCount", "tpuTopology")
_CODE_KEYS = ("containerSpec", "pythonPackageSpec")
# the scheduling.apply() keywords the "Scheduling & access" section edits, and the CustomJobSpec
# keys they own (taken out of `extra`, so the section's values are the only ones). `scheduling` stays
# in `extra`: the section sets every field of it anyway, and scheduling.apply keeps a loaded job's
# deprecated strategy (ON_DEMAND, LOW_COST) only as that job's own.
ACCESS_FIELDS = ("strategy", "max_wait", "timeout", "restart", "disable_retries", "service_account", "network",
                 "reserved_ip_ranges", "web_access", "dashboard_access", "tensorboard", "reservation",
                 "persistent_resource")
_ACCESS_SPEC_KEYS = ("serviceAccount", "network", "reservedIpRanges", "enableWebAccess",
                     "enableDashboardAccess", "tensorboard", "persistentResourceId")


# ---- state -----------------------------------------------------------------

def default_pool(enabled: bool) -> dict[str, Any]:
    return {"enabled": enabled, "replica_count": 1, "machine_type": catalog.DEFAULT_MACHINE, "accelerator_type": "",
            "accelerator_count": 0, "tpu_topology": "", "image": "", "boot_disk_type": DEFAULT_DISK_TYPE,
            "boot_disk_size_gb": DEFAULT_DISK_GB, "mode": PARAMETER_SERVER, "base": None}


def default_access() -> dict[str, Any]:
    """Nothing set: Vertex AI's defaults (STANDARD, 7 days, no restarts, the default service account)."""
    return {key: False if key in ("restart", "disable_retries", "web_access", "dashboard_access") else ""
            for key in ACCESS_FIELDS}


def default_state(display_name: str = DEFAULT_NAME, region: str = catalog.DEFAULT_REGION,
                  image: str | None = None) -> dict[str, Any]:
    """The codelab's layout: a primary (chief) and one worker on the default machine,
    running the workbench's default base image unless `image` is given."""
    pools = [default_pool(True), default_pool(True), default_pool(False), default_pool(False)]
    return {"display_name": display_name, "region": region, "image": image or packaging.resolve_base_image(),
            "pools": pools, "access": default_access(), "extra": {}}


def update_access(state: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """The state after the user sets one field of the "Scheduling & access" section."""
    state = copy.deepcopy(state)
    state["access"][field] = value
    return state


def offered_in(region: str | None, machine_name: str, accelerator: str = "", count: int = 0) -> bool:
    """False only when the region data says `region` does not offer it (a count of 0: any); an unknown
    region or coverage is offered (validation names a bad region)."""
    if not region or region not in catalog.training_regions():
        return True
    return catalog.unavailable(region, machine_name, accelerator, count) is None


def offered_counts(machine_name: str, accelerator: str, region: str | None) -> tuple[int, ...]:
    """The counts of `accelerator` the catalog offers on the machine, less those `region` refuses
    (TPU Pod slices where it offers single hosts only); all of them where it refuses the accelerator
    itself (the accelerator picker does not offer it, and says why)."""
    counts = catalog.valid_accelerators(machine_name).get(accelerator, ())
    if not offered_in(region, machine_name, accelerator):
        return counts
    return tuple(c for c in counts if offered_in(region, machine_name, accelerator, c))


def update_pool(state: dict[str, Any], pos: int, field: str, value: Any) -> dict[str, Any]:
    """The state after the user sets one field of pool `pos`, with the pickers that
    depend on it moved to something the catalog offers in the state's region."""
    state = copy.deepcopy(state)
    pools = state["pools"]
    pool = pools[pos]
    if pos == 0 and field == "image":
        state["image"] = value
        return state
    pool[field] = value
    if field == "machine_type":
        _fit_accelerators(pool, state["region"])
        machine = catalog.machine(value)
        topologies = list(machine.tpu_topologies) if machine else []
        if pool["tpu_topology"] not in topologies:
            pool["tpu_topology"] = topologies[0] if topologies else ""
        if pos == 0 and catalog.is_tpu_machine(value):  # TPU jobs run one pool
            for other in pools[1:]:
                other["enabled"] = False
    elif field == "accelerator_type":
        offered = offered_counts(pool["machine_type"], value, state["region"])
        pool["accelerator_count"] = _fit_count(offered, pool["accelerator_count"]) if value else 0
    elif field == "mode":
        pool.update(enabled=True, image="", base=None)
        if value == REDUCTION_SERVER:  # reducers use no accelerators
            pool.update(machine_type=catalog.RECOMMENDED_REDUCER, accelerator_type="", accelerator_count=0,
                        tpu_topology="")
    pools[0]["enabled"] = True
    return state


def _fit_accelerators(pool: dict[str, Any], region: str) -> None:
    machine = catalog.machine(pool["machine_type"])
    offered = catalog.valid_accelerators(pool["machine_type"])
    if machine is not None and machine.fixed_accelerator:
        pool["accelerator_type"], pool["accelerator_count"] = machine.fixed_accelerator
        return
    if pool["accelerator_type"] not in offered:
        # cloud-tpu needs one: its first; other machines run without
        tpu = bool(offered) and machine is not None and machine.kind == "tpu"
        pool["accelerator_type"], pool["accelerator_count"] = (next(iter(offered)), 0) if tpu else ("", 0)
    if pool["accelerator_type"]:
        counts = offered_counts(pool["machine_type"], pool["accelerator_type"], region)
        pool["accelerator_count"] = _fit_count(counts, pool["accelerator_count"])


def _fit_count(counts: tuple[int, ...], current: int) -> int:
    """Keep `current` if offered, else the smallest offered count above it, else the largest."""
    if not counts or current in counts:
        return current if counts else 0
    return min((c for c in counts if c > current), default=max(counts))


def reducer_suggestion(state: dict[str, Any]) -> tuple[int, str]:
    """The core's `catalog.reducer_suggestion` of the job the state describes."""
    try:
        job = build_job(state)
    except WorkbenchError as exc:  # a state the core cannot parse has no bandwidth
        return 0, f"no suggestion: {exc}"
    return catalog.reducer_suggestion(job)


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
    job = extra.get("job")  # what the cards do not edit (labels, legacy options, encryption, a study)
    job = JobSpec(state["display_name"], spec) if job is None else \
        job.copy(display_name=state["display_name"], spec=spec)
    return scheduling.apply(job, **state["access"])


def problems(state: dict[str, Any]) -> tuple[JobSpec | None, list[str]]:
    """The job and validate.problems of it in the state's region; a job the core cannot parse gives
    its error."""
    try:
        job = build_job(state)
    except WorkbenchError as exc:
        return None, [str(exc)]
    return job, validate.problems(job, state["region"])


def notices(state: dict[str, Any], job: JobSpec | None) -> list[str]:
    """validate.notices of the job in the state's region ([] when there is no job)."""
    return validate.notices(job, state["region"]) if job is not None else []


def estimate(state: dict[str, Any], job: JobSpec | None, valid: bool = True) -> cost.Estimate | None:
    """What the job costs per hour in the state's region (None when there is no job, or it is not valid:
    a negative replica count has no price)."""
    return cost.estimate(job, state["region"]) if job is not None and valid else None


def _image_to_run(state: dict[str, Any], pos: int) -> str:
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
    image = _image_to_run(state, pos)
    if reducer:
        body.pop("pythonPackageSpec", None)
    if "pythonPackageSpec" in body:
        body["pythonPackageSpec"]["executorImageUri"] = image
    else:
        body.setdefault("containerSpec", {})["imageUri"] = image
    return body


# ---- job -> state -------------------------------------------------------------

def state_from_job(job: JobSpec, region: str = catalog.DEFAULT_REGION) -> dict[str, Any]:
    """The UI state of a job; `build_job(state_from_job(job)) == job`."""
    specs = list(job.spec.worker_pool_specs)
    primary_image = pool_image(specs[0]) if specs and not is_empty_pool(specs[0]) \
        else packaging.resolve_base_image()
    state_pools = [_pool_state(specs[pos] if pos < len(specs) else None, pos, primary_image, region)
                   for pos in range(4)]
    spec = message_to_dict(job.spec)
    for key in ("workerPoolSpecs", *_ACCESS_SPEC_KEYS):
        spec.pop(key, None)
    extra = {"spec": spec, "job": job.copy(), "pool_count": len(specs),
             "more_pools": [message_to_dict(p) for p in specs[4:]]}
    flags = scheduling.values(job)
    return {"display_name": job.display_name, "region": region, "image": primary_image, "pools": state_pools,
            "access": {key: flags[key] for key in ACCESS_FIELDS}, "extra": extra}


def _pool_state(spec: Any, pos: int, primary_image: str, region: str) -> dict[str, Any]:
    """The UI state of one parsed WorkerPoolSpec (None or empty: a pool the job does not use)."""
    if spec is None or is_empty_pool(spec):
        return default_pool(pos == 0)
    base = message_to_dict(spec)
    ms = base.pop("machineSpec", {})
    if kept := {k: v for k, v in ms.items() if k not in _MACHINE_KEYS}:
        base["machineSpec"] = kept
    disk = base.get("diskSpec", {})
    image = pool_image(spec)
    reducer = is_reduction_server_pool(pos, spec)
    default_image = catalog.reduction_server_image(region) if reducer else primary_image
    return {"enabled": True, "replica_count": int(base.pop("replicaCount", 0)),
            "machine_type": ms.get("machineType", ""), "accelerator_type": str(ms.get("acceleratorType", "")),
            "accelerator_count": int(ms.get("acceleratorCount", 0)), "tpu_topology": ms.get("tpuTopology", ""),
            "image": "" if pos == 0 or image == default_image else image,
            "boot_disk_type": disk.get("bootDiskType", DEFAULT_DISK_TYPE),
            "boot_disk_size_gb": int(disk.get("bootDiskSizeGb", DEFAULT_DISK_GB)),
            "mode": REDUCTION_SERVER if reducer else PARAMETER_SERVER, "base": base}
