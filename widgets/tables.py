"""The tables the widgets show, as DataFrames, and the environment text of one replica.

Every row comes from `cluster.replicas`, the function the runner and `vtrain
inspect` use, so the tables list exactly the replicas a job will run. `replica_frame`
lists the first replicas of each pool only: a pool may hold 10**12 replicas, and
`cluster.replicas` builds each one's environment, which names every other.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from jupyter_ext import catalog, cluster
from jupyter_ext.spec import JobSpec

INSPECTOR_COLUMNS = ["task_name", "role", "index", "address", "tf_config_task"]


def accelerators_text(ms: Any) -> str:
    """A MachineSpec's accelerators, e.g. "2 x NVIDIA V100" or "TPU 2x2"; "-" for none."""
    if ms.accelerator_count and ms.accelerator_type:
        return f"{ms.accelerator_count} x {catalog.accelerator_label(ms.accelerator_type.name)}"
    if ms.tpu_topology:
        return f"TPU {ms.tpu_topology}"
    return "-"


LISTED_PER_POOL = 10  # replicas of a pool the replica table lists: 4 pools fit in one screen


def replica_frame(job: JobSpec, per_pool: int = LISTED_PER_POOL) -> pd.DataFrame:
    """One row per replica (task name, role, machine, accelerators), at most `per_pool` of each
    pool: a pool with more ends in one row saying how many more it has and the last one's name."""
    listed = job.copy()  # the same pools, each cut to `per_pool` replicas: same names and roles
    for _, pool in listed.pools:
        pool.replica_count = min(pool.replica_count, per_pool)
    pools = dict(job.pools)
    rows = []
    for r in cluster.replicas(listed):
        ms, count = pools[r.pool].machine_spec, pools[r.pool].replica_count
        row = {"role": r.role, "machine": ms.machine_type, "accelerators": accelerators_text(ms)}
        rows.append({"task name": r.task_name, **row})
        if r.index == per_pool - 1 and count > per_pool:
            more = count - per_pool
            rows.append({"task name": f"… {more:,} more replica{'s' if more > 1 else ''} not listed "
                                      f"(to workerpool{r.pool}-{count - 1})", **row})
    return pd.DataFrame(rows, columns=["task name", "role", "machine", "accelerators"])


def inspector_frame(replicas: list[cluster.Replica]) -> pd.DataFrame:
    """task_name, role, index, address (as `vtrain inspect --json`) and the TF_CONFIG task, e.g. chief:0."""
    rows = [{"task_name": r.task_name, "role": r.role, "index": r.index, "address": r.address,
             "tf_config_task": f"{r.tf_task}:{r.index}" if r.tf_task else "-"} for r in replicas]
    return pd.DataFrame(rows, columns=INSPECTOR_COLUMNS)


def env_json(replica: cluster.Replica, key: str) -> str:
    """CLUSTER_SPEC or TF_CONFIG pretty-printed; "" when the replica has none."""
    raw = replica.env.get(key)
    return json.dumps(json.loads(raw), indent=2) if raw else ""
