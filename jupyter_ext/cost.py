"""What a job costs per hour: an estimate per pool and for the whole job, on demand and Spot.

`estimate(job, region)` prices every pool from `data/prices.json`: replicas x (the machine's price +
accelerator count x the accelerator's price), in USD per hour. The prices are Compute Engine list
prices from a third-party catalog, copied on the date the file names; Vertex AI's own training prices
could not be read (prices.json says why and what was left out). So every figure is labelled an
estimate with that date, and a pool whose machine or accelerator has no price in the region is named
as not priced, never guessed: the totals then cover the priced pools only and say so.

`Estimate.text()` is what `vtrain cost` and the dry run print; `Estimate.summary()` is the one
line the configurator shows; both lead with Spot prices when the job asks for Spot VMs. Nothing here
imports widgets or the client library's services.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from .tables import text_table

if TYPE_CHECKING:
    from .spec import JobSpec


@cache
def _prices() -> dict[str, Any]:
    path = resources.files(__package__).joinpath("data").joinpath("prices.json")
    return json.loads(path.read_text("utf-8"))


def prices_date() -> str:
    """When the prices were copied (prices.json `date`)."""
    return str(_prices()["date"])


def money(value: float) -> str:
    return f"${value:,.4f}"


@dataclass(frozen=True)
class PoolCost:
    """One pool: its shape and the price of one replica per hour (None where a part has no price)."""

    position: int
    replicas: int
    machine_type: str
    accelerator: str  # the AcceleratorType name, "" for none
    accelerator_count: int
    on_demand: float | None
    spot: float | None
    missing: tuple[str, ...]  # what has no price, e.g. "NVIDIA_H100_80GB in us-east4"

    def total(self, spot: bool = False) -> float | None:
        each = self.spot if spot else self.on_demand
        return None if each is None else each * self.replicas


@dataclass(frozen=True)
class Estimate:
    """Every pool's cost in `region`, and the job's: the sum of the pools that have prices."""

    job_name: str
    region: str
    pools: tuple[PoolCost, ...]
    flex_start: bool = False  # priced on demand: the Dynamic Workload Scheduler's prices are not in the data
    spot_strategy: bool = False  # the job asks for Spot VMs (spot_by_default): its figures lead with Spot

    def total(self, spot: bool = False) -> float:
        return sum(t for p in self.pools if (t := p.total(spot)) is not None)

    @property
    def on_demand(self) -> float:
        return self.total(spot=False)

    @property
    def spot(self) -> float:
        return self.total(spot=True)

    @property
    def unpriced(self) -> list[str]:
        """One line per pool without a price, naming the pool and what has none."""
        return [f"workerPoolSpecs[{p.position}]: no price for {', '.join(p.missing)}" for p in self.pools if p.missing]

    @property
    def label(self) -> str:
        """What the figures are: an estimate, from which prices, of which date."""
        return f"estimate: {_prices()['label']}, copied {prices_date()} ({_prices()['prices_as_of']})"

    def summary(self) -> str:
        """One line, e.g. "$0.3800/h on demand, $0.0963/h Spot (estimate: ..., copied 2026-11-23)"."""
        if not any(p.on_demand is not None for p in self.pools):
            return f"No cost estimate for {self.region}: {'; '.join(self.unpriced) or 'no pools'}"
        partial = f"; {len(self.unpriced)} pool(s) not priced" if self.unpriced else ""
        figures = [f"{money(self.on_demand)}/h on demand", f"{money(self.spot)}/h Spot"]
        return f"{', '.join(figures[::-1] if self.spot_strategy else figures)}{partial} ({self.label})"

    def text(self, spot: bool | None = None) -> str:
        """A table of the pools, the total per hour (Spot prices with `spot`; default: when the job asks
        for Spot VMs), what is not priced."""
        spot = self.spot_strategy if spot is None else spot
        kind = "Spot" if spot else "on demand"
        rows = [("POOL", "REPLICAS", "MACHINE", "ACCELERATORS", "EACH", "POOL/H")]
        for p in self.pools:
            each, total = (p.spot if spot else p.on_demand), p.total(spot)
            rows.append((str(p.position), str(p.replicas), p.machine_type,
                         f"{p.accelerator_count} x {p.accelerator}" if p.accelerator else "-",
                         "-" if each is None else money(each), "-" if total is None else money(total)))
        lines = [f"Cost of {self.job_name} in {self.region}, USD per hour, {kind} prices", *text_table(rows)]
        other = "on demand" if spot else "Spot"
        if not any(p.on_demand is not None for p in self.pools):
            lines.append(f"Total: not priced (no prices for this job's machines in {self.region})")
        else:
            of = " of the priced pools" if self.unpriced else ""
            lines.append(f"Total{of}: {money(self.total(spot))} per hour {kind} "
                         f"({money(self.total(not spot))} {other})")
        if self.flex_start:
            lines.append("Note: FLEX_START prices are not in the data; on-demand and Spot prices are shown")
        lines += [f"Not priced: {line}" for line in self.unpriced]
        lines.append(f"An {self.label}. See the README, 'Scheduling, regions and cost'.")
        return "\n".join(lines) + "\n"


def parallel_trials(trial: Estimate, parallel: int, spot: bool = False) -> str:
    """A tuning job's cost per hour: each trial costs what `trial` says, and `parallel` run at once."""
    kind = "Spot" if spot else "on demand"
    if not any(p.on_demand is not None for p in trial.pools):
        return f"Tuning job: {parallel} trial(s) at once (parallelTrialCount); not priced"
    of = " of the priced pools" if trial.unpriced else ""
    return (f"Tuning job: the table is one trial; {parallel} run at once (parallelTrialCount): up to "
            f"{money(parallel * trial.total(spot))} per hour {kind}{of} ({money(parallel * trial.total(not spot))} "
            f"{'on demand' if spot else 'Spot'})")


def estimate(job: JobSpec, region: str) -> Estimate:
    """The job's cost per hour in `region`, pool by pool."""
    from google.cloud.aiplatform_v1 import types as v1

    prices = _prices()["regions"].get(region, {"machines": {}, "accelerators": {}})
    pools = []
    for pos, pool in job.pools:
        ms = pool.machine_spec
        accel = ms.accelerator_type.name if ms.accelerator_type and ms.accelerator_count else ""
        parts = [(ms.machine_type, 1, prices["machines"].get(ms.machine_type))]
        if accel:
            parts.append((accel, ms.accelerator_count, prices["accelerators"].get(accel)))
        missing = tuple(f"{name} in {region}" for name, _, price in parts if price is None)
        on_demand = spot = None
        if not missing:
            on_demand = sum(count * price["on_demand"] for _, count, price in parts)
            spot = sum(count * price["spot"] for _, count, price in parts)
        pools.append(PoolCost(pos, pool.replica_count, ms.machine_type, accel, ms.accelerator_count if accel else 0,
                              on_demand, spot, missing))
    flex = job.spec.scheduling.strategy == v1.Scheduling.Strategy.FLEX_START
    return Estimate(job.display_name, region, tuple(pools), flex_start=flex, spot_strategy=spot_by_default(job))


def spot_by_default(job: JobSpec) -> bool:
    """True when the job asks for Spot VMs (scheduling.strategy SPOT): its cost is the Spot price."""
    from google.cloud.aiplatform_v1 import types as v1

    return job.spec.scheduling.strategy == v1.Scheduling.Strategy.SPOT
