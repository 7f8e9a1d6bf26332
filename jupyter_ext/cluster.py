"""What every replica of a job sees: its address and its full environment.

One pure function, `replicas()`, from (job, trial, address style) to the ordered
list of replicas (pool 0 first, then 1, 2, 3; by index inside a pool). The
inspector, the CLI and every runner backend use it, so a local replica gets the
same CLUSTER_SPEC, TF_CONFIG and AIP_* variables that Vertex AI would set.

The workbench's choices where Vertex's values are not published (vertex-facts.md,
UNCONFIRMED items), each covered by a test:
- CLUSTER_SPEC `task.trial` and TF_CONFIG `task.trial` are present only in tuning
  trials; `job` is the CustomJobSpec as a nested object with the API's camelCase keys.
- A single-replica job gets CLUSTER_SPEC keyed `workerpool0` and no TF_CONFIG.
- Reduction Server replicas (pool 2 running the reducer image) are in CLUSTER_SPEC
  but get no TF_CONFIG and are not in TF_CONFIG's `cluster` (they are not
  TensorFlow tasks), and have no PyTorch rank.
- CLOUD_ML_JOB_ID is the job's ID (the last part of its resource name); before a
  job exists (inspection) it is the display name.
- PyTorch: MASTER_ADDR/MASTER_PORT are the primary's address; RANK counts the
  primary, then workers, then parameter servers; WORLD_SIZE is that count. Every
  replica gets MASTER_ADDR/MASTER_PORT; evaluators get no RANK/WORLD_SIZE, as they
  are not in the training cluster.
- Cloud-style hosts follow Vertex's pattern `cmle-training-workerpool{P}-{hash}-{i}`
  with a hash of the job, port 2222.
- Legacy AI Platform mode (a job loaded from `trainingInput`): TF_CONFIG names the
  primary `master` unless `useChiefInTfConfig` is set or the job has evaluators;
  CLUSTER_SPEC uses AI Platform's task names (master, worker, ps, evaluator) and,
  as AI Platform says it "describes every replica", lists evaluators too; `job` is
  the trainingInput.

Displays pass `mask_env=True`: the `job` inside CLUSTER_SPEC and TF_CONFIG then shows every `env`
value as `***` (see `sensitive`); replicas themselves get the real values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import sensitive
from .errors import SpecError
from .names import ADDRESS_STYLES
from .spec import JobSpec, is_reduction_server_pool, message_to_dict

VERTEX_PORT = 2222
# Process-style ports when none are given (inspection): gcloud's local train default.
FIRST_LOCAL_PORT = 27182
ROLES = ("primary", "worker", "parameter_server", "evaluator")
TF_TASKS = ("chief", "worker", "ps", "evaluator")
PYTORCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")  # set below, for torch.distributed
LEGACY_TASKS = ("master", "worker", "ps", "evaluator")
# each replica's TF_CONFIG and CLUSTER_SPEC name every replica, so listing N replicas takes memory growing as
# N squared (about 48 MB for 1,000): beyond this a typo (replicaCount 1000000) would exhaust the machine
MAX_LISTED_REPLICAS = 1000


@dataclass(frozen=True)
class Replica:
    task_name: str  # workerpool{P}-{i}, as in Vertex's logs and webAccessUris
    pool: int
    index: int
    role: str  # primary, worker, parameter_server, reduction_server, evaluator
    tf_task: str | None  # TF_CONFIG task type, None when the job has no TF_CONFIG
    address: str  # host:port
    env: dict[str, str] = field(compare=False)

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def is_primary(self) -> bool:
        return self.pool == 0

    def to_dict(self) -> dict[str, Any]:
        return {"task_name": self.task_name, "pool": self.pool, "role": self.role, "index": self.index,
                "tf_task": self.tf_task, "address": self.address, "env": dict(self.env)}


def replicas(
    job: JobSpec,
    *,
    trial: str | int | None = None,
    style: str = "cloud",
    ports: Sequence[int] | None = None,
    job_id: str | None = None,
    output_dir: str | None = None,
    legacy: bool = False,
    mask_env: bool = False,
) -> list[Replica]:
    """Every replica of `job`, in pool order, with the environment Vertex would give it.

    `ports` (process style) gives one port per replica in order; `output_dir`
    replaces the job's base output directory (local runs map it to a folder);
    `legacy` gives AI Platform's names instead (what a trainingInput job got there: `master` unless
    useChiefInTfConfig, CLUSTER_SPEC's master/worker/ps/evaluator); a job runs with Vertex's, whatever
    format it came in, on Vertex AI and on this machine alike;
    `mask_env` shows the job's `env` values as *** (for display only).
    """
    if style not in ADDRESS_STYLES:
        raise SpecError("--addresses", f"unknown address style {style!r} (valid: {', '.join(ADDRESS_STYLES)})")
    trial_id = None if trial in (None, "") else str(trial)
    if job.replica_count > MAX_LISTED_REPLICAS:
        raise SpecError("workerPoolSpecs", f"{job.replica_count:,} replicas: too many to work out each one's "
                        f"environment here (at most {MAX_LISTED_REPLICAS:,}; every replica's names all the others)")
    slots = [(pos, i) for pos, pool in job.pools for i in range(pool.replica_count)]
    if not slots or slots[0][0] != 0:
        raise SpecError("workerPoolSpecs[0]", "the primary pool is required")
    if ports is not None and len(ports) != len(slots):
        raise ValueError(f"{len(slots)} replicas need {len(slots)} ports, got {len(ports)}")
    addresses = _addresses(job, slots, style, ports, legacy)
    reducer = _has_reduction_server(job)
    distributed = len(slots) > 1
    tf_names = _tf_task_names(job, legacy)

    def in_tf_cluster(pos: int) -> bool:
        return pos != 3 and not (pos == 2 and reducer)

    job_dict = sensitive.mask_job(_job_dict(job, legacy)) if mask_env else _job_dict(job, legacy)
    tf_cluster: dict[str, list[str]] = {}
    spec_cluster: dict[str, list[str]] = {}
    for (pos, _i), address in addresses.items():
        if in_tf_cluster(pos):
            tf_cluster.setdefault(tf_names[pos], []).append(address)
        spec_cluster.setdefault(LEGACY_TASKS[pos] if legacy else f"workerpool{pos}", []).append(address)
    ranks = {slot: r for r, slot in enumerate(s for s in slots if in_tf_cluster(s[0]))}
    primary_host, primary_port = addresses[slots[0]].rsplit(":", 1)
    base = output_dir if output_dir is not None else job.custom_job_spec().base_output_directory.output_uri_prefix
    job_id = job_id or job.display_name

    result = []
    for pos, i in slots:
        task: dict[str, Any] = {"type": LEGACY_TASKS[pos] if legacy else f"workerpool{pos}", "index": i}
        if trial_id:
            task["trial"] = trial_id
        env = {"CLUSTER_SPEC": _json({"cluster": spec_cluster, "environment": "cloud", "task": task, "job": job_dict}),
               "CLOUD_ML_JOB_ID": job_id}
        tf_task = None
        if distributed and (in_tf_cluster(pos) or pos == 3):
            tf_task = tf_names[pos]
            tf = {"type": tf_task, "index": i, **({"trial": trial_id} if trial_id else {})}
            env["TF_CONFIG"] = _json({"cluster": tf_cluster, "task": tf, "environment": "cloud", "job": job_dict})
        if trial_id:
            env["CLOUD_ML_TRIAL_ID"] = trial_id
        if base:
            env.update(output_env(base, trial_id))
        env.update({"MASTER_ADDR": primary_host, "MASTER_PORT": primary_port})
        if (pos, i) in ranks:
            env.update({"WORLD_SIZE": str(len(ranks)), "RANK": str(ranks[(pos, i)])})
        role = "reduction_server" if pos == 2 and reducer else ROLES[pos]
        result.append(Replica(f"workerpool{pos}-{i}", pos, i, role, tf_task, addresses[(pos, i)], env))
    return result


def output_env(base: str, trial: str | None = None) -> dict[str, str]:
    """AIP_* folders under the base output directory (per trial: `<base>/<trial>/...`)."""
    root = base if base.endswith("/") else base + "/"
    if trial:
        root += f"{trial}/"
    return {"AIP_MODEL_DIR": root + "model/", "AIP_CHECKPOINT_DIR": root + "checkpoints/",
            "AIP_TENSORBOARD_LOG_DIR": root + "logs/"}


def task_names(spec: Any) -> list[str]:
    """The task names of a CustomJobSpec's replicas (workerpool{P}-{i}), in order."""
    return [f"workerpool{pos}-{n}" for pos, pool in enumerate(spec.worker_pool_specs)
            for n in range(pool.replica_count)]


def missing_replica(spec: Any, job_id: str, task_name: str) -> str | None:
    """One line naming --replica when the job has no such replica (its log would only be empty)."""
    names = task_names(spec)
    if task_name in names:
        return None
    return f"--replica: job {job_id} has no replica {task_name!r} (it has {', '.join(names)})"


def _tf_task_names(job: JobSpec, legacy: bool) -> tuple[str, ...]:
    has_evaluators = any(pos == 3 for pos, _ in job.pools)
    use_chief = job.legacy.use_chief_in_tf_config if job.legacy else False
    if legacy and not use_chief and not has_evaluators:
        return ("master",) + TF_TASKS[1:]
    return TF_TASKS


def _has_reduction_server(job: JobSpec) -> bool:
    return any(is_reduction_server_pool(pos, pool) for pos, pool in job.pools)


def _addresses(job: JobSpec, slots: list[tuple[int, int]], style: str, ports: Sequence[int] | None,
               legacy: bool) -> dict[tuple[int, int], str]:
    if style == "process":
        local = ports if ports is not None else range(FIRST_LOCAL_PORT, FIRST_LOCAL_PORT + len(slots))
        return {slot: f"127.0.0.1:{port}" for slot, port in zip(slots, local)}
    if style == "docker":
        return {(pos, i): f"workerpool{pos}-{i}:{VERTEX_PORT}" for pos, i in slots}
    job_hash = hashlib.sha256(job.dump("rest").encode()).hexdigest()[:10]
    return {(pos, i): f"cmle-training-{LEGACY_TASKS[pos] if legacy else f'workerpool{pos}'}-{job_hash}-{i}:{VERTEX_PORT}"
            for pos, i in slots}


def _job_dict(job: JobSpec, legacy: bool) -> dict[str, Any]:
    if legacy:
        return job.to_dict("legacy")["trainingInput"]
    return message_to_dict(job.custom_job_spec())


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
