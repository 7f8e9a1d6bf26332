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
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from google.cloud.aiplatform_v1 import types as v1

from .. import paths, tuning
from ..errors import WorkbenchError
from ..runner import JobResult, Supervisor, get_backend
from ..spec import JobSpec
from .jobs import BACKEND_LABEL, CANCELLED, INVALID_ARGUMENT, UNAVAILABLE, JobManager, ServiceError, stop_leftovers
from .store import FINAL_STATES, JobStore, StoredJob

KIND = "HyperparameterTuningJob"
SEARCH_LABEL = "vtrain-search"  # the search that ran locally: random or grid
METRICS_EVERY = 1.0  # seconds between reads of running trials' metrics files
TrialState = v1.Trial.State

TABLE = "hyperparameter_tuning_jobs"
StoredTuningJob = StoredJob  # its resource is a v1.HyperparameterTuningJob


def TuningStore(path: Path) -> JobStore:  # noqa: N802  (a store, like JobStore)
    """Tuning jobs in their own table of the service's database."""
    return JobStore(path, TABLE, v1.HyperparameterTuningJob)


class TuningManager:
    def __init__(self, store: JobStore, jobs_root: Path, default_backend: str = "process",
                 on_note: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.jobs_root = jobs_root
        self.default_backend = default_backend
        self.on_note = on_note or (lambda text: print(text, flush=True))  # the service's log
        self._running: dict[str, tuple[_Study, threading.Thread]] = {}
        self._lock = threading.Lock()

    # ---- API -----------------------------------------------------------------
    def create(self, parent: str, resource: v1.HyperparameterTuningJob) -> v1.HyperparameterTuningJob:
        try:
            base = tuning.check(resource)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", str(exc).replace("\n", "; ")) from None
        backend_name = resource.labels.get(BACKEND_LABEL, self.default_backend)
        try:
            get_backend(backend_name)
        except WorkbenchError as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", f"labels.{BACKEND_LABEL}: {exc}") from None
        job_id = paths.new_job_id()
        now = _now()
        stored = StoredTuningJob(job_id, parent, self.jobs_root / job_id, backend_name,
                                 v1.HyperparameterTuningJob(resource))
        r = stored.resource
        r.name, r.state, r.create_time, r.update_time = f"{parent}/hyperparameterTuningJobs/{job_id}", \
            "JOB_STATE_QUEUED", now, now
        for output_only in ("trials", "error", "start_time", "end_time"):
            r._pb.ClearField(output_only)
        r.labels[SEARCH_LABEL] = tuning.search_name(r.study_spec)
        for note in tuning.notices(r):
            self.on_note(f"tuning job {job_id}: {note}")
        stored.job_dir.mkdir(parents=True, exist_ok=True)
        self.store.add(stored)
        study = _Study(self, stored, base)
        thread = threading.Thread(target=study.run, name=f"tuning-{job_id}", daemon=True)
        with self._lock:
            self._running[job_id] = (study, thread)
        thread.start()
        return stored.resource

    def get(self, job_id: str) -> StoredTuningJob:
        with self._lock:
            running = self._running.get(job_id)
        if running:  # the live resource, with the latest measurements
            return running[0].snapshot()
        stored = self.store.get(job_id)
        if stored is None:
            raise ServiceError(404, "NOT_FOUND", f"{KIND} {job_id} does not exist")
        return stored

    def list(self, parent: str, **kwargs: Any) -> list[StoredTuningJob]:
        return self.store.list(parent, **kwargs)

    def cancel(self, job_id: str) -> None:
        stored = self.get(job_id)
        if stored.state in FINAL_STATES:
            raise ServiceError(400, "FAILED_PRECONDITION",
                               f"{KIND} {job_id} is already {stored.state.name}; only a running job can be cancelled")
        with self._lock:
            running = self._running.get(job_id)
        if running:
            running[0].cancel("cancelled by the user")

    def delete(self, job_id: str) -> None:
        """Removes the job resource; its trials' logs stay on disk, as Cloud Logging keeps them."""
        stored = self.get(job_id)
        if stored.state not in FINAL_STATES:
            raise ServiceError(400, "FAILED_PRECONDITION", f"{KIND} {job_id} is {stored.state.name}; cancel it first")
        self.store.delete(job_id)

    # ---- lifecycle -------------------------------------------------------------
    def recover(self) -> list[str]:
        """After a crash: tuning jobs the store still calls unfinished are failed, their running
        trials marked INFEASIBLE and what is left of their replicas stopped. Returns their IDs."""
        recovered = []
        for stored in self.store.unfinished():
            # process replicas carry the tuning job's id; containers of trial N are named `<id>-<N>`
            stop_leftovers(stored.backend, stored.id, *(f"{stored.id}-{t.id}" for t in stored.resource.trials))
            now = _now()
            for trial in stored.resource.trials:
                if trial.state not in (TrialState.SUCCEEDED, TrialState.INFEASIBLE):
                    trial.state, trial.end_time = TrialState.INFEASIBLE, now
                    trial.infeasible_reason = "the local service stopped while the trial was running"
            r = stored.resource
            r.state, r.update_time, r.end_time = "JOB_STATE_FAILED", now, now
            r.error = {"code": UNAVAILABLE, "message": "the local service stopped while the job was running"}
            self.store.save(stored)
            recovered.append(stored.id)
        return recovered

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel every running tuning job and wait for its trials to stop."""
        with self._lock:
            running = list(self._running.values())
        for study, _ in running:
            study.cancel("cancelled: the local service was stopped")
        for _, thread in running:
            thread.join(timeout)

    def _done(self, job_id: str) -> None:
        with self._lock:
            self._running.pop(job_id, None)


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

    def __init__(self, manager: TuningManager, stored: StoredTuningJob, base: JobSpec) -> None:
        self.manager, self.stored, self.base = manager, stored, base
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

    def snapshot(self) -> StoredTuningJob:
        with self._lock:
            resource = v1.HyperparameterTuningJob(self.resource)
        return StoredTuningJob(self.stored.id, self.stored.parent, self.stored.job_dir, self.stored.backend, resource)

    # ---- the study's thread -------------------------------------------------------------
    def run(self) -> None:
        try:
            state, code, message = self._run()
            self._finish(state, code, message)
        except Exception as exc:  # a bug must not leave the job RUNNING
            for trial in list(self._trials.values()):
                trial.supervisor.cancel("the tuning job's runner failed")
            self._finish("JOB_STATE_FAILED", UNAVAILABLE, f"the local tuning runner failed: {exc!r}")
            raise
        finally:
            self.manager._done(self.stored.id)

    def _run(self) -> tuple[str, int, str]:
        r = self.resource
        planned = tuning.suggestions(self.study, r.max_trial_count, seed=self.stored.id)
        limit = r.max_failed_trial_count  # 0: no limit (see tuning's notes)
        parallel = max(1, r.parallel_trial_count)
        self._update(state="JOB_STATE_PENDING")
        failures: list[tuple[str, str]] = []
        succeeded = 0
        stop: tuple[str, int, str] | None = None
        next_trial = 0
        while True:
            while stop is None and next_trial < len(planned) and len(self._trials) < parallel:
                next_trial += 1
                self._start_trial(str(next_trial), planned[next_trial - 1])
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
                        trial.supervisor.cancel(payload)
            elif kind == "done":
                trial_id, result = payload
                failure = self._end_trial(trial_id, result)
                if failure is None and result.state == "SUCCEEDED":
                    succeeded += 1
                elif failure is not None:
                    failures.append((trial_id, failure))
                    if stop is None and limit and len(failures) > limit:
                        stop = ("JOB_STATE_FAILED", INVALID_ARGUMENT,
                                f"{len(failures)} trials failed, more than maxFailedTrialCount {limit}; "
                                f"last failure: trial {trial_id}: {failure}")
                        for trial in self._trials.values():
                            trial.supervisor.cancel(f"stopped: the tuning job failed ({len(failures)} trials failed)")
        if stop is not None:
            return stop
        if succeeded == 0:
            last = f"; last failure: trial {failures[-1][0]}: {failures[-1][1]}" if failures else ""
            return "JOB_STATE_FAILED", INVALID_ARGUMENT, f"all {len(planned)} trials failed{last}"
        return "JOB_STATE_SUCCEEDED", 0, ""

    def _start_trial(self, trial_id: str, params: dict[str, Any]) -> None:
        stored = self.stored
        trial_dir = stored.job_dir / "trials" / trial_id
        (trial_dir / "metrics").mkdir(parents=True, exist_ok=True)
        job = tuning.trial_job(self.base, params, trial_id)
        job.spec.base_output_directory.output_uri_prefix = self.output_base
        backend = get_backend(stored.backend)
        if hasattr(backend, "cwd"):
            backend.cwd = trial_dir  # the submitter's folder is unknown here: replicas start in the trial's
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
        with self._lock:
            r = self.resource
            now = _now()
            if state and r.state.name != state:
                r.state = state
                if state == "JOB_STATE_RUNNING" and not r.start_time:
                    r.start_time = now
            r.update_time = now
            self.manager.store.save(self.stored)

    def _finish(self, state: str, code: int, message: str) -> None:
        with self._lock:
            r = self.resource
            r.state, r.update_time = state, _now()
            r.end_time = r.update_time
            if code:
                r.error = {"code": code, "message": message or state}
            self.manager.store.save(self.stored)


# ---- where the HTTP handlers find the manager -------------------------------------------

_managers: weakref.WeakKeyDictionary[JobManager, TuningManager] = weakref.WeakKeyDictionary()
_managers_lock = threading.Lock()


def register(jobs: JobManager, manager: TuningManager) -> TuningManager:
    """Serve `manager`'s tuning jobs next to `jobs`' CustomJobs (the service's __main__ does this)."""
    with _managers_lock:
        _managers[jobs] = manager
    return manager


def manager_for(jobs: JobManager) -> TuningManager:
    """The tuning manager serving next to `jobs`; one is made (same data folder) when none was registered."""
    with _managers_lock:
        manager = _managers.get(jobs)
        if manager is None:
            manager = _managers[jobs] = TuningManager(TuningStore(jobs.jobs_root.parent / "jobs.sqlite"),
                                                      jobs.jobs_root, jobs.default_backend)
        return manager


def _now() -> datetime:
    return datetime.now(timezone.utc)

