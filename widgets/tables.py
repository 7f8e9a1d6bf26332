"""The tables the widgets show, as DataFrames, and the environment text of one replica.

Every row comes from `cluster.replicas`, the function the runner and `vtrain
inspect` use, so the tables list exactly the replicas a job will run.
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


def replica_frame(job: JobSpec) -> pd.DataFrame:
    """One row per replica: task name, role, machine, accelerators."""
    pools = dict(job.pools)
    rows = [{"task name": r.task_name, "role": r.role, "machine": pools[r.pool].machine_spec.machine_type,
             "accelerators": accelerators_text(pools[r.pool].machine_spec)} for r in cluster.replicas(job)]
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
