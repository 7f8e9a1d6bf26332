"""Machine types, accelerators, regions and Reduction Server facts for Vertex AI training.

The data lives in `data/catalog.json` (machines, families, accelerators; hand-written
from vertex-facts.md sections D and E) and `data/regions.json` (training regions and
which accelerators each offers, with the sources and the policy for what they do not
cover). This module only reads them and answers questions about them: valid counts,
per-VM egress and how many reducers a job's workers need (`reducer_suggestion`),
the CPU architecture and image platform of a machine or job (`image_platform`), and
what a region offers (`availability`, `unavailable`). It also holds the workbench's
defaults: `DEFAULT_MACHINE`, `DEFAULT_REGION` and `DEFAULT_PLATFORM`.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

from .errors import WorkbenchError

if TYPE_CHECKING:
    from .spec import JobSpec

DEFAULT_MACHINE = "n1-standard-4"  # the codelab's machine: every pool the user does not size
DEFAULT_REGION = "us-central1"  # where a job goes when no region is given
# CPU architecture (catalog.json `families`) -> the Docker platform an image must be built for
PLATFORMS = {"x86_64": "linux/amd64", "arm64": "linux/arm64"}
DEFAULT_PLATFORM = PLATFORMS["x86_64"]


def _frozen_map() -> Any:
    # Mapping fields are read-only views and left out of the hash (unhashable).
    return field(default_factory=lambda: MappingProxyType({}), hash=False)


@dataclass(frozen=True)
class Machine:
    """One machine type accepted for Vertex AI custom training."""

    name: str
    family: str
    kind: str  # "cpu", "gpu" or "tpu"
    vcpus: int | None
    memory_gb: float | None
    gpus: Mapping[str, tuple[int, ...]] = _frozen_map()
    fixed_accelerator: tuple[str, int] | None = None
    tpu_accelerators: Mapping[str, tuple[int, ...]] = _frozen_map()
    # cloud-tpu Pods: accelerator -> {"multiple_of": n}, beyond the listed counts (catalog.json `_tpu_counts_note`)
    tpu_pod_counts: Mapping[str, Mapping[str, int]] = _frozen_map()
    tpu_topologies: Mapping[str, tuple[int, int]] = _frozen_map()
    tpu_accelerator_optional: tuple[str, ...] = ()
    bandwidth_gbps: float | None = None
    architecture: str = "x86_64"
    restricted: str = ""  # why not everyone can use it, e.g. TPU7x

    @property
    def label(self) -> str:
        """E.g. "n1-standard-8 — 8 vCPU, 30 GB"; just the name when sizes are unknown."""
        sizes = "" if self.vcpus is None or self.memory_gb is None else \
            f" — {self.vcpus} vCPU, {self.memory_gb:g} GB"
        arch = f" ({self.architecture})" if self.architecture != "x86_64" else ""
        return f"{self.name}{sizes}{arch}" + (" (restricted)" if self.restricted else "")


def _machine(d: dict[str, Any]) -> Machine:
    fixed = d.get("fixed_accelerator")
    return Machine(
        name=d["name"],
        family=d["family"],
        kind=d["kind"],
        vcpus=d.get("vcpus"),
        memory_gb=d.get("memory_gb"),
        gpus=MappingProxyType({k: tuple(v) for k, v in d.get("gpus", {}).items()}),
        fixed_accelerator=(fixed["type"], fixed["count"]) if fixed else None,
        tpu_accelerators=MappingProxyType(
            {k: tuple(v) for k, v in d.get("tpu_accelerators", {}).items()}
        ),
        tpu_pod_counts=MappingProxyType(
            {k: MappingProxyType(dict(v)) for k, v in d.get("tpu_pod_counts", {}).items()}
        ),
        tpu_topologies=MappingProxyType(
            {k: (v[0], v[1]) for k, v in d.get("tpu_topologies", {}).items()}
        ),
        tpu_accelerator_optional=tuple(d.get("tpu_accelerator_optional", ())),
        bandwidth_gbps=d.get("bandwidth_gbps"),
        architecture=_data()["families"][d["family"]]["architecture"],
        restricted=d.get("restricted", ""),
    )


def _read(name: str) -> dict[str, Any]:
    path = resources.files(__package__).joinpath("data").joinpath(name)
    return json.loads(path.read_text("utf-8"))


@cache
def _data() -> dict[str, Any]:
    return _read("catalog.json")


@cache
def _regions() -> dict[str, Any]:
    return _read("regions.json")


@cache
def _machines() -> dict[str, Machine]:
    return {d["name"]: _machine(d) for d in _data()["machines"]}


def data_problems() -> list[str]:
    """What is wrong with the data files: accelerators the API does not know, or without an entry."""
    from google.cloud.aiplatform_v1.types import AcceleratorType

    accelerators = _data()["accelerators"]
    used = set(accelerators)
    for m in _machines().values():
        used |= set(m.gpus) | set(m.tpu_accelerators) | set(m.tpu_accelerator_optional)
        if m.fixed_accelerator:
            used.add(m.fixed_accelerator[0])
    regions = _regions()["accelerators"]
    used |= set(regions["covers"]) | {a for names in regions["regions"].values() for a in names}
    found = []
    if bad := sorted(used - set(AcceleratorType.__members__)):
        found.append(f"catalog.json/regions.json name unknown AcceleratorType members: {bad}")
    if missing := sorted(used - set(accelerators)):
        found.append(f"catalog.json 'accelerators' lacks: {missing}")
    if unknown := sorted(set(regions["regions"]) - set(_regions()["training_regions"])):
        found.append(f"regions.json lists accelerators for regions that are not training regions: {unknown}")
    return found

RECOMMENDED_REDUCER: str = _data()["recommended_reducer"]


def machine(name: str) -> Machine | None:
    """The machine type called `name`, or None if training does not accept it."""
    return _machines().get(name)


def machines() -> list[Machine]:
    """All machine types, in file order."""
    return list(_machines().values())


def machine_names() -> list[str]:
    """All machine type names, in file order."""
    return list(_machines())


def families() -> dict[str, list[Machine]]:
    """Machines grouped by family ("n1", "a2", "ct5lp", ...), in file order."""
    out: dict[str, list[Machine]] = {}
    for m in _machines().values():
        out.setdefault(m.family, []).append(m)
    return out


def valid_accelerators(machine_name: str) -> dict[str, tuple[int, ...]]:
    """Accelerator type -> valid counts on this machine.

    {} for CPU-only machines, unknown names and topology-based TPU machines
    (ct5lp/ct6e/tpu7x, sized by tpuTopology instead).
    """
    m = machine(machine_name)
    if m is None:
        return {}
    if m.fixed_accelerator:
        kind, count = m.fixed_accelerator
        return {kind: (count,)}
    return dict(m.gpus) or dict(m.tpu_accelerators)


def is_valid_count(machine_name: str, accelerator: str, count: int) -> bool:
    """True if `count` accelerators of this type may run on this machine (a listed count, which for
    TPU v3 holds every Pod slice, or a TPU v2 Pod size: a multiple of 32)."""
    m = machine(machine_name)
    if count in valid_accelerators(machine_name).get(accelerator, ()):
        return True
    pod = m.tpu_pod_counts.get(accelerator) if m else None
    return bool(pod) and count > 0 and count % pod["multiple_of"] == 0


def count_rule(machine_name: str, accelerator: str) -> str:
    """The valid counts as text, e.g. "1, 2, 4" or "8, or a multiple of 32"."""
    m = machine(machine_name)
    counts = valid_accelerators(machine_name).get(accelerator, ())
    pod = m.tpu_pod_counts.get(accelerator) if m else None
    if not pod:
        return ", ".join(map(str, counts))
    size = pod["multiple_of"]
    return f"{', '.join(str(c) for c in counts if c < size)}, or a multiple of {size}"


def accelerator_names() -> list[str]:
    """All accelerator enum names except ACCELERATOR_TYPE_UNSPECIFIED."""
    return list(_data()["accelerators"])


def accelerator_label(name: str) -> str:
    """Human name, e.g. "NVIDIA T4"; the name itself if unknown."""
    return _data()["accelerators"].get(name, {}).get("label", name)


def accelerator_kind(name: str) -> str:
    """"gpu" or "tpu"; "" if unknown."""
    return _data()["accelerators"].get(name, {}).get("kind", "")


def is_deprecated(name: str) -> bool:
    """True for accelerators past or near end of support (K80, P100): warned about, hidden from pickers."""
    return bool(_data()["accelerators"].get(name, {}).get("deprecated", False))


def end_of_support(name: str) -> str:
    """The date support ends or ended (e.g. "2026-09-15" for P100), "" if none is recorded."""
    return _data()["accelerators"].get(name, {}).get("end_of_support", "")


def training_note(name: str) -> str:
    """Why no training machine takes this accelerator (TPU_V4_POD); "" for the others."""
    info = _data()["accelerators"].get(name, {})
    return "" if info.get("training", True) else info.get("note", "no training machine type takes it")


def flex_start_accelerators() -> list[str]:
    """The accelerators the Dynamic Workload Scheduler (scheduling.strategy FLEX_START) takes."""
    return [name for name, info in _data()["accelerators"].items() if info.get("flex_start")]


def supports_mig(name: str) -> bool:
    """True for GPUs with Multi-Instance GPU partitions (machineSpec.gpuPartitionSize)."""
    return bool(_data()["accelerators"].get(name, {}).get("mig", False))


def implied_accelerator(machine_name: str, accelerator: str = "") -> str:
    """The accelerator a pool runs: the one it names, else its machine's fixed GPU or TPU type, else ""."""
    m = machine(machine_name)
    if accelerator or m is None:
        return accelerator
    if m.fixed_accelerator:
        return m.fixed_accelerator[0]
    return m.tpu_accelerator_optional[0] if m.tpu_accelerator_optional else ""


def is_tpu_machine(machine_name: str) -> bool:
    """A TPU machine (`cloud-tpu`, `ct5lp-hightpu-4t`...): a TPU job runs it in its one pool."""
    found = machine(machine_name)
    return found is not None and found.kind == "tpu"


def is_tpu_pod(machine_name: str, accelerator_count: int = 0, tpu_topology: str = "") -> bool:
    """True for a multi-host TPU slice: cloud-tpu beyond 8 cores, or a topology of more than one VM."""
    m = machine(machine_name)
    if m is None or m.kind != "tpu":
        return False
    if m.tpu_topologies:
        return m.tpu_topologies.get(tpu_topology, (0, 1))[1] > 1
    return accelerator_count > 8


def close_machine_names(name: str, n: int = 3) -> list[str]:
    """Up to `n` known machine names resembling `name`, for "did you mean" messages."""
    return difflib.get_close_matches(name, machine_names(), n=n, cutoff=0.6)


def reduction_server_image(region: str | None = None) -> str:
    """Reduction Server image nearest `region` (us/europe/asia by prefix; default us)."""
    images = _data()["reduction_server_images"]
    prefix = (region or "").split("-", 1)[0].lower()
    return images.get(prefix, images["us"])


def is_reduction_server_image(uri: str) -> bool:
    """True if `uri` is one of the Reduction Server images (any tag)."""
    def repository(u: str) -> str:
        u = u.split("@", 1)[0]
        head, _, last = u.rpartition("/")
        return f"{head}/{last.split(':', 1)[0]}"

    images = _data()["reduction_server_images"].values()
    return any(repository(uri) == repository(image) for image in images)


def egress_gbps(
    machine_name: str, accelerator_type: str | None = None, accelerator_count: int = 0
) -> float | None:
    """Per-VM egress bandwidth in Gbps, or None when unknown (catalog.json `_bandwidth_note`)."""
    m = machine(machine_name)
    if m is None:
        return None
    family = _data()["families"][m.family]
    for special in family.get("accelerator_egress", []):
        if (special["accelerator"], special["count"]) == (accelerator_type, accelerator_count):
            return float(special["gbps"])
    if m.bandwidth_gbps is not None:
        return float(m.bandwidth_gbps)
    rule = family.get("egress")
    if rule and m.vcpus:
        return float(min(rule["gbps_per_vcpu"] * m.vcpus, rule["max_gbps"]))
    return None


def workers_bandwidth(pools: list[tuple[str, str | None, int, int]]) -> float:
    """Total egress of the pools: per-VM egress x replicas, summed.

    Each pool is (machine_type, accelerator_type, accelerator_count, replica_count);
    machines with unknown bandwidth count as 0.
    """
    return sum(
        (egress_gbps(mt, at, ac) or 0.0) * replicas for mt, at, ac, replicas in pools
    )


def suggest_reducers(
    worker_gbps_total: float, reducer_machine: str = RECOMMENDED_REDUCER
) -> tuple[int, str]:
    """Reducers needed so pool 2 bandwidth matches pools 0+1, and the arithmetic.

    E.g. (16, "500 Gbps / 32 Gbps per n1-highcpu-16 = 15.6 -> 16 reducers").
    """
    per = egress_gbps(reducer_machine)
    if not per:
        raise ValueError(f"no bandwidth known for reducer machine {reducer_machine!r}")
    ratio = worker_gbps_total / per
    count = math.ceil(round(ratio, 9))  # float noise like 25.000000001 must not become 26
    text = (
        f"{worker_gbps_total:g} Gbps / {per:g} Gbps per {reducer_machine} = "
        f"{round(ratio, 1):g} -> {count} reducer{'s' if count != 1 else ''}"
    )
    return count, text


def reducer_suggestion(job: JobSpec) -> tuple[int, str]:
    """Reducers matching the bandwidth of the job's pools 0 and 1, and the arithmetic as text.

    E.g. (16, "Workers: 1 x n1-highmem-96 with 8 x NVIDIA V100 at 100 Gbps + 4 x ... = 500 Gbps.
    Reducers: 500 Gbps / 32 Gbps per n1-highcpu-16 = 15.6 -> 16 reducers (16 x n1-highcpu-16 = 512 Gbps).")
    """
    parts: list[str] = []
    pools: list[tuple[str, str | None, int, int]] = []
    for pos, pool in job.pools:
        if pos > 1:
            continue
        ms = pool.machine_spec
        accel = ms.accelerator_type.name if ms.accelerator_type else None
        gbps = egress_gbps(ms.machine_type, accel, ms.accelerator_count)
        pools.append((ms.machine_type, accel, ms.accelerator_count, pool.replica_count))
        gpus = f" with {ms.accelerator_count} x {accelerator_label(accel)}" if accel else ""
        speed = f" at {gbps:g} Gbps" if gbps else " (bandwidth unknown, counted as 0)"
        parts.append(f"{pool.replica_count} x {ms.machine_type}{gpus}{speed}")
    total = workers_bandwidth(pools)
    count, arithmetic = suggest_reducers(total)
    per = egress_gbps(RECOMMENDED_REDUCER) or 0
    text = (f"Workers: {' + '.join(parts)} = {total:g} Gbps. Reducers: {arithmetic} "
            f"({count} x {RECOMMENDED_REDUCER} = {count * per:g} Gbps).")
    return count, text


# ---- CPU architecture: the platform an image is built for -------------------------------------

def platform(machine_name: str) -> str:
    """The Docker platform images for this machine are built for: linux/arm64 on arm64 machines
    (A4X, Grace CPUs), else (and for unknown names) linux/amd64."""
    m = machine(machine_name)
    return PLATFORMS[m.architecture] if m else DEFAULT_PLATFORM


def image_platform(job: JobSpec) -> str:
    """The platform the job's trainer image must be built for: its training pools' (a Reduction Server
    pool runs Google's image). One image cannot serve two architectures: that is a WorkbenchError."""
    found: dict[str, str] = {}
    for pos, pool in job.training_pools():
        found.setdefault(platform(pool.machine_spec.machine_type), f"workerPoolSpecs[{pos}]")
    if len(found) > 1:
        mixed = ", ".join(f"{where} {plat}" for plat, where in found.items())
        raise WorkbenchError(f"machineSpec.machineType: one trainer image cannot run on two CPU architectures "
                             f"({mixed}); use machines of one architecture")
    return next(iter(found), DEFAULT_PLATFORM)


# ---- regions: what Vertex AI training offers where (data/regions.json) ------------------------

class Availability(NamedTuple):
    """Whether a region offers an accelerator: status "offered", "unavailable" or "unknown" (the data
    does not say: allowed, with a notice), and why, in one line ("" when offered)."""

    status: str
    reason: str


def training_regions() -> list[str]:
    """The regions Vertex AI custom training runs in (gcloud's list; see regions.json)."""
    return list(_regions()["training_regions"])


def region_data_age() -> str:
    """How old the per-region accelerator data is (regions.json `accelerators_as_of`)."""
    return str(_regions()["accelerators_as_of"])


def availability(region: str, machine_name: str, accelerator: str = "", count: int = 0) -> Availability:
    """What `region` offers of this machine with `count` of this accelerator (for a GPU machine or a
    ct5lp TPU, the accelerator it implies; a count of 0: any). CPU-only machines are offered in every
    training region."""
    if region not in _regions()["training_regions"]:
        close = difflib.get_close_matches(region, training_regions(), n=2, cutoff=0.8)
        hint = f"; did you mean {' or '.join(close)}" if close else ""
        return Availability("unavailable", f"Vertex AI custom training is not offered in {region!r} "
                                           f"(not one of gcloud's training regions{hint})")
    accelerator = implied_accelerator(machine_name, accelerator)
    m = machine(machine_name)
    if not accelerator:
        if m is not None and m.kind == "tpu":  # ct6e, tpu7x: no AcceleratorType to look up
            return Availability("unknown", f"the workbench's region data does not cover {machine_name} in "
                                           f"{region}: allowed; check Google's locations page")
        return Availability("offered", "")
    data = _regions()["accelerators"]
    offered = data["regions"].get(region)
    if offered is None or accelerator not in data["covers"]:
        return Availability("unknown", f"the workbench's region data does not cover {accelerator} in {region}: "
                                       "allowed; check Google's locations page")
    if accelerator in data["single_host_only"].get(region, ()) and is_tpu_pod(machine_name, count):
        return Availability("unavailable", f"a {accelerator_label(accelerator)} Pod slice ({count} cores) is not "
                                           f"offered for Vertex AI training in {region}, only a single host (8 "
                                           f"cores; region data of {region_data_age()}, see the README)")
    if accelerator in offered:
        return Availability("offered", "")
    there = ", ".join(accelerator_label(a) for a in offered) or "none"
    return Availability("unavailable", f"{accelerator_label(accelerator)} ({accelerator}) is not offered for "
                                       f"Vertex AI training in {region} (offered there: {there}; region data "
                                       f"of {region_data_age()}, see the README)")


def unavailable(region: str, machine_name: str, accelerator: str = "", count: int = 0) -> str | None:
    """Why `region` does not offer this machine/accelerator, or None if it does or the data does not say."""
    found = availability(region, machine_name, accelerator, count)
    return found.reason if found.status == "unavailable" else None
