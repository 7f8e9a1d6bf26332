"""A trial's job, parameters and state.

A trial's parameters reach every replica as `--name=value` arguments, after
the pool's own arguments (a Reduction Server pool gets none); the trial's
`v1.Trial.parameters` hold the same values. A trial the tuning job stopped (a
cancel, or the job failing) is INFEASIBLE with a reason from `stop_reason`,
which `trial_job_state` reads back as CANCELLED rather than FAILED.
"""

from __future__ import annotations

from typing import Any

from google.cloud.aiplatform_v1 import types as v1

from .. import states
from ..spec import JobSpec
from ..validate import MAX_NAME
from .params import plain_number


def trial_base_job(resource: v1.HyperparameterTuningJob) -> JobSpec:
    """The tuning job's trialJobSpec as a JobSpec (before a trial's arguments are added)."""
    return JobSpec.load(v1.CustomJob(display_name=resource.display_name or "trial", job_spec=resource.trial_job_spec,
                                     labels=dict(resource.labels), encryption_spec=resource.encryption_spec))


def trial_job(base: JobSpec, params: dict[str, Any], trial_id: str | int) -> JobSpec:
    """The trial's job: every pool (not a Reduction Server) gets the parameters as arguments."""
    suffix = f"-trial-{trial_id}"
    job = base.copy(display_name=base.display_name[:MAX_NAME - len(suffix)] + suffix, tuning=None)
    args = trial_args(params)
    for _, pool in job.training_pools():
        target = pool.container_spec.args if "container_spec" in pool else pool.python_package_spec.args
        target.extend(args)
    return job


def trial_args(params: dict[str, Any]) -> list[str]:
    """The command-line arguments a trial's replicas get: `--name=value`."""
    return [f"--{name}={format_value(value)}" for name, value in params.items()]


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def trial_parameters(params: dict[str, Any]) -> list[v1.Trial.Parameter]:
    return [v1.Trial.Parameter(parameter_id=name, value=value) for name, value in params.items()]


def parameters_of(trial: v1.Trial) -> dict[str, Any]:
    return {p.parameter_id: _plain(p.value) for p in trial.parameters}


def _plain(value: Any) -> Any:
    return plain_number(value) if isinstance(value, float) else value


_STOPPED = ("cancelled", "stopped: ")  # how the reasons of trials the tuning job stopped begin


def stop_reason(why: str) -> str:
    """The infeasible reason of a trial stopped by its tuning job (a cancel's own reason is kept)."""
    return why if why.startswith(_STOPPED) else f"stopped: {why}"


def trial_ended(trial: v1.Trial) -> bool:
    """The trial will not change: it SUCCEEDED or is INFEASIBLE (failed, or stopped by its tuning job)."""
    return trial.state in (v1.Trial.State.SUCCEEDED, v1.Trial.State.INFEASIBLE)


def trial_job_state(trial: v1.Trial | None, resource: v1.HyperparameterTuningJob) -> str:
    """A trial's state as a JobState name: ACTIVE is RUNNING, INFEASIBLE is FAILED, or CANCELLED when its
    tuning job stopped it; a trial not started yet is QUEUED (CANCELLED once the tuning job ended)."""
    if trial is None:
        return "JOB_STATE_CANCELLED" if states.is_final(resource.state) else "JOB_STATE_QUEUED"
    name = trial.state.name
    if name == "SUCCEEDED":
        return "JOB_STATE_SUCCEEDED"
    if name == "INFEASIBLE":
        return "JOB_STATE_CANCELLED" if trial.infeasible_reason.startswith(_STOPPED) else "JOB_STATE_FAILED"
    if name == "STOPPING" or resource.state.name == "JOB_STATE_CANCELLING":
        return "JOB_STATE_CANCELLING"
    return "JOB_STATE_RUNNING" if name == "ACTIVE" else "JOB_STATE_QUEUED"


def trial_state_label(trial: v1.Trial | None, resource: v1.HyperparameterTuningJob) -> str:
    """What a trial table shows: SUCCEEDED, RUNNING, QUEUED, FAILED or STOPPED (a trial a cancel or the
    job's failure stopped)."""
    state = states.short(trial_job_state(trial, resource))
    return {"CANCELLED": "STOPPED", "CANCELLING": "STOPPING"}.get(state, state)


def metric_name(resource: v1.HyperparameterTuningJob) -> str:
    """The study's (first) metric, or "metric" when it names none."""
    metrics = resource.study_spec.metrics
    return metrics[0].metric_id if metrics else "metric"
