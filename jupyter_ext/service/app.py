"""The local service's HTTP API: Vertex AI's v1 job collections and Cloud Logging's
`entries:list`, in proto3 JSON exactly as the official clients' REST transports
send and parse it. Every request needs the service's bearer token.

Each collection (CustomJobs, HyperparameterTuningJobs) is served by the same
handlers over its `ResourceManager`: create, list, get, delete, cancel.
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

from ..errors import FilterError, ServiceError
from .logs import list_entries
from .resources import ResourceManager

STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED",
                500: "INTERNAL"}
PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
MAX_PAGE = 1000
_LIST_FILTER = re.compile(r'\s*(state|display_name|displayName)\s*=\s*(?:"([^"]*)"|([^\s"]+))\s*(?:AND\s+|$)', re.I)


class ApiHandler(tornado.web.RequestHandler):
    def initialize(self, token: str, manager: ResourceManager | None = None, jobs_root: Path | None = None) -> None:
        self.token = token
        self.manager = manager
        self.jobs_root = jobs_root

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
        self.send(self.manager.create(self.parent(project, location), resource))

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
        assert self.jobs_root is not None
        self.send(list_entries(log_sources(self.jobs_root, project), filter_text=body.get("filter", ""),
                               order_by=body.get("orderBy", "timestamp asc"),
                               page_size=int(body.get("pageSize") or 0), page_token=body.get("pageToken", "")))


class NotFoundHandler(ApiHandler):
    def prepare(self) -> None:
        super().prepare()
        raise ServiceError(404, "NOT_FOUND", f"no such API: {self.request.method} {self.request.path}")


def make_app(managers: Sequence[ResourceManager], token: str, jobs_root: Path) -> tornado.web.Application:
    """The service's routes: every manager's collection, entries:list over `jobs_root`, 404 for the rest."""
    routes: list[Any] = []
    for manager in managers:
        args = {"token": token, "manager": manager}
        base = PARENT + manager.collection.path
        routes += [(base, CollectionHandler, args),
                   (base + r"/(?P<job>[^/:]+)", ResourceHandler, args),
                   (base + r"/(?P<job>[^/:]+):cancel", CancelHandler, args)]
    routes += [(r"/v2/entries:list", EntriesHandler, {"token": token, "jobs_root": jobs_root}),
               (r".*", NotFoundHandler, {"token": token})]
    return tornado.web.Application(routes, default_handler_class=NotFoundHandler,
                                   default_handler_args={"token": token})


def log_sources(root: Path, project: str) -> Iterator[tuple[str, str, Path, str | None]]:
    """Every job folder's logs; a tuning job's trials are `<job>/trials/<trial id>/`."""
    if not root.is_dir():
        return
    for job_dir in sorted(root.iterdir()):
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
