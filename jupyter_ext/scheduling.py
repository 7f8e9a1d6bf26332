"""Scheduling and access flags: one table of them, and how their values become CustomJobSpec fields.

The magic, `vtrain` and the configurator's "Scheduling & access" section set the same fields the
same way:

| flag | field |
| --- | --- |
| `--strategy STANDARD|SPOT|FLEX_START` | `scheduling.strategy` |
| `--max-wait DURATION` | `scheduling.maxWaitDuration` (FLEX_START; 0 waits for ever) |
| `--timeout DURATION` | `scheduling.timeout` |
| `--restart-job-on-worker-restart` | `scheduling.restartJobOnWorkerRestart` |
| `--disable-retries` | `scheduling.disableRetries` |
| `--service-account EMAIL` | `serviceAccount` |
| `--network NETWORK` | `network` |
| `--reserved-ip-ranges A,B` | `reservedIpRanges` |
| `--enable-web-access` | `enableWebAccess` |
| `--enable-dashboard-access` | `enableDashboardAccess` |
| `--tensorboard RESOURCE` | `tensorboard` |
| `--reservation ANY|NONE|NAME` | `machineSpec.reservationAffinity` of every pool that runs the trainer |
| `--persistent-resource-id ID` | `persistentResourceId` |

`FLAGS` holds each flag's argparse definition (`add_arguments(parser)` adds them; the magic wraps
the same entries in `magic_arguments.argument`). `apply(job, **values)` returns a copy of the job with
the fields set: a value of None leaves the field as it is, "" or False clears it. `--strategy` takes
the current strategies (`STRATEGIES`); a job's own deprecated one (ON_DEMAND, LOW_COST) is kept when
given back, so a loaded job round-trips. Durations read like
gcloud's: `30m`, `2h`, `1h30m`, `3600s`, `2d`, or a number of seconds. Every error is one SpecError
line naming the flag and the field. `values(job)` is the inverse: the flag values of a job.

A legacy AI Platform job takes only what its trainingInput can hold (`--timeout`, `--service-account`,
`--network`, `--enable-web-access`); convert it first (`vtrain convert --to rest`) for the others.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .errors import SpecError

if TYPE_CHECKING:  # the flags are read by `vtrain --help`, which must not import the client library
    from google.cloud.aiplatform_v1 import types as v1

    from .spec import JobSpec

STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")
RESERVATION_KEY = "compute.googleapis.com/reservation-name"  # SDK worker_spec_utils: target a reservation by name
_RESERVATION_NAME = re.compile(r"projects/[^/]+/zones/[^/]+/reservations/[^/]+")
_RESERVATION_TYPES = ("ANY", "NONE")
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?")

# keyword of apply() -> (flag, the field it sets, argparse keywords)
_ON_OFF = argparse.BooleanOptionalAction
FLAGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "strategy": ("--strategy", "scheduling.strategy", {
        "metavar": "STRATEGY", "help": "how Vertex AI gets the machines: STANDARD (on demand), SPOT (preemptible, "
        "cheaper) or FLEX_START (Dynamic Workload Scheduler: waits until every pool's GPUs are free at once)"}),
    "max_wait": ("--max-wait", "scheduling.maxWaitDuration", {
        "metavar": "DURATION", "help": "FLEX_START: how long to wait for the machines, e.g. 2h (0: wait for ever; "
        "Vertex AI's default: 1 day)"}),
    "timeout": ("--timeout", "scheduling.timeout", {
        "metavar": "DURATION", "help": "stop the job after this long, e.g. 90m (Vertex AI's default: 7 days)"}),
    "restart": ("--restart-job-on-worker-restart", "scheduling.restartJobOnWorkerRestart", {
        "action": _ON_OFF, "help": "restart the whole job when a worker fails"}),
    "disable_retries": ("--disable-retries", "scheduling.disableRetries", {
        "action": _ON_OFF, "help": "never retry after an internal error (also turns off restarts)"}),
    "service_account": ("--service-account", "serviceAccount", {
        "metavar": "EMAIL", "help": "the service account the replicas run as"}),
    "network": ("--network", "network", {
        "metavar": "NETWORK", "help": "the peered VPC network, projects/PROJECT_NUMBER/global/networks/NAME"}),
    "reserved_ip_ranges": ("--reserved-ip-ranges", "reservedIpRanges", {
        "metavar": "RANGES", "help": "comma-separated reserved IP ranges of --network for the replicas"}),
    "web_access": ("--enable-web-access", "enableWebAccess", {
        "action": _ON_OFF, "help": "an interactive shell into each replica (webAccessUris)"}),
    "dashboard_access": ("--enable-dashboard-access", "enableDashboardAccess", {
        "action": _ON_OFF, "help": "access to a dashboard the trainer serves"}),
    "tensorboard": ("--tensorboard", "tensorboard", {
        "metavar": "RESOURCE", "help": "a Vertex AI TensorBoard, projects/P/locations/L/tensorboards/ID, that gets "
        "what the trainer writes to AIP_TENSORBOARD_LOG_DIR (needs --service-account)"}),
    "reservation": ("--reservation", "machineSpec.reservationAffinity", {
        "metavar": "RESERVATION", "help": "the Compute Engine reservation the trainer's pools use: ANY, NONE, or one "
        "reservation's full name projects/P/zones/Z/reservations/NAME"}),
    "persistent_resource": ("--persistent-resource-id", "persistentResourceId", {
        "metavar": "ID", "help": "run on the machines of this persistent resource"}),
}
# what a legacy trainingInput can hold (spec.py maps them both ways)
_LEGACY_FIELDS = {"timeout", "service_account", "network", "web_access"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every flag of `FLAGS` to an argparse parser (dest = apply()'s keyword; default None)."""
    for key, (flag, _field, kwargs) in FLAGS.items():
        parser.add_argument(flag, dest=key, default=None, **kwargs)


def from_args(job: JobSpec, args: argparse.Namespace) -> JobSpec:
    """`apply` with the values argparse (or the magic) parsed for `FLAGS`."""
    return apply(job, **{key: getattr(args, key, None) for key in FLAGS})


def apply(job: JobSpec, **values: Any) -> JobSpec:
    """A copy of `job` with the fields of the given flags set (keywords: the keys of `FLAGS`)."""
    if unknown := sorted(set(values) - set(FLAGS)):
        raise TypeError(f"apply() got unknown keywords: {', '.join(unknown)}")
    given = {key: value for key, value in values.items() if value is not None}
    if job.legacy is not None:  # clearing ("" or False) what a trainingInput cannot hold is no change
        for key in (key for key, value in given.items() if key not in _LEGACY_FIELDS and value not in ("", False)):
            raise _error(key, "an AI Platform (legacy) job cannot hold it; convert the job first "
                              "(vtrain convert --to rest)")
    result = job.copy()
    spec = result.spec
    scheduling = spec.scheduling
    for key, value in given.items():
        if key == "strategy":
            scheduling.strategy = _strategy(value, scheduling.strategy)
        elif key in ("max_wait", "timeout"):
            name = "max_wait_duration" if key == "max_wait" else "timeout"
            if value == "":
                scheduling._pb.ClearField(name)
            else:
                setattr(scheduling, name, parse_duration(value, key))
        elif key == "restart":
            scheduling.restart_job_on_worker_restart = bool(value)
        elif key == "disable_retries":
            scheduling.disable_retries = bool(value)
        elif key == "reservation":
            _set_reservation(result, value)
        elif key == "reserved_ip_ranges":
            items = value.split(",") if isinstance(value, str) else list(value)
            spec.reserved_ip_ranges = [item.strip() for item in items if item.strip()]
        else:
            field = {"web_access": "enable_web_access", "dashboard_access": "enable_dashboard_access",
                     "persistent_resource": "persistent_resource_id"}.get(key, key)
            setattr(spec, field, value if isinstance(value, bool) else str(value).strip())
    if "scheduling" in spec and spec.scheduling._pb.ByteSize() == 0:
        spec._pb.ClearField("scheduling")  # nothing set: no empty `scheduling: {}` in the request
    return result


def values(job: JobSpec) -> dict[str, Any]:
    """The flag values that give `job` its fields: apply(job, **values(job)) == job, and
    apply(job_without_them, **values(job)) == job unless its strategy is a deprecated one.
    `reservation` is None when the trainer's pools use different reservations."""
    spec, scheduling = job.spec, job.spec.scheduling
    strategy = scheduling.strategy
    return {
        "strategy": strategy.name if strategy else "",
        "max_wait": format_duration(scheduling.max_wait_duration) if "max_wait_duration" in scheduling else "",
        "timeout": format_duration(scheduling.timeout) if "timeout" in scheduling else "",
        "restart": bool(scheduling.restart_job_on_worker_restart),
        "disable_retries": bool(scheduling.disable_retries),
        "service_account": spec.service_account,
        "network": spec.network,
        "reserved_ip_ranges": ",".join(spec.reserved_ip_ranges),
        "web_access": bool(spec.enable_web_access),
        "dashboard_access": bool(spec.enable_dashboard_access),
        "tensorboard": spec.tensorboard,
        "reservation": _reservation_value(job),
        "persistent_resource": spec.persistent_resource_id,
    }


def local_notice(job: JobSpec) -> str | None:
    """What a SPOT or FLEX_START job does differently on this machine, which has no capacity to wait
    for and nothing to preempt."""
    strategy = job.spec.scheduling.strategy.name
    if strategy not in ("SPOT", "FLEX_START"):
        return None
    what = "is never preempted" if strategy == "SPOT" else "starts at once"
    return (f"scheduling.strategy: {strategy} runs as STANDARD on this machine (it {what}); "
            f"on Vertex AI it is {strategy}")


def parse_duration(text: Any, key: str = "timeout") -> timedelta:
    """`30m`, `2h`, `1h30m`, `3600s`, `2d` or a number of seconds, as gcloud reads durations."""
    raw = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return timedelta(seconds=float(raw))
    match = _DURATION.fullmatch(raw)
    if not raw or not match or not any(match.groups()):
        raise _error(key, f"not a duration: {str(text)!r} (e.g. 30m, 2h, 1h30m, 3600s)")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def format_duration(value: timedelta) -> str:
    """A duration the way parse_duration reads it back, e.g. "1h30m", "90s", "0s"."""
    seconds = value.total_seconds()
    if seconds != int(seconds) or seconds == 0:
        return f"{seconds:g}s"
    out, rest = "", int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out


def _strategy(value: Any, current: v1.Scheduling.Strategy) -> v1.Scheduling.Strategy:
    from google.cloud.aiplatform_v1 import types as v1

    name = str(value).strip().upper().replace("-", "_")
    if not name:
        return v1.Scheduling.Strategy.STRATEGY_UNSPECIFIED
    if current and name == current.name:  # the job's own, even one Vertex deprecated (validate says so)
        return current
    if name not in STRATEGIES:
        raise _error("strategy", f"{value!r} is not a strategy (valid: {', '.join(STRATEGIES)})")
    return v1.Scheduling.Strategy[name]


def _reservation_types() -> dict[str, Any]:
    from google.cloud.aiplatform_v1 import types as v1

    kinds = v1.ReservationAffinity.Type
    return {"ANY": kinds.ANY_RESERVATION, "NONE": kinds.NO_RESERVATION, "": kinds.SPECIFIC_RESERVATION}


def _set_reservation(job: JobSpec, value: str) -> None:
    from google.cloud.aiplatform_v1 import types as v1

    kinds = _reservation_types()
    text = str(value).strip()
    if not text:
        affinity = None
    elif text.upper() in _RESERVATION_TYPES:
        affinity = v1.ReservationAffinity(reservation_affinity_type=kinds[text.upper()])
    elif _RESERVATION_NAME.fullmatch(text):
        affinity = v1.ReservationAffinity(reservation_affinity_type=kinds[""], key=RESERVATION_KEY, values=[text])
    else:
        raise _error("reservation", f"{text!r}: give ANY, NONE, or a reservation's full name "
                                    "projects/PROJECT/zones/ZONE/reservations/NAME")
    for _, pool in job.training_pools():
        if affinity is None:
            pool.machine_spec._pb.ClearField("reservation_affinity")
        else:
            pool.machine_spec.reservation_affinity = affinity


def _reservation_value(job: JobSpec) -> str | None:
    found = {_reservation_text(pool.machine_spec) for _, pool in job.training_pools()}
    return found.pop() if len(found) == 1 else ("" if not found else None)


def _reservation_text(ms: v1.MachineSpec) -> str | None:
    if "reservation_affinity" not in ms:
        return ""
    affinity = ms.reservation_affinity
    names = {kind: name for name, kind in _reservation_types().items()}
    name = names.get(affinity.reservation_affinity_type)
    if name == "" and affinity.key == RESERVATION_KEY and len(affinity.values) == 1:
        return affinity.values[0]
    return name if name and not affinity.key and not affinity.values else None


def _error(key: str, reason: str) -> SpecError:
    flag, field, _ = FLAGS[key]
    return SpecError(f"{flag} ({field})", reason)
