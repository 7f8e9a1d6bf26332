"""The local service's HTTP API: Vertex AI's v1 job collections and Cloud Logging's
`entries:list`, in proto3 JSON exactly as the official clients' REST transports
send and parse it. Every request needs the service's bearer token.

Each collection (CustomJobs, HyperparameterTuningJobs) is served by the same
handlers over its `ResourceManager`: create, list, get, delete, cancel.
`entries:list` can put on Cloud Logging's read quota and ingestion delay, and
every request can be recorded (see `emulation`).
"""

from __future__ import annotations

import base64
import hmac
import json
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

import proto
import tornado.web
from google.cloud.aiplatform_v1 import types as v1
from google.protobuf import json_format

from ..api import LOCAL_PROJECT
from ..environment import CLIENT_HEADER, Runtime
from ..errors import FilterError, ServiceError
from .emulation import Options, ReadQuota, RequestRecord, quota_error, visible_until
from .logs import list_entries
from .resources import ResourceManager

STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED",
                500: "INTERNAL"}
PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
MAX_PAGE = 1000
_LIST_FILTER = re.compile(r'\s*(state|display_name|displayName)\s*=\s*(?:"([^"]*)"|([^\s"]+))\s*(?:AND\s+|$)', re.I)


class ApiHandler(tornado.web.RequestHandler):
    def initialize(self, token: str, record: RequestRecord | None = None, manager: ResourceManager | None = None,
                   jobs_root: Path | None = None, options: Options = Options(), quota: ReadQuota | None = None,
                   managers: Sequence[ResourceManager] = ()) -> None:
        self.token, self.record = token, record
        self.manager, self.jobs_root, self.options, self.quota = manager, jobs_root, options, quota
        self.managers = managers

    @property
    def projects(self) -> dict[str, str]:
        """The project of every job the service ran, by job ID."""
        return {job_id: project for manager in self.managers for job_id, project in manager.store.projects().items()}

    def on_finish(self) -> None:
        if self.record is not None:
            body = self.request.body.decode("utf-8", "replace") if self.request.method == "POST" else ""
            self.record.add(method=self.request.method, path=self.request.path, status=self.get_status(),
                            agent=self.request.headers.get("User-Agent", ""), body=body)

    def prepare(self) -> None:
        supplied = self.request.headers.get("Authorization", "")
        if not hmac.compare_digest(supplied.encode(), f"Bearer {self.token}".encode()):
            raise ServiceError(401, "UNAUTHENTICATED", "a valid bearer token is required "
                                                       "(see `vtrain service status --json` for the token file)")

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, ServiceError):
            self._error(e.http, e.status, str(e))
        elif isinstance(e, FilterError):
            self._error(400, "INVALID_ARGUMENT", str(e))
        else:
            super()._handle_request_exception(e)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self._error(status_code, STATUS_NAMES.get(status_code, "UNKNOWN"), self._reason)

    def _error(self, code: int, status: str, message: str) -> None:
        if self._finished:
            return
        self.clear()
        self.set_status(code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": {"code": code, "message": message, "status": status}}))

    def send(self, data: Any) -> None:
        """A message as proto3 JSON; enums as numbers when the client asks (`$alt=json;enum-encoding=int`)."""
        if isinstance(data, proto.Message):
            data = json_format.MessageToDict(type(data).pb(data), use_integers_for_enums=self._int_enums())
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def _int_enums(self) -> bool:
        return "enum-encoding=int" in self.get_query_argument("$alt", "")


class _CollectionHandler(ApiHandler):
    manager: ResourceManager

    def parent(self, project: str, location: str) -> str:
        return f"projects/{project}/locations/{location}"

    def stored(self, project: str, location: str, job: str) -> Any:
        stored = self.manager.get(job)
        parent = self.parent(project, location)
        if stored.parent != parent:
            raise ServiceError(404, "NOT_FOUND", f"{self.manager.collection.kind} {job} does not exist in {parent}")
        return stored


class CollectionHandler(_CollectionHandler):
    def post(self, project: str, location: str) -> None:
        resource_type = self.manager.collection.resource_type
        try:
            resource = resource_type.from_json(self.request.body or b"{}", ignore_unknown_fields=False)
        except (json_format.ParseError, ValueError) as exc:
            raise ServiceError(400, "INVALID_ARGUMENT", f"invalid JSON body: {exc}") from None
        runtime = Runtime.from_header(self.request.headers.get(CLIENT_HEADER, ""))  # who submits: their Python
        self.send(self.manager.create(self.parent(project, location), resource, runtime))

    def get(self, project: str, location: str) -> None:
        """One page, as the List methods answer: `{<collection>: [...], nextPageToken}`."""
        states, name = _list_filter(self.get_query_argument("filter", ""))
        size_text = self.get_query_argument("pageSize", "") or "0"
        if not size_text.isdigit():
            raise ServiceError(400, "INVALID_ARGUMENT", f"pageSize: not a whole number: {size_text!r}")
        size = min(int(size_text), MAX_PAGE) or 100
        after = _page_after(self.get_query_argument("pageToken", ""))
        rows = self.manager.list(self.parent(project, location), states=states, display_name=name, after=after,
                                 limit=size + 1)
        body: dict[str, Any] = {self.manager.collection.path: [
            json_format.MessageToDict(r.resource._pb, use_integers_for_enums=self._int_enums()) for r in rows[:size]]}
        if len(rows) > size:
            last = rows[size - 1]
            token = json.dumps([last.resource.create_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), last.id])
            body["nextPageToken"] = base64.urlsafe_b64encode(token.encode()).decode()
        self.send(body)


class ResourceHandler(_CollectionHandler):
    def get(self, project: str, location: str, job: str) -> None:
        self.send(self.stored(project, location, job).resource)

    def delete(self, project: str, location: str, job: str) -> None:
        stored = self.stored(project, location, job)
        self.manager.delete(stored.id)
        self.send({"name": f"{stored.parent}/operations/delete-{stored.id}", "done": True,
                   "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}})


class CancelHandler(_CollectionHandler):
    def post(self, project: str, location: str, job: str) -> None:
        self.manager.cancel(self.stored(project, location, job).id)
        self.send({})


class EntriesHandler(ApiHandler):
    """Cloud Logging `entries:list` over the local jobs' replica logs."""

    def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            raise ServiceError(400, "INVALID_ARGUMENT", "invalid JSON body") from None
        names = body.get("resourceNames") or [f"projects/{p}" for p in body.get("projectIds", [])] or ["projects/local"]
        project = names[0].split("/")[1] if "/" in names[0] else names[0]
        if self.quota is not None and (wait := self.quota.admit(project)):
            self.set_status(429)
            self.set_header("Retry-After", f"{wait:.0f}" if wait >= 1 else "1")
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(quota_error(project, self.quota.per_minute)))
            return
        assert self.jobs_root is not None
        self.send(list_entries(log_sources(self.jobs_root, project, self.projects), filter_text=body.get("filter", ""),
                               order_by=body.get("orderBy", "timestamp asc"),
                               page_size=int(body.get("pageSize") or 0), page_token=body.get("pageToken", ""),
                               visible_until=visible_until(self.options.ingestion_delay)))


class NotFoundHandler(ApiHandler):
    def prepare(self) -> None:
        super().prepare()
        raise ServiceError(404, "NOT_FOUND", f"no such API: {self.request.method} {self.request.path}")


def make_app(managers: Sequence[ResourceManager], token: str, jobs_root: Path, options: Options = Options(),
             record: RequestRecord | None = None) -> tornado.web.Application:
    """The service's routes: every manager's collection, entries:list over `jobs_root`, 404 for the rest."""
    common = {"token": token, "record": record}
    routes: list[Any] = []
    for manager in managers:
        args = {**common, "manager": manager}
        base = PARENT + manager.collection.path
        routes += [(base, CollectionHandler, args),
                   (base + r"/(?P<job>[^/:]+)", ResourceHandler, args),
                   (base + r"/(?P<job>[^/:]+):cancel", CancelHandler, args)]
    quota = ReadQuota(options.read_quota) if options.read_quota else None
    routes += [(r"/v2/entries:list", EntriesHandler, {**common, "jobs_root": jobs_root, "options": options,
                                                      "quota": quota, "managers": managers}),
               (r".*", NotFoundHandler, common)]
    return tornado.web.Application(routes, default_handler_class=NotFoundHandler, default_handler_args=common)


def log_sources(root: Path, project: str, projects: dict[str, str]) -> Iterator[tuple[str, str, Path, str | None]]:
    """The logs of the project's jobs, as Cloud Logging keeps each project's apart (a job the service
    did not run, as `vtrain run`'s, belongs to the local project); a tuning job's trials are
    `<job>/trials/<trial id>/`."""
    if not root.is_dir():
        return
    for job_dir in sorted(root.iterdir()):
        if projects.get(job_dir.name, LOCAL_PROJECT) != project:
            continue
        yield job_dir.name, project, job_dir, None
        trials = job_dir / "trials"
        if trials.is_dir():
            for trial_dir in sorted(trials.iterdir(), key=lambda d: (len(d.name), d.name)):
                yield job_dir.name, project, trial_dir, trial_dir.name


def _list_filter(text: str) -> tuple[list[int] | None, str | None]:
    """The filter subset of the List methods: `state=...` and `display_name=...`, joined by AND."""
    states, name, pos = [], None, 0
    while pos < len(text):
        m = _LIST_FILTER.match(text, pos)
        if not m:
            raise ServiceError(400, "INVALID_ARGUMENT", f"filter: cannot read {text[pos:]!r} "
                                                        '(supported: state="JOB_STATE_..." and display_name="...", joined by AND)')
        key, quoted, bare = m.groups()
        value = quoted if quoted is not None else bare
        if key.lower() == "state":
            try:
                states.append(int(v1.JobState[value.upper()]))
            except KeyError:
                raise ServiceError(400, "INVALID_ARGUMENT", f"filter: unknown state {value!r}") from None
        else:
            name = value
        pos = m.end()
    return states or None, name


def _page_after(token: str) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        create_time, job_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(create_time), str(job_id)
    except (ValueError, TypeError):
        raise ServiceError(400, "INVALID_ARGUMENT", "pageToken: not a token this service gave") from None
