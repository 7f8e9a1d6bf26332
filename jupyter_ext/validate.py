"""Every rule a job must follow, each failure one line that names the field path.

`problems(job, region=None)` lists them all (the widgets show them live); `check(job, region=None)`
raises `ValidationError` carrying them. With a region, what that region does not offer is a problem
too (`catalog.availability`). On an arm64 machine (A4X), one of Vertex AI's prebuilt training images
(built for linux/amd64 only: `packaging.is_amd64_only_image`) is a problem naming the image field.
`notices(job, region=None)` lists what is allowed but worth a line: an accelerator past its end of
support, a restricted machine, an arm64 machine with a custom image (which must be built for
linux/arm64: the validator cannot see its platform), a deprecated strategy, a region the catalog's
data does not cover. Rules come from
vertex-facts.md sections A, C, D, F and "Additions (2026-11)", and data/SOURCES.md, "Issue 16 sources
(2026-11-23): scheduling rules, A4X, access links, SDK keywords, regions and prices" (scheduling, access,
FLEX_START, Spot, MIG, A4X); machine, accelerator and region facts come from the catalog.

A HyperparameterTuningJob has the same pair, `tuning_problems(resource)` and
`check_tuning(resource)`: its counts, its study, and its trial job, checked with
the CustomJob rules.
"""

from __future__ import annotations

import math
import re
from datetime import date, timedelta
from typing import Iterator

from google.cloud.aiplatform_v1 import types as v1

from . import catalog, packaging
from .errors import SpecError, ValidationError
from .spec import JobSpec, is_empty_pool, is_reduction_server_pool, pool_image

MAX_NAME = 128
MAX_POOLS = 4
MAX_ENV = 100
MAX_PACKAGES = 100
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
BOOT_DISK_GB = (100, 64000)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LEGACY_JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_LABEL = re.compile(r"[a-z0-9_-]{0,64}")
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_NETWORK = re.compile(r"projects/[^/]+/global/networks/[^/]+")
_TENSORBOARD = re.compile(r"projects/[^/]+/locations/[^/]+/tensorboards/[^/]+")
_SERVICE_ACCOUNT = re.compile(r"[^@\s]+@[^@\s]+")
_MIG_PROFILE = re.compile(r"\d+g\.\d+gb")
FLEX_START_MAX_TIMEOUT = timedelta(days=7)  # schedule-jobs-dws: "a maximum timeout of 7 days or less"
_Strategy = v1.Scheduling.Strategy
_Affinity = v1.ReservationAffinity.Type
_DEPRECATED_STRATEGIES = {_Strategy.ON_DEMAND: "STANDARD", _Strategy.LOW_COST: "SPOT"}


def check(job: JobSpec, region: str | None = None) -> JobSpec:
    found = problems(job, region)
    if found:
        raise ValidationError(found)
    return job


def problems(job: JobSpec, region: str | None = None) -> list[str]:
    """Every rule the job breaks, one line each naming the field; with `region`, also what is not
    offered there."""
    found = list(_job_rules(job))
    if region is not None:
        found += _region_rules(job, region)
    return found


def notices(job: JobSpec, region: str | None = None) -> list[str]:
    """What the job may do but is worth a line, naming the field (never a reason to refuse it)."""
    found = []
    strategy = job.spec.scheduling.strategy
    if strategy in _DEPRECATED_STRATEGIES:
        found.append(f"scheduling.strategy: {strategy.name} is deprecated; use {_DEPRECATED_STRATEGIES[strategy]}")
    for pos, pool in job.pools:
        ms, where = pool.machine_spec, f"workerPoolSpecs[{pos}].machineSpec"
        accel = _accelerator_name(ms)
        if accel and catalog.is_deprecated(accel):
            when = catalog.end_of_support(accel)
            ended = f"reached end of support on {when}" if when and date.fromisoformat(when) <= date.today() \
                else f"reaches end of support on {when}" if when else "is past end of support"
            found.append(f"{where}.acceleratorType: {catalog.accelerator_label(accel)} {ended}; choose another GPU")
        machine = catalog.machine(ms.machine_type)
        if machine is not None and machine.restricted:
            found.append(f"{where}.machineType: {machine.name}: {machine.restricted}")
        if machine is not None and machine.architecture != "x86_64" and not _amd64_only_image(pool):
            # a custom image: its platform cannot be read from the job (a known amd64-only one is a problem)
            found.append(f"{where}.machineType: {machine.name} has {machine.architecture} CPUs: its image must be "
                         f"built for {catalog.platform(machine.name)} (vtrain build --machine-type {machine.name})")
        if region is not None and region in catalog.training_regions():
            known = catalog.availability(region, ms.machine_type, accel, ms.accelerator_count)
            if known.status == "unknown":
                found.append(f"{where}.{'acceleratorType' if accel else 'machineType'}: {known.reason}")
    return found


def _job_rules(job: JobSpec) -> Iterator[str]:
    yield from _name_rules(job.display_name)
    if job.legacy is not None and not _LEGACY_JOB_ID.fullmatch(job.legacy.job_id) or (
            job.legacy is not None and len(job.legacy.job_id) > MAX_NAME):
        yield (f"jobId: {job.legacy.job_id!r} is not a valid AI Platform job ID (letters, digits and underscores, "
               f"starting with a letter, at most {MAX_NAME} characters)")
    for key, value in job.labels.items():
        if not _LABEL_KEY.fullmatch(key) or not _LABEL.fullmatch(value):
            yield (f"labels.{key}: keys and values are at most 64 lowercase letters, digits, '_' or '-' "
                   "(keys start with a letter)")
    pools = list(job.spec.worker_pool_specs)
    if not pools or is_empty_pool(pools[0]):
        yield "workerPoolSpecs[0]: the primary pool is required"
    if len(pools) > MAX_POOLS:
        yield (f"workerPoolSpecs: {len(pools)} pools, at most {MAX_POOLS} "
               "(primary, workers, parameter servers or Reduction Server, evaluators)")
    for pos, pool in enumerate(pools):
        if not is_empty_pool(pool):
            yield from _pool_rules(pool, f"workerPoolSpecs[{pos}]", pos)
    yield from _tpu_layout(job)
    yield from _scheduling(job)
    yield from _access_rules(job.spec)


def _pool_rules(pool: v1.WorkerPoolSpec, where: str, pos: int) -> Iterator[str]:
    if pos == 0 and pool.replica_count != 1:
        yield f"{where}.replicaCount: the primary pool runs exactly 1 replica, not {pool.replica_count}"
    elif pool.replica_count < 1:
        yield f"{where}.replicaCount: must be at least 1 (use {{}} for a pool you do not want)"
    yield from _machine_rules(pool.machine_spec, f"{where}.machineSpec")
    has_container, has_package = "container_spec" in pool, "python_package_spec" in pool
    if has_container == has_package:
        yield f"{where}: give exactly one of containerSpec or pythonPackageSpec"
    elif has_container:
        spec = pool.container_spec
        if not spec.image_uri:
            yield f"{where}.containerSpec.imageUri: required"
        yield from _env_rules(spec.env, f"{where}.containerSpec.env")
    else:
        pkg = pool.python_package_spec
        if not pkg.executor_image_uri:
            yield f"{where}.pythonPackageSpec.executorImageUri: required (a prebuilt training image)"
        if not pkg.package_uris:
            yield f"{where}.pythonPackageSpec.packageUris: at least one package is required"
        elif len(pkg.package_uris) > MAX_PACKAGES:
            yield f"{where}.pythonPackageSpec.packageUris: {len(pkg.package_uris)} packages, at most {MAX_PACKAGES}"
        if not pkg.python_module:
            yield f"{where}.pythonPackageSpec.pythonModule: required (e.g. trainer.task)"
        yield from _env_rules(pkg.env, f"{where}.pythonPackageSpec.env")
    yield from _platform_rules(pool, where)
    if "disk_spec" in pool:
        disk = pool.disk_spec
        if disk.boot_disk_type and disk.boot_disk_type not in BOOT_DISK_TYPES:
            yield f"{where}.diskSpec.bootDiskType: {disk.boot_disk_type!r} is not offered (valid: {', '.join(BOOT_DISK_TYPES)})"
        low, high = BOOT_DISK_GB
        if disk.boot_disk_size_gb and not low <= disk.boot_disk_size_gb <= high:
            yield f"{where}.diskSpec.bootDiskSizeGb: {disk.boot_disk_size_gb} is out of range ({low} to {high})"


def _platform_rules(pool: v1.WorkerPoolSpec, where: str) -> Iterator[str]:
    """An arm64 machine (A4X) cannot run an image built for linux/amd64 only: Vertex AI's prebuilt training
    images, unless one is known to have an arm64 variant. Other images are the user's: a notice says what
    they must be built for (see `notices`)."""
    machine = catalog.machine(pool.machine_spec.machine_type)
    if machine is None or catalog.platform(machine.name) == catalog.DEFAULT_PLATFORM or not _amd64_only_image(pool):
        return
    field = "containerSpec.imageUri" if "container_spec" in pool else "pythonPackageSpec.executorImageUri"
    yield (f"{where}.{field}: {pool_image(pool)} is a Vertex AI prebuilt image, built for linux/amd64 only; "
           f"{machine.name} has {machine.architecture} CPUs and needs an image built for "
           f"{catalog.platform(machine.name)} (vtrain build --machine-type {machine.name} builds one)")


def _amd64_only_image(pool: v1.WorkerPoolSpec) -> bool:
    return packaging.is_amd64_only_image(pool_image(pool))


def _machine_rules(ms: v1.MachineSpec, where: str) -> Iterator[str]:
    name = ms.machine_type
    if not name:
        yield f"{where}.machineType: required"
        return
    machine = catalog.machine(name)
    if machine is None:
        close = catalog.close_machine_names(name)
        hint = f" (did you mean: {', '.join(close)})" if close else ""
        yield f"{where}.machineType: {name!r} is not a Vertex AI training machine type{hint}"
        return
    accel = _accelerator_name(ms)
    count = ms.accelerator_count
    if count and not accel:
        yield f"{where}.acceleratorCount: {count} needs an acceleratorType"
        return
    if accel and (note := catalog.training_note(accel)):
        yield f"{where}.acceleratorType: {accel}: {note}"
        return
    yield from _partition_rules(ms, accel, where)
    yield from _reservation_rules(ms, where)
    if ms.tpu_topology or machine.tpu_topologies:
        yield from _topology_rules(machine, ms, accel, where)
        return
    offered = catalog.valid_accelerators(name)
    if not accel:
        if machine.fixed_accelerator or machine.tpu_accelerators:
            yield f"{where}.acceleratorType: {name} needs an accelerator ({_choices(offered)})"
        return
    if accel not in offered:
        valid = f"valid: {_choices(offered)}" if offered else "it takes no accelerators"
        yield f"{where}.acceleratorType: {accel} is not offered on {name} ({valid})"
        return
    if not catalog.is_valid_count(name, accel, count):
        yield (f"{where}.acceleratorCount: {count} is not offered for {accel} on {name} "
               f"(valid: {catalog.count_rule(name, accel)})")


def _accelerator_name(ms: v1.MachineSpec) -> str:
    # an unknown enum number parses as a plain int
    return str(getattr(ms.accelerator_type, "name", int(ms.accelerator_type))) if ms.accelerator_type else ""


def _partition_rules(ms: v1.MachineSpec, accel: str, where: str) -> Iterator[str]:
    """gpuPartitionSize (MIG): a profile such as 1g.10gb, of one GPU that has MIG partitions."""
    size = ms.gpu_partition_size
    if not size:
        return
    mig = [catalog.accelerator_label(a) for a in catalog.accelerator_names() if catalog.supports_mig(a)]
    if not _MIG_PROFILE.fullmatch(size):
        yield f"{where}.gpuPartitionSize: {size!r} is not a MIG profile such as 1g.10gb"
    elif not catalog.supports_mig(accel):
        yield (f"{where}.gpuPartitionSize: {accel or 'a pool without a GPU'} has no MIG partitions "
               f"(GPUs with MIG: {', '.join(mig)})")
    elif ms.accelerator_count != 1:
        yield f"{where}.acceleratorCount: must be 1 with gpuPartitionSize (one GPU is partitioned), not {ms.accelerator_count}"


def _reservation_rules(ms: v1.MachineSpec, where: str) -> Iterator[str]:
    if "reservation_affinity" not in ms:
        return
    affinity, at = ms.reservation_affinity, f"{where}.reservationAffinity"
    kind = affinity.reservation_affinity_type
    if kind == _Affinity.SPECIFIC_RESERVATION and not (affinity.key and affinity.values):
        yield f"{at}: SPECIFIC_RESERVATION needs key and values (the reservation's full name)"
    elif kind != _Affinity.SPECIFIC_RESERVATION and (affinity.key or affinity.values):
        yield f"{at}: key and values only apply with SPECIFIC_RESERVATION"
    elif kind == _Affinity.TYPE_UNSPECIFIED:
        yield f"{at}.reservationAffinityType: required (NO_RESERVATION, ANY_RESERVATION or SPECIFIC_RESERVATION)"


def _topology_rules(machine: catalog.Machine, ms: v1.MachineSpec, accel: str, where: str) -> Iterator[str]:
    topologies = machine.tpu_topologies
    if not topologies:
        yield f"{where}.tpuTopology: {machine.name} takes no TPU topology"
        return
    if not ms.tpu_topology:
        yield f"{where}.tpuTopology: required for {machine.name} (valid: {', '.join(topologies)})"
    elif ms.tpu_topology not in topologies:
        yield f"{where}.tpuTopology: {ms.tpu_topology} is not offered on {machine.name} (valid: {', '.join(topologies)})"
    if accel and accel not in machine.tpu_accelerator_optional:
        allowed = ", ".join(machine.tpu_accelerator_optional) or "none"
        yield f"{where}.acceleratorType: {accel} is not offered on {machine.name} (leave it unset; valid: {allowed})"


def _tpu_layout(job: JobSpec) -> Iterator[str]:
    tpu_pools = [pos for pos, p in job.pools if catalog.is_tpu_machine(p.machine_spec.machine_type)]
    if tpu_pools and (len(job.pools) > 1 or job.replica_count != 1):
        yield (f"workerPoolSpecs[{tpu_pools[0]}].machineSpec: a TPU job runs exactly one pool "
               f"with one replica (this job has {len(job.pools)} pools, {job.replica_count} replicas)")


def _env_rules(env: list[v1.EnvVar], where: str) -> Iterator[str]:
    if len(env) > MAX_ENV:
        yield f"{where}: {len(env)} variables, at most {MAX_ENV}"
    for n, var in enumerate(env):
        if not _ENV_NAME.fullmatch(var.name):
            yield f"{where}[{n}].name: {var.name!r} is not a valid variable name"


def _scheduling(job: JobSpec) -> Iterator[str]:
    scheduling = job.spec.scheduling
    strategy = scheduling.strategy
    if "timeout" in scheduling and scheduling.timeout.total_seconds() <= 0:
        yield "scheduling.timeout: must be positive"
    if "max_wait_duration" in scheduling:
        if scheduling.max_wait_duration.total_seconds() < 0:
            yield "scheduling.maxWaitDuration: must not be negative (0 waits for ever)"
        elif strategy != _Strategy.FLEX_START:
            yield (f"scheduling.maxWaitDuration: only used with strategy FLEX_START "
                   f"(this job: {strategy.name if strategy else 'STANDARD'})")
    if strategy == _Strategy.FLEX_START:
        yield from _flex_start_rules(job)
    elif strategy == _Strategy.SPOT:
        for pos, pool in job.pools:
            ms = pool.machine_spec
            if catalog.is_tpu_pod(ms.machine_type, ms.accelerator_count, ms.tpu_topology):
                yield (f"scheduling.strategy: SPOT is not offered for TPU Pods "
                       f"(workerPoolSpecs[{pos}] is a {_describe(ms)} Pod)")


def _flex_start_rules(job: JobSpec) -> Iterator[str]:
    """Dynamic Workload Scheduler (schedule-jobs-dws): its GPUs only, one machine configuration for
    every pool (so no Reduction Server pool, whatever machines it asks for), a timeout of at most 7 days."""
    timeout = job.spec.scheduling.timeout if "timeout" in job.spec.scheduling else None
    if timeout is not None and timeout > FLEX_START_MAX_TIMEOUT:
        yield f"scheduling.timeout: at most 7 days with FLEX_START (this job: {timeout.total_seconds():g}s)"
    for pos, pool in job.pools:
        if is_reduction_server_pool(pos, pool):
            yield (f"workerPoolSpecs[{pos}]: FLEX_START (scheduling.strategy) takes no Reduction Server pool (every "
                   "pool runs the same machine configuration); remove the pool, or choose STANDARD or SPOT")
    pools = job.training_pools()
    if not pools:
        return
    first_pos, first = pools[0]
    config = _configuration(first.machine_spec)
    accel = catalog.implied_accelerator(first.machine_spec.machine_type, config[1])
    if accel not in catalog.flex_start_accelerators():
        names = ", ".join(catalog.accelerator_label(a) for a in catalog.flex_start_accelerators())
        yield (f"workerPoolSpecs[{first_pos}].machineSpec.acceleratorType: FLEX_START (scheduling.strategy) takes "
               f"{names}; this pool has {accel or 'no accelerator'}")
    for pos, pool in pools[1:]:
        if _configuration(pool.machine_spec) != config:
            yield (f"workerPoolSpecs[{pos}].machineSpec: FLEX_START (scheduling.strategy) runs every pool on the "
                   f"machine configuration of workerPoolSpecs[{first_pos}] ({_describe(first.machine_spec)}), not "
                   f"{_describe(pool.machine_spec)}")


def _configuration(ms: v1.MachineSpec) -> tuple[str, str, int]:
    return ms.machine_type, _accelerator_name(ms), ms.accelerator_count


def _describe(ms: v1.MachineSpec) -> str:
    """E.g. "a2-highgpu-1g with 1 x NVIDIA_TESLA_A100", "cloud-tpu with 32 x TPU_V3", "ct5lp-hightpu-4t 4x4"."""
    accel = _accelerator_name(ms)
    text = ms.machine_type + (f" with {ms.accelerator_count} x {accel}" if accel else "")
    return text + (f" {ms.tpu_topology}" if ms.tpu_topology else "")


def _access_rules(spec: v1.CustomJobSpec) -> Iterator[str]:
    if spec.service_account and not _SERVICE_ACCOUNT.fullmatch(spec.service_account):
        yield f"serviceAccount: {spec.service_account!r} is not a service account email"
    if spec.network and not _NETWORK.fullmatch(spec.network):
        yield f"network: {spec.network!r} is not a network name (projects/PROJECT_NUMBER/global/networks/NAME)"
    if spec.reserved_ip_ranges and not spec.network:
        yield "reservedIpRanges: needs network (the ranges are reserved in that VPC network)"
    if spec.tensorboard:
        if not _TENSORBOARD.fullmatch(spec.tensorboard):
            yield (f"tensorboard: {spec.tensorboard!r} is not a TensorBoard resource name "
                   "(projects/PROJECT/locations/REGION/tensorboards/ID)")
        if not spec.service_account:
            yield "serviceAccount: required with tensorboard (the replicas write to it as that account)"


def region_problem(region: str) -> str | None:
    """One line if Vertex AI custom training does not run in `region` at all."""
    if region not in catalog.training_regions():
        return f"region: {catalog.unavailable(region, catalog.DEFAULT_MACHINE)}"
    return None


def _region_rules(job: JobSpec, region: str) -> list[str]:
    """What `region` does not offer (catalog.availability); unknown is allowed (see notices)."""
    if problem := region_problem(region):
        return [problem]
    found = []
    for pos, pool in job.pools:
        ms = pool.machine_spec
        accel = _accelerator_name(ms)
        if reason := catalog.unavailable(region, ms.machine_type, accel, ms.accelerator_count):
            field = "acceleratorType" if accel else "machineType"
            found.append(f"workerPoolSpecs[{pos}].machineSpec.{field}: {reason}")
    return found


def _name_rules(name: str) -> Iterator[str]:
    if not name.strip():
        yield "displayName: required"
    elif len(name) > MAX_NAME:
        yield f"displayName: {len(name)} characters is too long (at most {MAX_NAME})"


def _choices(offered: dict[str, tuple[int, ...]]) -> str:
    return "; ".join(f"{accel} x {', '.join(map(str, counts))}" for accel, counts in offered.items())


# ---------------------------------------------------------------- hyperparameter tuning jobs

_CAMEL = {"double_value_spec": "doubleValueSpec", "integer_value_spec": "integerValueSpec",
          "categorical_value_spec": "categoricalValueSpec", "discrete_value_spec": "discreteValueSpec"}
_Scale = v1.StudySpec.ParameterSpec.ScaleType
_LOG_SCALES = (_Scale.UNIT_LOG_SCALE, _Scale.UNIT_REVERSE_LOG_SCALE)
_GOALS = (v1.StudySpec.MetricSpec.GoalType.MAXIMIZE, v1.StudySpec.MetricSpec.GoalType.MINIMIZE)


def check_tuning(resource: v1.HyperparameterTuningJob, local: bool = True) -> JobSpec:
    """The trial job (validated) of a valid tuning job; raises ValidationError with every problem
    (with `local`, also what Vertex AI runs but the local service cannot)."""
    from .tuning.trials import trial_base_job

    found = tuning_problems(resource, local)
    if found:
        raise ValidationError(found)
    return trial_base_job(resource)


def tuning_problems(resource: v1.HyperparameterTuningJob, local: bool = True) -> list[str]:
    """Every rule the tuning job breaks, one line each naming the field (with `local`, also what
    Vertex AI runs but the local service cannot)."""
    found = list(_tuning_rules(resource))
    if local:
        found += [f"studySpec.parameters[{i}].conditionalParameterSpecs: Vertex AI runs conditional parameters, "
                  "the local service cannot (it would try every child in every trial); run the study on Vertex "
                  "AI, or make the children plain parameters to tune locally"
                  for i, param in enumerate(resource.study_spec.parameters) if param.conditional_parameter_specs]
    return found


def _tuning_rules(resource: v1.HyperparameterTuningJob) -> Iterator[str]:
    from .tuning.trials import trial_base_job  # imported here: the tuning package imports validate

    yield from _name_rules(resource.display_name)
    if resource.max_trial_count <= 0:
        yield "maxTrialCount: required, a positive number of trials"
    if resource.parallel_trial_count <= 0:
        yield "parallelTrialCount: required, a positive number of trials to run at once"
    if resource.max_failed_trial_count < 0:
        yield "maxFailedTrialCount: must not be negative (0: Vertex AI decides; locally, no limit)"
    yield from _study_rules(resource.study_spec)
    if "trial_job_spec" not in resource or not resource.trial_job_spec.worker_pool_specs:
        yield "trialJobSpec: required, the CustomJobSpec every trial runs"
        return
    try:
        found = problems(trial_base_job(resource))
    except SpecError as exc:
        yield f"trialJobSpec.{exc}"
        return
    for problem in found:
        if problem.startswith("labels"):  # the tuning job's own labels
            yield problem
        elif not problem.startswith("displayName"):  # the tuning job's name, checked above
            yield f"trialJobSpec.{problem}"


def _study_rules(study: v1.StudySpec) -> Iterator[str]:
    if not study.metrics:
        yield "studySpec.metrics: at least one metric is required, e.g. {metricId: accuracy, goal: MAXIMIZE}"
    seen: set[str] = set()
    for i, metric in enumerate(study.metrics):
        where = f"studySpec.metrics[{i}]"
        if not metric.metric_id:
            yield f"{where}.metricId: required"
        elif metric.metric_id in seen:
            yield f"{where}.metricId: {metric.metric_id!r} is listed twice"
        seen.add(metric.metric_id)
        if metric.goal not in _GOALS:
            yield f"{where}.goal: must be MAXIMIZE or MINIMIZE"
    if not study.parameters:
        yield "studySpec.parameters: at least one parameter is required"
    ids: set[str] = set()
    for i, param in enumerate(study.parameters):
        yield from _parameter_rules(param, f"studySpec.parameters[{i}]", ids)


def _parameter_rules(param: v1.StudySpec.ParameterSpec, where: str, ids: set[str]) -> Iterator[str]:
    pid = param.parameter_id
    if not pid:
        yield f"{where}.parameterId: required"
    elif re.search(r"\s|=", pid):
        yield f"{where}.parameterId: {pid!r} must not contain whitespace or '=' (it becomes --{pid}=VALUE)"
    elif pid in ids:
        yield f"{where}.parameterId: {pid!r} is listed twice"
    ids.add(pid)
    kind = param._pb.WhichOneof("parameter_value_spec")
    if kind is None:
        yield (f"{where}: one of doubleValueSpec, integerValueSpec, categoricalValueSpec or "
               "discreteValueSpec is required")
        return
    spec = getattr(param, kind)
    at = f"{where}.{_CAMEL[kind]}"
    log_scale = param.scale_type in _LOG_SCALES
    if kind == "categorical_value_spec":
        if not spec.values:
            yield f"{at}.values: at least one value is required"
        elif len(set(spec.values)) != len(spec.values):
            yield f"{at}.values: each value may appear once"
        return
    discrete = kind == "discrete_value_spec"
    values = list(spec.values) if discrete else []
    numbers = {f"values[{i}]": value for i, value in enumerate(values)} if discrete else \
        {"minValue": spec.min_value, "maxValue": spec.max_value}
    if "default_value" in spec:
        numbers["defaultValue"] = spec.default_value
    # JSON gives a double "Infinity", "-Infinity" or "NaN": a trial would get inf or nan
    if infinite := [f"{at}.{name}: must be a finite number, not {value}" for name, value in numbers.items()
                    if not math.isfinite(value)]:
        yield from infinite
    elif discrete:
        if not values:
            yield f"{at}.values: at least one value is required"
        elif any(b <= a for a, b in zip(values, values[1:])):
            yield f"{at}.values: must be in increasing order, each value once"
        elif log_scale and values[0] <= 0:
            yield f"{at}.values: must be positive on a log scale"
    elif not spec.min_value < spec.max_value:
        yield f"{at}.minValue: must be below maxValue"
    elif log_scale and spec.min_value <= 0:
        yield f"{at}.minValue: must be positive on a log scale ({_Scale(param.scale_type).name})"
