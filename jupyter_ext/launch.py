"""Submit, watch, cancel and read the logs of jobs, through the official clients only.

One code path for both places a job can run: the `google-cloud-aiplatform` job
client and the `google-cloud-logging` client talk either to Vertex AI and Cloud
Logging or, for local jobs, to the workbench's local service, which speaks the
same REST API. Locally the service is started on demand and the client
authenticates with the service's token as an OAuth bearer token.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar, Iterator

from google.cloud.aiplatform_v1 import types as v1

from . import validate
from .errors import WorkbenchError
from .spec import JobSpec

LOCAL_PROJECT = "local"
LOCAL_REGION = "us-central1"
BACKEND_LABEL = "vtrain-backend"
FINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
EXIT_CODES = {"JOB_STATE_SUCCEEDED": 0, "JOB_STATE_FAILED": 1, "JOB_STATE_CANCELLED": 130}
CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job}/cpu?project={project}"


@dataclass(frozen=True)
class Target:
    """Where jobs run: the local service (default) or Vertex AI."""

    project: str = LOCAL_PROJECT
    region: str = LOCAL_REGION
    staging_bucket: str = ""
    local: bool = True
    backend: str = "process"  # local only: process or docker

    @classmethod
    def vertex(cls, project: str, region: str, staging_bucket: str = "") -> Target:
        if not project or not region:
            raise WorkbenchError("--project and --region: both are needed to run on Vertex AI")
        return cls(project, region, staging_bucket, local=False)

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def connection(self) -> tuple[str, Any]:
        """(API endpoint, credentials) for the official clients."""
        if not self.local:
            return f"{self.region}-aiplatform.googleapis.com", None  # the user's default credentials
        from google.oauth2.credentials import Credentials

        from .service import daemon

        info = daemon.ensure_running()
        return info["endpoint"], Credentials(token=daemon.read_token())


@dataclass(frozen=True)
class LogRecord:
    timestamp: datetime
    task_name: str
    severity: str
    text: str
    insert_id: str


@dataclass
class _Handle:
    """What a handle on any submitted job resource has: its name, state, error, waiting."""

    name: str  # projects/P/locations/L/<collection>/ID
    target: Target
    _resource: Any = field(default=None, repr=False)
    CONSOLE: ClassVar[str] = ""

    @property
    def id(self) -> str:
        return self.name.rsplit("/", 1)[1]

    @property
    def local_dir(self) -> Any:
        """A local job's folder (logs, outputs), or None for a Vertex AI job."""
        from .paths import jobs_dir

        return jobs_dir() / self.id if self.target.local else None

    @property
    def console_url(self) -> str:
        return "" if self.target.local else self.CONSOLE.format(region=self.target.region, job=self.id,
                                                               project=self.target.project)

    def refresh(self) -> Any:
        self._resource = self._get()
        return self._resource

    def _get(self) -> Any:
        raise NotImplementedError

    @property
    def resource(self) -> Any:
        return self._resource or self.refresh()

    @property
    def state(self) -> str:
        return self.refresh().state.name

    @property
    def error(self) -> str:
        return self.resource.error.message

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> str:
        """Block until the job ends; its final state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = poll
        while (state := self.state) not in FINAL:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 5.0)
        return state


@dataclass
class JobHandle(_Handle):
    """A submitted CustomJob, local or on Vertex AI."""

    CONSOLE: ClassVar[str] = CONSOLE

    def _get(self) -> v1.CustomJob:
        return _job_client(self.target).get_custom_job(name=self.name)

    def cancel(self) -> None:
        _job_client(self.target).cancel_custom_job(name=self.name)

    def logs(self, replica: str | None = None, follow: bool = False, poll: float = 0.5) -> Iterator[LogRecord]:
        """The job's log entries in time order; with `follow`, new ones until the job ends."""
        return read_logs(self, replica, follow, poll)


def submit(spec: Any, target: Target | None = None, display_name: str | None = None) -> JobHandle:
    """Validate `spec` (any accepted format) and create the CustomJob on the target."""
    target = target or Target()
    job = validate.check(JobSpec.load(spec, display_name))
    if display_name:
        job.display_name = display_name
    resource = _prepared_custom_job(job, target, "aiplatform-custom-job")
    created = _job_client(target).create_custom_job(parent=target.parent, custom_job=resource)
    return JobHandle(created.name, target, created)


def attach(job: str, target: Target | None = None) -> JobHandle:
    """A handle on an existing job, by ID or resource name."""
    target = target or Target()
    if "/" in job:
        parts = job.split("/")
        if len(parts) != 6 or parts[0] != "projects" or parts[4] != "customJobs":
            raise WorkbenchError(f"JOB: {job!r} is neither a job ID nor projects/P/locations/L/customJobs/ID")
        target = Target(parts[1], parts[3], target.staging_bucket, target.local, target.backend)
        return JobHandle(job, target)
    return JobHandle(f"{target.parent}/customJobs/{job}", target)


def list_jobs(target: Target | None = None, filter_text: str = "") -> list[v1.CustomJob]:
    target = target or Target()
    request = v1.ListCustomJobsRequest(parent=target.parent, filter=filter_text)
    return list(_job_client(target).list_custom_jobs(request=request))


def read_logs(handle: JobHandle, replica: str | None, follow: bool, poll: float) -> Iterator[LogRecord]:
    """A job's log entries in time order; with `follow`, until the job is final (see `read_entries`)."""
    return read_entries(handle.target, log_query(handle.id, replica), follow=follow,
                        is_final=lambda: handle.state in FINAL, poll=poll)


def log_query(job_id: str, replica: str | None = None) -> str:
    """The filter gcloud uses for a job's (or one replica's) entries."""
    query = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
    return query + (f' AND resource.labels.task_name="{replica}"' if replica else "")


def entries_since(target: Target, query: str, since: str = "", page_size: int = 1000) -> Iterator[tuple[str, Any]]:
    """Raw log entries matching `query` at or after `since` (RFC 3339), oldest first, each with
    its timestamp as text: one pass through the Cloud Logging client."""
    from google.cloud import logging as cloud_logging

    query += f' AND timestamp>="{since or "1970-01-01T00:00:00Z"}"'
    for entry in _logging_client(target).list_entries(resource_names=[f"projects/{target.project}"],
                                                      filter_=query, order_by=cloud_logging.ASCENDING,
                                                      page_size=page_size):
        yield entry.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), entry


def to_record(entry: Any) -> LogRecord:
    payload = entry.payload
    if isinstance(payload, str):
        text = payload
    else:  # a JSON line: its message, or the line itself
        text = str(payload["message"]) if isinstance(payload, dict) and "message" in payload else json.dumps(payload)
    labels = entry.resource.labels if entry.resource else {}
    return LogRecord(entry.timestamp, labels.get("task_name", ""), entry.severity or "DEFAULT", text, entry.insert_id)


def _job_client(target: Target) -> Any:
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

    endpoint, credentials = target.connection()
    return JobServiceClient(credentials=credentials, transport="rest", client_options={"api_endpoint": endpoint})


def _logging_client(target: Target) -> Any:
    from google.cloud import logging as cloud_logging

    if not target.local:
        return cloud_logging.Client(project=target.project)
    endpoint, credentials = target.connection()
    return cloud_logging.Client(project=target.project, credentials=credentials, _use_grpc=False,
                                client_options={"api_endpoint": endpoint})


def _resolve_local_packages(resource: v1.CustomJob, job: JobSpec) -> None:
    """The service runs elsewhere than the caller: relative package paths become absolute."""
    from pathlib import Path

    base = job.source_dir or Path.cwd()
    for pool in resource.job_spec.worker_pool_specs:
        if "python_package_spec" in pool:
            uris = pool.python_package_spec.package_uris
            for n, uri in enumerate(uris):
                if "://" not in uri:
                    uris[n] = str((base / uri).resolve())


def _check_cloud_packages(resource: v1.CustomJob) -> None:
    for pos, pool in enumerate(resource.job_spec.worker_pool_specs):
        if "python_package_spec" in pool:
            for n, uri in enumerate(pool.python_package_spec.package_uris):
                if not uri.startswith("gs://"):
                    raise WorkbenchError(f"workerPoolSpecs[{pos}].pythonPackageSpec.packageUris[{n}]: {uri!r} is not "
                                         "in Cloud Storage; Vertex AI needs a gs:// URI (build an sdist and upload it)")


# ---- hyperparameter tuning jobs ------------------------------------------------------------

# the console's page of a tuning job: CONSOLE's training page, without the replica (`/cpu`) tab
TUNING_CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job}?project={project}"


@dataclass
class TuningHandle(_Handle):
    """A submitted HyperparameterTuningJob, local or on Vertex AI."""

    CONSOLE: ClassVar[str] = TUNING_CONSOLE

    def _get(self) -> v1.HyperparameterTuningJob:
        return _job_client(self.target).get_hyperparameter_tuning_job(name=self.name)

    @property
    def trials(self) -> list[v1.Trial]:
        return list(self.resource.trials)

    def best_trial(self) -> v1.Trial | None:
        from . import tuning

        return tuning.best_trial(self.resource)

    def cancel(self) -> None:
        _job_client(self.target).cancel_hyperparameter_tuning_job(name=self.name)

    def trial(self, trial_id: str | int) -> TrialHandle:
        return TrialHandle(self, str(trial_id))

    def logs(self, replica: str | None = None, trial: str | int | None = None, follow: bool = False,
             poll: float = 0.5) -> Iterator[LogRecord]:
        """Log entries in time order, of one trial or of all (then task names read `<trial>/<task name>`)."""
        query = f'resource.type="ml_job" AND resource.labels.job_id="{self.id}"'
        if trial is not None:
            query += f' AND labels."ml.googleapis.com/trial_id"="{trial}"'
        if replica:
            query += f' AND resource.labels.task_name="{replica}"'
        return read_entries(self.target, query, follow=follow, is_final=lambda: self.state in FINAL,
                            with_trial=trial is None, poll=poll)


@dataclass
class TrialHandle:
    """One trial of a tuning job, seen as a job: what the job monitor shows for a trial."""

    tuning: TuningHandle
    trial_id: str

    @property
    def name(self) -> str:
        return f"{self.tuning.name}/trials/{self.trial_id}"

    @property
    def id(self) -> str:
        return self.tuning.id

    @property
    def target(self) -> Target:
        return self.tuning.target

    def trial(self, resource: v1.HyperparameterTuningJob | None = None) -> v1.Trial | None:
        for trial in (resource or self.tuning.refresh()).trials:
            if trial.id == self.trial_id:
                return trial
        return None

    def refresh(self) -> v1.CustomJob:
        """The trial as a CustomJob view: its job (the trial job spec with the trial's arguments), state,
        times and error (the infeasible reason)."""
        from . import tuning

        resource = self.tuning.refresh()
        trial = self.trial(resource)
        base = tuning.trial_base_job(resource)
        params = tuning.parameters_of(trial) if trial is not None else {}
        job = tuning.trial_job(base, params, self.trial_id)
        view = v1.CustomJob(name=self.name, display_name=job.display_name, job_spec=job.spec, labels=job.labels)
        if trial is None:  # not started yet
            view.state = "JOB_STATE_CANCELLED" if resource.state.name in FINAL else "JOB_STATE_QUEUED"
            return view
        view.state = trial_job_state(trial, resource)
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

    def logs(self, replica: str | None = None, follow: bool = False, poll: float = 0.5) -> Iterator[LogRecord]:
        query = (f'resource.type="ml_job" AND resource.labels.job_id="{self.tuning.id}" '
                 f'AND labels."ml.googleapis.com/trial_id"="{self.trial_id}"')
        if replica:
            query += f' AND resource.labels.task_name="{replica}"'
        return read_entries(self.target, query, follow=follow, is_final=lambda: self.state in FINAL, poll=poll)


def trial_job_state(trial: v1.Trial, resource: v1.HyperparameterTuningJob) -> str:
    """A trial's state as a JobState name: ACTIVE is RUNNING, INFEASIBLE is FAILED (CANCELLED when stopped)."""
    name = trial.state.name
    if name == "SUCCEEDED":
        return "JOB_STATE_SUCCEEDED"
    if name == "INFEASIBLE":
        stopped = trial.infeasible_reason.startswith(("cancelled", "stopped"))
        return "JOB_STATE_CANCELLED" if stopped else "JOB_STATE_FAILED"
    if name == "STOPPING" or resource.state.name == "JOB_STATE_CANCELLING":
        return "JOB_STATE_CANCELLING"
    return "JOB_STATE_RUNNING" if name == "ACTIVE" else "JOB_STATE_QUEUED"


def submit_tuning(spec: Any, study: Any, *, max_trials: int, parallel: int = 1, max_failed: int = 0,
                  target: Target | None = None, display_name: str | None = None,
                  labels: dict[str, str] | None = None) -> TuningHandle:
    """Create a HyperparameterTuningJob whose trials run `spec` (any accepted job format).

    `study` is a `v1.StudySpec`, its REST dict, or `tuning.study_spec(...)`'s result. The tuning job is
    checked here with the service's rules, so a mistake is one WorkbenchError before anything is sent.
    """
    from . import tuning

    target = target or Target()
    job = validate.check(JobSpec.load(spec, display_name))
    if display_name:
        job.display_name = display_name
    custom = _prepared_custom_job(job, target, "aiplatform-hyperparameter-tuning-job")
    if isinstance(study, dict):
        from google.protobuf import json_format

        parsed = v1.StudySpec()
        json_format.ParseDict(study, parsed._pb)
        study = parsed
    resource = v1.HyperparameterTuningJob(
        display_name=job.display_name, study_spec=study, max_trial_count=max_trials, parallel_trial_count=parallel,
        max_failed_trial_count=max_failed, trial_job_spec=custom.job_spec, labels={**custom.labels, **(labels or {})})
    found = tuning.problems(resource)
    if found:
        raise WorkbenchError("\n".join(found))
    created = _job_client(target).create_hyperparameter_tuning_job(parent=target.parent,
                                                                   hyperparameter_tuning_job=resource)
    return TuningHandle(created.name, target, created)


def submit_tuning_request(resource: v1.HyperparameterTuningJob, target: Target | None = None,
                          source_dir: Any = None) -> TuningHandle:
    """Create a ready-made HyperparameterTuningJob (e.g. a REST body from a file); relative local
    packageUris are relative to `source_dir` (default: the current folder)."""
    from . import tuning

    target = target or Target()
    resource = v1.HyperparameterTuningJob(resource)
    job = tuning.trial_base_job(resource)
    job.source_dir = source_dir
    custom = _prepared_custom_job(job, target, "aiplatform-hyperparameter-tuning-job")
    resource.trial_job_spec = custom.job_spec
    for key, value in custom.labels.items():
        resource.labels[key] = value
    found = tuning.problems(resource)
    if found:
        raise WorkbenchError("\n".join(found))
    created = _job_client(target).create_hyperparameter_tuning_job(parent=target.parent,
                                                                   hyperparameter_tuning_job=resource)
    return TuningHandle(created.name, target, created)


def attach_tuning(job: str, target: Target | None = None) -> TuningHandle:
    """A handle on an existing tuning job, by ID or resource name."""
    target = target or Target()
    if "/" in job:
        parts = job.split("/")
        if len(parts) != 6 or parts[0] != "projects" or parts[4] != "hyperparameterTuningJobs":
            raise WorkbenchError(f"JOB: {job!r} is neither a job ID nor "
                                 "projects/P/locations/L/hyperparameterTuningJobs/ID")
        target = Target(parts[1], parts[3], target.staging_bucket, target.local, target.backend)
        return TuningHandle(job, target)
    return TuningHandle(f"{target.parent}/hyperparameterTuningJobs/{job}", target)


def list_tuning_jobs(target: Target | None = None, filter_text: str = "") -> list[v1.HyperparameterTuningJob]:
    target = target or Target()
    request = v1.ListHyperparameterTuningJobsRequest(parent=target.parent, filter=filter_text)
    return list(_job_client(target).list_hyperparameter_tuning_jobs(request=request))


def read_entries(target: Target, query: str, *, follow: bool, is_final: Any, with_trial: bool = False,
                 poll: float = 0.5) -> Iterator[LogRecord]:
    """Poll the logging API with back-off; entries are de-duplicated by insertId, and when
    following, reading stops once `is_final()` was true before a read (then every entry is
    written). With `with_trial`, task names read `<trial>/<task>`."""
    since, seen_at_since = "", set()
    delay, done = poll, False
    while True:
        if follow:
            done = is_final()
        new = 0
        for stamp, entry in entries_since(target, query, since):
            if entry.insert_id in seen_at_since:
                continue
            if stamp != since:
                since, seen_at_since = stamp, set()
            seen_at_since.add(entry.insert_id)
            new += 1
            record = to_record(entry)
            trial = (entry.labels or {}).get("ml.googleapis.com/trial_id", "")
            if with_trial and trial:
                record = LogRecord(record.timestamp, f"{trial}/{record.task_name}", record.severity, record.text,
                                   record.insert_id)
            yield record
        if not follow or done:
            return
        delay = poll if new else min(delay * 1.5, 5.0)
        time.sleep(delay)


def _prepared_custom_job(job: JobSpec, target: Target, output_prefix: str) -> v1.CustomJob:
    """The CustomJob to create for `job` on `target`: local package paths made absolute and the
    backend label, or on Vertex AI a base output directory under the staging bucket (as the SDK
    names it, `<bucket>/<output_prefix>-<time>`)."""
    resource = job.custom_job()
    if target.local:
        if target.backend != "process":
            resource.labels[BACKEND_LABEL] = target.backend
        _resolve_local_packages(resource, job)
    else:
        _check_cloud_packages(resource)
        if not resource.job_spec.base_output_directory.output_uri_prefix and target.staging_bucket:
            stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d-%H-%M-%S-%f")[:-3]
            resource.job_spec.base_output_directory.output_uri_prefix = (
                f"{target.staging_bucket.rstrip('/')}/{output_prefix}-{stamp}")
    return resource
