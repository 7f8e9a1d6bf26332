"""Hyperparameter tuning jobs inside the local service: create, run trials, cancel, recover.

A tuning job runs in one thread of the service (its "study"). The study asks
`tuning.suggestions` for the trials' parameters and runs at most
`parallelTrialCount` trials at once, each a full job under the shared
supervisor:

- a trial's folder is `<tuning job dir>/trials/<trial id>/` (logs in `logs/`),
  so the Logging API serves its lines under the tuning job's ID with the
  `ml.googleapis.com/trial_id` label, as Vertex AI does;
- its replicas get `trial` in TF_CONFIG and CLUSTER_SPEC, CLOUD_ML_TRIAL_ID,
  AIP_* folders under `<base>/<trial id>/` (the tuning job's base output
  directory, kept on this machine as for any local job; without one,
  `<tuning job dir>/output/`), the parameters as `--name=value`, and each its
  own `CLOUD_ML_HP_METRIC_FILE` (`<trial dir>/metrics/<task name>.metrics`);
- CLOUD_ML_JOB_ID is the tuning job's ID (with the docker backend,
  `<tuning job id>-<trial id>`: each trial needs its own network);
- a trial whose job succeeds is SUCCEEDED with its final measurement (see
  `tuning`); one that fails, or succeeds without reporting the metric, is
  INFEASIBLE with the reason, and counts against maxFailedTrialCount; trials
  stopped by a cancel are INFEASIBLE and do not count.

The tuning job's state is written to its own table, `hyperparameter_tuning_jobs`,
in the service's SQLite file, as Vertex reports it: QUEUED, PENDING, RUNNING
(from the first trial), then SUCCEEDED, FAILED or CANCELLING and CANCELLED,
with `error` as a google.rpc.Status.

Local limits (`jupyter_ext.limits`): `maxTrialCount` is bounded (the trials are made one at a
time anyway); at most as many trials run at once as fit in one job's replicas
(`limits.trials_at_once`); the tuning job counts as one job holding those replicas, queued like
any job until they are free.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from google.cloud.aiplatform_v1 import types as v1

from .. import limits, paths, tuning, validate
from ..api import TUNING_JOBS
from ..environment import Runtime
from ..failure import trials_failed
from ..runner import JobResult, Supervisor, service_backend
from ..spec import JobSpec
from .resources import CANCELLED, INVALID_ARGUMENT, SERVICE_STOPPED, ResourceManager, stop_leftovers
from .store import StoredJob

SEARCH_LABEL = "vtrain-search"  # the search that ran locally: random or grid
METRICS_EVERY = 1.0  # seconds between reads of running trials' metrics files
TrialState = v1.Trial.State


class TuningManager(ResourceManager):
    collection = TUNING_JOBS

    def check(self, resource: v1.HyperparameterTuningJob) -> JobSpec:
        limits.check_tuning(resource, self.queue.limits)  # first: maxTrialCount may be 2e9
        return validate.check_tuning(resource)

    def replicas(self, resource: v1.HyperparameterTuningJob) -> int:
        return limits.tuning_replicas(resource, self.queue.limits)

    def start_run(self, stored: StoredJob, checked: JobSpec, runtime: Runtime) -> _Study:
        r = stored.resource
        r._pb.ClearField("trials")
        r.labels[SEARCH_LABEL] = tuning.search_name(r.study_spec)
        for note in tuning.notices(r):
            self.on_note(f"tuning job {stored.id}: {note}")
        if (at_once := limits.trials_at_once(r, self.queue.limits)) < r.parallel_trial_count:
            self.on_note(f"tuning job {stored.id}: parallelTrialCount: runs {at_once} trials at once here, "
                         f"within the local limit of {self.queue.limits.replicas_per_job} replicas per job")
        return _Study(self, stored, checked, runtime)

    def recovered(self, stored: StoredJob) -> None:
        """Also marks the running trials INFEASIBLE. Process replicas carry the tuning job's id;
        containers of trial N are named `<id>-<N>`."""
        stop_leftovers(stored.backend, stored.id, *(f"{stored.id}-{t.id}" for t in stored.resource.trials))
        now = _now()
        for trial in stored.resource.trials:
            if not tuning.trial_ended(trial):
                trial.state, trial.end_time = TrialState.INFEASIBLE, now
                trial.infeasible_reason = SERVICE_STOPPED


@dataclass
class _Trial:
    id: str
    params: dict[str, Any]
    dir: Path
    supervisor: Supervisor
    start: float = field(default_factory=time.time)
    metrics_seen: tuple[float, int] = (0.0, -1)  # (mtime, size) of the primary's metrics file when last read

    @property
    def primary_metrics(self) -> Path:
        return self.dir / "metrics" / "workerpool0-0.metrics"


class _Study:
    """One tuning job's run: schedules trials, reads their metrics, decides the job's end."""

    def __init__(self, manager: TuningManager, stored: StoredJob, base: JobSpec, runtime: Runtime) -> None:
        self.manager, self.stored, self.base, self.runtime = manager, stored, base, runtime
        self.resource = stored.resource
        self.study = self.resource.study_spec
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._lock = threading.Lock()  # guards self.resource against readers (get) while it changes
        self._trials: dict[str, _Trial] = {}
        output = base.custom_job_spec().base_output_directory.output_uri_prefix
        # no base output directory: the trials' folders go under the tuning job's (`<job dir>/output/<trial>/`)
        self.output_base = output or f"{stored.job_dir / 'output'}/"

    # ---- from other threads --------------------------------------------------------
    def cancel(self, reason: str) -> None:
        self._events.put(("cancel", reason))

    def snapshot(self) -> v1.HyperparameterTuningJob:
        """The live resource, with the latest measurements."""
        with self._lock:
            return v1.HyperparameterTuningJob(self.resource)

    # ---- the study's thread -------------------------------------------------------------
    def run(self) -> tuple[str, int, str]:
        try:
            return self._run()
        except Exception:  # a bug must not leave trials running; the manager fails the job
            for trial in list(self._trials.values()):
                trial.supervisor.cancel(tuning.stop_reason("the tuning job's runner failed"))
            raise

    def _run(self) -> tuple[str, int, str]:
        r = self.resource
        planned = tuning.suggestions(self.study, r.max_trial_count, seed=self.stored.id)  # made on demand
        limit = r.max_failed_trial_count  # 0: no limit (see tuning's notes)
        parallel = limits.trials_at_once(r, self.manager.queue.limits)
        self._update(state="JOB_STATE_PENDING")
        failures: list[tuple[str, str]] = []
        succeeded = 0
        stop: tuple[str, int, str] | None = None
        next_trial = 0
        while True:
            while stop is None and next_trial < r.max_trial_count and len(self._trials) < parallel:
                params = next(planned, None)
                if params is None:  # a grid smaller than maxTrialCount: the study ends with the grid
                    break
                next_trial += 1
                self._start_trial(str(next_trial), params)
            if not self._trials:
                break
            try:
                kind, payload = self._events.get(timeout=METRICS_EVERY)
            except queue.Empty:
                self._read_metrics()
                continue
            if kind == "cancel":
                if stop is None:
                    stop = ("JOB_STATE_CANCELLED", CANCELLED, payload)
                    self._update(state="JOB_STATE_CANCELLING")
                    for trial in self._trials.values():
                        trial.supervisor.cancel(tuning.stop_reason(payload))
            elif kind == "done":
                trial_id, result = payload
                failure = self._end_trial(trial_id, result)
                if failure is None and result.state == "SUCCEEDED":
                    succeeded += 1
                elif failure is not None:
                    failures.append((trial_id, failure))
                    if stop is None and limit and len(failures) >= limit:  # "need to be seen before failing"
                        stop = ("JOB_STATE_FAILED", INVALID_ARGUMENT, trials_failed(
                            f"{len(failures)} trials failed, as many as maxFailedTrialCount {limit} allows",
                            trial_id, failure))
                        for trial in self._trials.values():
                            trial.supervisor.cancel(tuning.stop_reason(
                                f"the tuning job failed ({len(failures)} trials failed)"))
        if stop is not None:
            return stop
        if succeeded == 0:
            outcome = f"all {next_trial} trials failed"
            return "JOB_STATE_FAILED", INVALID_ARGUMENT, trials_failed(outcome, *failures[-1]) if failures \
                else outcome
        return "JOB_STATE_SUCCEEDED", 0, ""

    def _start_trial(self, trial_id: str, params: dict[str, Any]) -> None:
        stored = self.stored
        trial_dir = stored.job_dir / "trials" / trial_id
        paths.make_dir(trial_dir / "metrics")
        job = tuning.trial_job(self.base, params, trial_id)
        job.spec.base_output_directory.output_uri_prefix = self.output_base
        backend = service_backend(stored.backend, trial_dir, self.runtime)
        own_network = backend.address_style == "docker"

        def extra_env(replica: Any) -> dict[str, str]:
            env = {tuning.METRIC_FILE_ENV: str(trial_dir / "metrics" / f"{replica.task_name}.metrics")}
            if own_network:
                env["CLOUD_ML_JOB_ID"] = f"{stored.id}-{trial_id}"
            return env

        supervisor = Supervisor(job, backend=backend, job_dir=trial_dir, job_id=stored.id, trial=trial_id,
                                extra_env=extra_env)
        trial = _Trial(trial_id, params, trial_dir, supervisor)
        self._trials[trial_id] = trial
        now = _now()
        with self._lock:
            self.resource.trials.append(v1.Trial(id=trial_id, state=TrialState.ACTIVE, start_time=now,
                                                 parameters=tuning.trial_parameters(params)))
        self._update(state="JOB_STATE_RUNNING")

        def run() -> None:
            try:
                result = supervisor.run()
            except Exception as exc:  # a runner bug fails the trial, not the study's thread
                result = JobResult(stored.id, job.display_name, "FAILED", f"the local runner failed: {exc!r}",
                                   str(trial_dir), stored.backend, "")
            self._events.put(("done", (trial_id, result)))

        threading.Thread(target=run, name=f"trial-{stored.id}-{trial_id}", daemon=True).start()

    def _end_trial(self, trial_id: str, result: JobResult) -> str | None:
        """Records how the trial ended; the failure's text when it counts as failed."""
        trial = self._trials.pop(trial_id)
        reports = tuning.read_reports(trial.primary_metrics)
        failure = None
        final = None
        if result.state == "SUCCEEDED":
            final = tuning.final_measurement(reports, self.study, trial.start)
            if final is None:
                metric = self.study.metrics[0].metric_id
                failure = (f"the trial succeeded but its primary replica reported no value for metric {metric!r} "
                           f"(report it with cloudml-hypertune, which writes ${tuning.METRIC_FILE_ENV})")
        elif result.state == "FAILED":
            failure = result.error or "the trial's job failed"
        with self._lock:
            message = self._trial_message(trial_id)
            message.measurements = tuning.measurements(reports, trial.start)
            message.end_time = _now()
            if final is not None:
                message.state, message.final_measurement = TrialState.SUCCEEDED, final
            else:
                message.state = TrialState.INFEASIBLE
                message.infeasible_reason = failure or result.error or f"the trial's job was {result.state.lower()}"
        self._update()
        return failure

    def _read_metrics(self) -> None:
        changed = False
        for trial in self._trials.values():
            try:
                stat = trial.primary_metrics.stat()
            except OSError:
                continue
            seen = (stat.st_mtime, stat.st_size)
            if seen == trial.metrics_seen:
                continue
            trial.metrics_seen = seen
            reports = tuning.read_reports(trial.primary_metrics)
            with self._lock:
                self._trial_message(trial.id).measurements = tuning.measurements(reports, trial.start)
            changed = True
        if changed:
            self._update()

    def _trial_message(self, trial_id: str) -> v1.Trial:
        for message in self.resource.trials:
            if message.id == trial_id:
                return message
        raise KeyError(trial_id)

    def _update(self, state: str | None = None) -> None:
        """Save the resource: a new state, or new trials and measurements."""
        with self._lock:
            if state and self.resource.state.name != state:
                self.manager.save_state(self.stored, state)
            else:
                self.resource.update_time = _now()
                self.manager.save(self.stored)


def _now() -> datetime:
    return datetime.now(timezone.utc)
