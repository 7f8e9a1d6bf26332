"""Handles on submitted jobs, and submitting, attaching and listing them.

One `Handle` type, parameterised by the API collection it lives in (`CUSTOM_JOBS`
or `TUNING_JOBS`), serves CustomJobs and HyperparameterTuningJobs alike; a
`TuningHandle` adds the trials. Every call goes through the target's `Session`,
so handles on one target share its clients.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

from google.cloud.aiplatform_v1 import types as v1

from .. import failure, paths, staging, states, validate
from ..api import CUSTOM_JOBS, TUNING_JOBS, Collection
from ..cluster import missing_replica
from ..environment import CLIENT_HEADER, Runtime
from ..errors import JobFailedError, WorkbenchError
from ..names import TUNING_PARALLEL, TUNING_TRIALS
from ..runner.backend import address_style, backend_of
from ..spec import JobSpec
from .logs import LogReader, LogRecord, log_filter
from . import preflight
from .prepare import absolute_packages, prepare
from .target import Session, Target

class Handle:
    """A submitted job, local or on Vertex AI: its name, state, error, logs; wait and cancel."""

    collection = CUSTOM_JOBS

    def __init__(self, name: str, target: Target, resource: Any = None) -> None:
        self.name = name  # projects/P/locations/L/<collection>/ID
        self.target = target
        self.session = Session.of(target)
        self._resource = resource

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def id(self) -> str:
        return self.name.rsplit("/", 1)[1]

    @property
    def local_dir(self) -> Path | None:
        """A local job's folder (logs, outputs), or None for a Vertex AI job."""
        return paths.jobs_dir() / self.id if self.target.local else None

    @property
    def console_url(self) -> str:
        return "" if self.target.local else self.collection.console_url(self.target.project, self.target.region,
                                                                        self.id)

    @property
    def address_style(self) -> str:
        """How its replicas' addresses look: `process`, `docker`, or `cloud` on Vertex AI."""
        return address_style(backend_of(self.resource.labels)) if self.target.local else "cloud"

    def refresh(self) -> Any:
        self._resource = self.session.jobs(lambda c: getattr(c, f"get_{self.collection.method}")(name=self.name))
        return self._resource

    @property
    def resource(self) -> Any:
        return self._resource or self.refresh()

    @property
    def state(self) -> str:
        return self.refresh().state.name

    @property
    def error(self) -> str:
        return self.resource.error.message

    def cancel(self) -> None:
        self.session.jobs(lambda c: getattr(c, f"cancel_{self.collection.method}")(name=self.name))

    def failure(self) -> JobFailedError | None:
        """Why the job did not succeed, as one line (None while it runs or once it succeeded): the
        replica that failed, how it ended, and where its log is."""
        resource = self.refresh()
        state = resource.state.name
        if not states.is_final(state) or state == "JOB_STATE_SUCCEEDED":
            return None
        message = resource.error.message or states.short(state).lower()
        return JobFailedError(f"{self.collection.kind} {self.id} ({resource.display_name})", states.short(state),
                              failure.one_line(message, self._log_of))

    def _log_of(self, replica: failure.ReplicaFailure) -> str | None:
        """Where a failed replica's log is: its file here, or the command that shows it from Vertex AI."""
        if self.collection is not CUSTOM_JOBS and not replica.trial:
            return None  # a trial's replica, but the error does not say which trial's
        if self.local_dir is not None:
            folder = self.local_dir / "trials" / replica.trial if replica.trial else self.local_dir
            return f"{folder / 'logs' / replica.task_name}.log"
        if replica.trial:
            return None  # `vtrain logs` cannot pick one trial's replica
        return f"vtrain logs {self.id} --replica {replica.task_name}{self.target.flags()}"

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job to end; the resource when it SUCCEEDED, else raise JobFailedError."""
        self.wait(timeout)
        problem = self.failure()
        if problem is not None:
            raise problem
        return self.resource

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> str:
        """Block until the job ends; its final state (or its state at the timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = poll
        while not states.is_final(state := self.state):
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 5.0)
        return state

    def check_replica(self, replica: str | None) -> None:
        """A replica the job does not have is one WorkbenchError naming --replica, not an empty log."""
        spec = self.collection.spec_of(self.resource)
        if replica and (problem := missing_replica(spec, self.id, replica)):
            raise WorkbenchError(problem)

    def log_reader(self, replica: str | None = None) -> LogReader:
        """A reader of the job's log (of one replica) that goes on from where it stopped."""
        return LogReader(self.session, log_filter(self.id, replica))

    def logs(self, replica: str | None = None, follow: bool = False) -> Iterator[LogRecord]:
        """The job's log entries in time order; with `follow`, new ones until the job ends."""
        return _entries(self.log_reader(replica), self, follow)


class TuningHandle(Handle):
    """A submitted HyperparameterTuningJob: a handle with trials."""

    collection = TUNING_JOBS

    @property
    def trials(self) -> list[v1.Trial]:
        return list(self.resource.trials)

    def best_trial(self) -> v1.Trial | None:
        from .. import tuning

        return tuning.best_trial(self.resource)

    def trial(self, trial_id: str | int) -> TrialHandle:
        return TrialHandle(self, str(trial_id))

    def log_reader(self, replica: str | None = None, trial: str | int | None = None) -> LogReader:
        """Of one trial, or of all (then task names read `<trial>/<task name>`)."""
        return LogReader(self.session, log_filter(self.id, replica, trial), with_trial=trial is None)

    def logs(self, replica: str | None = None, follow: bool = False,  # type: ignore[override]
             trial: str | int | None = None) -> Iterator[LogRecord]:
        return _entries(self.log_reader(replica, trial), self, follow)


class TrialHandle:
    """One trial of a tuning job seen as a job: what the job monitor shows for a trial."""

    def __init__(self, tuning: TuningHandle, trial_id: str) -> None:
        self.tuning, self.trial_id = tuning, trial_id
        self.target, self.session, self.id = tuning.target, tuning.session, tuning.id
        self.name = f"{tuning.name}/trials/{trial_id}"

    @property
    def address_style(self) -> str:
        return self.tuning.address_style

    def refresh(self) -> v1.CustomJob:
        """The trial as a CustomJob: its job (the trial job spec with the trial's arguments), state,
        times and error (the infeasible reason)."""
        from .. import tuning

        resource = self.tuning.refresh()
        trial = next((t for t in resource.trials if t.id == self.trial_id), None)
        params = tuning.parameters_of(trial) if trial is not None else {}
        view = tuning.trial_job(tuning.trial_base_job(resource), params, self.trial_id).custom_job()
        view.name = self.name
        view.state = tuning.trial_job_state(trial, resource)
        if trial is not None:
            if trial.start_time:
                view.start_time = trial.start_time
            if trial.end_time:
                view.end_time = trial.end_time
            if trial.infeasible_reason:
                view.error = {"code": 3, "message": trial.infeasible_reason}
        return view

    @property
    def resource(self) -> v1.CustomJob:
        return self.refresh()

    @property
    def state(self) -> str:
        return self.refresh().state.name

    @property
    def error(self) -> str:
        return self.refresh().error.message

    def cancel(self) -> None:
        raise WorkbenchError(f"trial {self.trial_id}: a single trial cannot be cancelled; cancel the tuning job "
                             f"{self.tuning.id}")

    def log_reader(self, replica: str | None = None) -> LogReader:
        return self.tuning.log_reader(replica, self.trial_id)

    def logs(self, replica: str | None = None, follow: bool = False) -> Iterator[LogRecord]:
        return _entries(self.log_reader(replica), self, follow)


def _entries(reader: LogReader, handle: Handle | TrialHandle, follow: bool) -> Iterator[LogRecord]:
    return reader.follow(lambda: states.is_final(handle.state)) if follow else _readable(reader)


def _readable(reader: LogReader) -> Iterator[LogRecord]:
    """What is readable now, a few pages at a time: a long log starts printing at once."""
    while True:
        yield from reader.poll(pages=reader.pace.pages)
        if not reader.held:
            return


HANDLES: dict[Collection, type[Handle]] = {CUSTOM_JOBS: Handle, TUNING_JOBS: TuningHandle}


# ---- submitting, attaching, listing ------------------------------------------------------

def submit(spec: Any, target: Target | None = None, display_name: str | None = None) -> Handle:
    """Validate `spec` (any accepted format), check it for Vertex AI and upload its local packages
    when it goes there, and create the CustomJob on the target (a HyperparameterTuningJob for a
    legacy job with `hyperparameters`)."""
    target = target or Target()
    job = validate.check(JobSpec.load(spec, display_name), preflight.region_of(target))
    if display_name:
        job.display_name = display_name
    study = job.tuning_job()
    if study is not None:
        return submit_tuning(study, target, source_dir=job.source_dir)
    preflight.check(job, target)
    resource = prepare(_staged(job, target), target, CUSTOM_JOBS.output_prefix)
    return _create(CUSTOM_JOBS, target, resource)


def tuning_request(spec: Any, study: Any, *, max_trials: int = TUNING_TRIALS, parallel: int = TUNING_PARALLEL,
                   max_failed: int = 0, display_name: str | None = None) -> v1.HyperparameterTuningJob:
    """A HyperparameterTuningJob whose trials run `spec` (any accepted job format; relative local
    package paths are made absolute). `study` is a `v1.StudySpec` or its REST dict."""
    job = JobSpec.load(spec, display_name)
    if display_name:
        job.display_name = display_name
    if isinstance(study, dict):
        study = v1.StudySpec.from_json(json.dumps(study))
    trial_spec = job.custom_job_spec()
    absolute_packages(trial_spec, job.source_dir or Path.cwd())
    return v1.HyperparameterTuningJob(
        display_name=job.display_name, study_spec=study, max_trial_count=max_trials, parallel_trial_count=parallel,
        max_failed_trial_count=max_failed, trial_job_spec=trial_spec, labels=job.labels)


def submit_tuning(resource: v1.HyperparameterTuningJob, target: Target | None = None, *,
                  source_dir: Path | None = None) -> TuningHandle:
    """Check and create a HyperparameterTuningJob; relative local packageUris are relative to
    `source_dir` (default: the current folder). A mistake is one WorkbenchError before anything is sent."""
    from .. import tuning

    target = target or Target()
    resource = v1.HyperparameterTuningJob(resource)
    job = tuning.trial_base_job(resource)
    job.source_dir = source_dir
    validate.check(job, preflight.region_of(target))
    preflight.check(job, target)
    custom = prepare(_staged(job, target), target, TUNING_JOBS.output_prefix)
    resource.trial_job_spec = custom.job_spec
    for key, value in custom.labels.items():
        resource.labels[key] = value
    if custom.encryption_spec.kms_key_name and not resource.encryption_spec.kms_key_name:
        resource.encryption_spec = custom.encryption_spec
    validate.check_tuning(resource, local=target.local)
    handle = _create(TUNING_JOBS, target, resource)
    assert isinstance(handle, TuningHandle)
    return handle


def attach(job: str, target: Target | None = None, collection: Collection = CUSTOM_JOBS) -> Handle:
    """A handle on an existing job, by ID or resource name."""
    target = target or Target()
    if "/" in job:
        parts = job.split("/")
        if len(parts) != 6 or parts[0] != "projects" or parts[4] != collection.path:
            raise WorkbenchError(f"JOB: {job!r} is neither a job ID nor projects/P/locations/L/{collection.path}/ID")
        return HANDLES[collection](job, target.with_location(parts[1], parts[3]))
    return HANDLES[collection](f"{target.parent}/{collection.path}/{job}", target)


def attach_any(job: str, target: Target | None = None) -> Handle:
    """A handle, read once, on a CustomJob or a HyperparameterTuningJob: a resource name says which; an ID
    is looked up as a CustomJob, then as a tuning job (so `vtrain logs` and `cancel` take what `vtrain
    tune` printed). Neither: the CustomJob's 404."""
    from google.api_core.exceptions import NotFound

    target = target or Target()
    parts = job.split("/")
    if len(parts) > 1:
        collection = next((c for c in HANDLES if len(parts) == 6 and parts[4] == c.path), CUSTOM_JOBS)
        handle = attach(job, target, collection)  # a path of neither: attach's one line
        handle.refresh()
        return handle
    handle = attach(job, target)
    try:
        handle.refresh()
        return handle
    except NotFound as not_a_custom_job:
        tuning = attach(job, target, TUNING_JOBS)
        try:
            tuning.refresh()
        except NotFound:
            raise not_a_custom_job from None
        return tuning


def attach_tuning(job: str, target: Target | None = None) -> TuningHandle:
    handle = attach(job, target, TUNING_JOBS)
    assert isinstance(handle, TuningHandle)
    return handle


def list_jobs(target: Target | None = None, filter_text: str = "", collection: Collection = CUSTOM_JOBS) -> list[Any]:
    """The collection's jobs on the target, newest first (every page)."""
    target = target or Target()
    request = {"parent": target.parent, "filter": filter_text}
    return Session.of(target).jobs(lambda c: list(getattr(c, f"list_{collection.method}s")(request=request)))


def list_jobs_page(target: Target, page_size: int, page_token: str = "", filter_text: str = "", *,
                   collection: Collection = CUSTOM_JOBS, timeout: float | None = None) -> tuple[list[Any], str]:
    """One page of the collection's jobs on the target, newest first, and the token of the next
    page ("" after the last). `timeout`: seconds without an answer before the call fails."""
    request = {"parent": target.parent, "filter": filter_text, "page_size": page_size, "page_token": page_token}
    pager = Session.of(target).jobs(lambda c: getattr(c, f"list_{collection.method}s")(request=request,
                                                                                       timeout=timeout))
    return list(getattr(pager, f"{collection.method}s")), pager.next_page_token  # the first response only


def _staged(job: JobSpec, target: Target) -> JobSpec:
    """For Vertex AI: the job with its local packages uploaded to the staging bucket."""
    return job if target.local else staging.stage_packages(job, target)


def _create(collection: Collection, target: Target, resource: Any) -> Handle:
    session = Session.of(target)
    # the local service runs process replicas with this Python (never sent to Google)
    metadata = [(CLIENT_HEADER, Runtime.here().header())] if session.local_service() is not None else []
    created = session.jobs(lambda c: getattr(c, f"create_{collection.method}")(
        parent=target.parent, **{collection.method: resource}, metadata=metadata))
    return HANDLES[collection](created.name, target, created)
