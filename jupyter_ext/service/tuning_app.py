"""HTTP routes of Vertex AI's v1 HyperparameterTuningJob resource on the local service.

create, get, list, cancel and delete, in proto3 JSON as the official clients'
REST transports send and parse it; auth, errors and encoding come from the
CustomJob API's `ApiHandler`. `make_app` adds `routes(args)` before its catch-all.
"""

from __future__ import annotations

from typing import Any

from google.cloud.aiplatform_v1 import types as v1

from .app import ApiHandler
from ..errors import ServiceError
from .tuning_jobs import KIND, StoredTuningJob, TuningManager, manager_for

TUNING_JOBS = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/hyperparameterTuningJobs"


def routes(args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [(TUNING_JOBS, TuningJobsHandler, args),
            (TUNING_JOBS + r"/(?P<job>[^/:]+)", TuningJobHandler, args),
            (TUNING_JOBS + r"/(?P<job>[^/:]+):cancel", TuningCancelHandler, args)]


class _TuningHandler(ApiHandler):
    @property
    def tuning(self) -> TuningManager:
        return manager_for(self.manager)

    def tuning_job(self, project: str, location: str, job: str) -> StoredTuningJob:
        stored = self.tuning.get(job)
        if stored.parent != self.parent(project, location):
            raise ServiceError(404, "NOT_FOUND", f"{KIND} {job} does not exist in {self.parent(project, location)}")
        return stored


class TuningJobsHandler(_TuningHandler):
    def post(self, project: str, location: str) -> None:
        resource = self.parse_body(v1.HyperparameterTuningJob)
        self.send(self.tuning.create(self.parent(project, location), resource))

    def get(self, project: str, location: str) -> None:
        self.send_list(self.tuning.list, self.parent(project, location), "hyperparameterTuningJobs")


class TuningJobHandler(_TuningHandler):
    def get(self, project: str, location: str, job: str) -> None:
        self.send(self.tuning_job(project, location, job).resource)

    def delete(self, project: str, location: str, job: str) -> None:
        stored = self.tuning_job(project, location, job)
        self.tuning.delete(stored.id)
        self.send({"name": f"{stored.parent}/operations/delete-{stored.id}", "done": True,
                   "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}})


class TuningCancelHandler(_TuningHandler):
    def post(self, project: str, location: str, job: str) -> None:
        self.tuning.cancel(self.tuning_job(project, location, job).id)
        self.send({})
