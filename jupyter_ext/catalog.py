"""Machine types, accelerators and Reduction Server facts for Vertex AI training.

The data lives in `data/catalog.json`, hand-written from vertex-facts.md
sections D and E. This module only reads it and answers questions about it,
including how many reducers a job's workers need (`reducer_suggestion`). It also
holds the workbench's defaults: `DEFAULT_MACHINE` and `DEFAULT_REGION`.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .spec import JobSpec

DEFAULT_MACHINE = "n1-standard-4"  # the codelab's machine: every pool the user does not size
DEFAULT_REGION = "us-central1"  # where a job goes when no region is given


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
    tpu_topologies: Mapping[str, tuple[int, int]] = _frozen_map()
    tpu_accelerator_optional: tuple[str, ...] = ()
    bandwidth_gbps: float | None = None

    @property
    def label(self) -> str:
        """E.g. "n1-standard-8 — 8 vCPU, 30 GB"; just the name when sizes are unknown."""
        if self.vcpus is None or self.memory_gb is None:
            return self.name
        return f"{self.name} — {self.vcpus} vCPU, {self.memory_gb:g} GB"


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
        tpu_topologies=MappingProxyType(
            {k: (v[0], v[1]) for k, v in d.get("tpu_topologies", {}).items()}
        ),
        tpu_accelerator_optional=tuple(d.get("tpu_accelerator_optional", ())),
        bandwidth_gbps=d.get("bandwidth_gbps"),
    )


@cache
def _data() -> dict[str, Any]:
    path = resources.files(__package__).joinpath("data").joinpath("catalog.json")
    return json.loads(path.read_text("utf-8"))


@cache
def _machines() -> dict[str, Machine]:
    return {d["name"]: _machine(d) for d in _data()["machines"]}


def data_problems() -> list[str]:
    """What is wrong with the data file: accelerators the API does not know, or without an entry."""
    from google.cloud.aiplatform_v1.types import AcceleratorType

    accelerators = _data()["accelerators"]
    used = set(accelerators)
    for m in _machines().values():
        used |= set(m.gpus) | set(m.tpu_accelerators) | set(m.tpu_accelerator_optional)
        if m.fixed_accelerator:
            used.add(m.fixed_accelerator[0])
    found = []
    if bad := sorted(used - set(AcceleratorType.__members__)):
        found.append(f"catalog.json names unknown AcceleratorType members: {bad}")
    if missing := sorted(used - set(accelerators)):
        found.append(f"catalog.json 'accelerators' lacks: {missing}")
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
    """True for accelerators past or near end of support (K80, P100)."""
    return bool(_data()["accelerators"].get(name, {}).get("deprecated", False))


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
    """Per-VM egress bandwidth in Gbps, or None when unknown."""
    m = machine(machine_name)
    if m is None:
        return None
    if m.family == "n1" and accelerator_type == "NVIDIA_TESLA_V100" and accelerator_count == 8:
        return 100.0
    if m.bandwidth_gbps is not None:
        return float(m.bandwidth_gbps)
    if m.kind == "cpu" and m.vcpus:
        # The workbench's estimate, not a Vertex fact: Compute Engine's usual
        # 2 Gbps per vCPU, capped at 32 Gbps.
        return float(min(2 * m.vcpus, 32))
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
