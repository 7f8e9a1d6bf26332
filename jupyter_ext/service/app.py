"""The local service's HTTP API: Vertex AI's v1 job collections and Cloud Logging's
`entries:list`, in proto3 JSON exactly as the official clients' REST transports
send and parse it. Every request needs the service's bearer token.

Each collection (CustomJobs, HyperparameterTuningJobs) is served by the same
handlers over its `ResourceManager`: create, list, get, delete, cancel.
`entries:list` can put on Cloud Logging's read quota and ingestion delay, and
every request can be recorded (see `emulation`).

Hostile or mistaken requests get Google's error shape, never a 500: a body that
is not what the method takes is 400 INVALID_ARGUMENT naming the field; a body over
MAX_BODY bytes is 413 (it is read to its end but not kept, so the client gets the
answer); a job store that fails is 503 UNAVAILABLE. Anything else is a bug: tornado
logs it with its traceback to the service's log and answers 500 INTERNAL.

No request blocks the event loop: reading and writing the store, creating,
cancelling and deleting jobs, and listing log entries run in bounded thread pools
(`Workers`), each kind in its own, so a slow `entries:list` never holds up a GET.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import proto
import tornado.ioloop
import tornado.web
from google.cloud.aiplatform_v1 import types as v1
from google.protobuf import json_format

from ..api import LOCAL_PROJECT
from ..environment import CLIENT_HEADER, Runtime
from ..errors import FilterError, ServiceError
from ..spec import unknown_enum_value
from .emulation import Options, ReadQuota, RequestRecord, ingestion, quota_error
from .logs import list_entries
from .logs.query import shown
from .resources import ResourceManager

STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED",
                413: "INVALID_ARGUMENT", 500: "INTERNAL", 503: "UNAVAILABLE"}
PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
MAX_PAGE = 1000
MAX_BODY = 10 * 2**20  # bytes of a request body, as Google's API front ends take
MAX_STREAMED = 2**30  # bytes read (and dropped) of a larger body before the connection is closed
MAX_MESSAGE = 500  # characters of an error message quoting the request
INT32 = 2**31 - 1
ENTRIES_FIELDS = {"resourceNames", "projectIds", "filter", "orderBy", "pageSize", "pageToken"}
_LIST_FILTER = re.compile(r'\s*(state|display_name|displayName)\s*=\s*(?:"([^"]*)"|([^\s"]+))\s*(?:AND\s+|$)', re.I)
_RESOURCE_NAME = re.compile(r"projects/([^/]+)(?:/.*)?", re.DOTALL)
T = TypeVar("T")


@dataclass
class Workers:
    """The bounded thread pools slow work runs in, one per kind, off the event loop."""

    reads: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(4, "service-reads"))
    writes: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(2, "service-writes"))
    logs: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(2, "service-logs"))

    def close(self) -> None:
        for pool in (self.reads, self.writes, self.logs):
            pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class Service:
    """What every handler shares."""

    token: str
    managers: Sequence[ResourceManager]
    jobs_root: Path
    options: Options = field(default_factory=Options)
    record: RequestRecord | None = None
    workers: Workers = field(default_factory=Workers)

    def __post_init__(self) -> None:
        self.quota = ReadQuota(self.options.read_quota) if self.options.read_quota else None

    def projects(self) -> dict[str, str]:
        """The project of every job the service ran, by job ID (reads the store: not on the loop)."""
        return {job_id: project for manager in self.managers for job_id, project in manager.store.projects().items()}


@tornado.web.stream_request_body  # so a body can be measured as it comes, and an oversized one dropped
class ApiHandler(tornado.web.RequestHandler):
    def initialize(self, service: Service, manager: ResourceManager | None = None) -> None:
        self.service = service
        self.manager = manager  # type: ignore[assignment]
        self._body, self._size = bytearray(), 0

    def prepare(self) -> None:
        supplied = self.request.headers.get("Authorization", "")
        if not hmac.compare_digest(supplied.encode("utf-8", "replace"), f"Bearer {self.service.token}".encode()):
            raise ServiceError(401, "UNAUTHENTICATED", "a valid bearer token is required "
                                                       "(see `vtrain service status --json` for the token file)")

    def data_received(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size <= MAX_BODY:
            self._body += chunk

    def body(self) -> bytes:
        if self._size > MAX_BODY:
            raise ServiceError(413, "INVALID_ARGUMENT", f"Request payload size exceeds the limit: {MAX_BODY} bytes.")
        return bytes(self._body)

    def finish(self, chunk: Any = None) -> Any:
        self._record()  # before the answer goes: a client that got it finds its request recorded
        return super().finish(chunk)

    def _record(self) -> None:
        if self.service.record is not None:
            body = bytes(self._body).decode("utf-8", "replace") if self.request.method == "POST" else ""
            self.service.record.add(method=self.request.method, path=self.request.path, status=self.get_status(),
                                    agent=self.request.headers.get("User-Agent", ""), body=body)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, ServiceError):
            self._error(e.http, e.status, str(e))
        elif isinstance(e, FilterError):
            self._error(400, "INVALID_ARGUMENT", str(e))
        else:  # tornado's HTTPError, or a bug: tornado logs the traceback of the latter
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

    async def answer(self, pool: ThreadPoolExecutor, work: Callable[[], Any]) -> None:
        """Run `work` in `pool` and send what it returns as JSON (made there too: pages can be large)."""
        int_enums = self._int_enums()
        text = await self.off_loop(pool, lambda: _to_json(work(), int_enums))
        self.set_header("Content-Type", "application/json")
        self.finish(text)

    def _int_enums(self) -> bool:
        return "enum-encoding=int" in self.get_query_argument("$alt", "")

    async def off_loop(self, pool: ThreadPoolExecutor, work: Callable[[], T]) -> T:
        try:
            return await tornado.ioloop.IOLoop.current().run_in_executor(pool, work)
        except sqlite3.Error as exc:
            raise ServiceError(503, "UNAVAILABLE", f"the local job store failed: {type(exc).__name__}: {exc}") from None


def _to_json(data: Any, int_enums: bool) -> str:
    """A message as proto3 JSON; enums as numbers when the client asks (`$alt=json;enum-encoding=int`)."""
    if isinstance(data, proto.Message):
        data = json_format.MessageToDict(type(data).pb(data), use_integers_for_enums=int_enums)
    return json.dumps(data)


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
    async def post(self, project: str, location: str) -> None:
        body, parent = self.body(), self.parent(project, location)
        runtime = Runtime.from_header(self.request.headers.get(CLIENT_HEADER, ""))  # who submits: their Python
        resource_type = self.manager.collection.resource_type
        await self.answer(self.service.workers.writes,
                          lambda: self.manager.create(parent, _parse(resource_type, body), runtime))

    async def get(self, project: str, location: str) -> None:
        """One page, as the List methods answer: `{<collection>: [...], nextPageToken}`."""
        states, name = _list_filter(self.get_query_argument("filter", ""))
        size_text = self.get_query_argument("pageSize", "") or "0"
        if not (size_text.isascii() and size_text.isdigit() and len(size_text) <= 10):
            raise ServiceError(400, "INVALID_ARGUMENT", f"pageSize: not a whole number: {shown(size_text)}")
        size = min(int(size_text), MAX_PAGE) or 100
        after = _page_after(self.get_query_argument("pageToken", ""))
        parent, int_enums, path = self.parent(project, location), self._int_enums(), self.manager.collection.path

        def page() -> dict[str, Any]:
            rows = self.manager.list(parent, states=states, display_name=name, after=after, limit=size + 1)
            body: dict[str, Any] = {path: [json_format.MessageToDict(r.resource._pb, use_integers_for_enums=int_enums)
                                           for r in rows[:size]]}
            if len(rows) > size:
                last = rows[size - 1]
                token = json.dumps([last.resource.create_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), last.id])
                body["nextPageToken"] = base64.urlsafe_b64encode(token.encode()).decode()
            return body
        await self.answer(self.service.workers.reads, page)


class ResourceHandler(_CollectionHandler):
    async def get(self, project: str, location: str, job: str) -> None:
        await self.answer(self.service.workers.reads, lambda: self.stored(project, location, job).resource)

    async def delete(self, project: str, location: str, job: str) -> None:
        def delete() -> dict[str, Any]:
            stored = self.stored(project, location, job)
            self.manager.delete(stored.id)
            return {"name": f"{stored.parent}/operations/delete-{stored.id}", "done": True,
                    "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}
        await self.answer(self.service.workers.writes, delete)


class CancelHandler(_CollectionHandler):
    async def post(self, project: str, location: str, job: str) -> None:
        def cancel() -> dict[str, Any]:
            self.manager.cancel(self.stored(project, location, job).id)
            return {}
        await self.answer(self.service.workers.writes, cancel)


@dataclass(frozen=True)
class EntriesRequest:
    """A ListLogEntriesRequest, checked field by field."""

    projects: tuple[str, ...]
    filter: str = ""
    order_by: str = "timestamp asc"
    page_size: int = 0
    page_token: str = ""


class EntriesHandler(ApiHandler):
    """Cloud Logging `entries:list` over the local jobs' replica logs."""

    async def post(self) -> None:
        body = self.body()
        request = await self.off_loop(self.service.workers.reads, lambda: entries_request(body))
        quota, project = self.service.quota, request.projects[0]
        if quota is not None and (wait := quota.admit(project)):
            self.set_status(429)
            self.set_header("Retry-After", f"{wait:.0f}" if wait >= 1 else "1")
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(quota_error(project, quota.per_minute)))
            return
        visible = ingestion(self.service.options)
        root = self.service.jobs_root

        def page() -> dict[str, Any]:
            sources = log_sources(root, set(request.projects), self.service.projects())
            return list_entries(sources, filter_text=request.filter, order_by=request.order_by,
                                page_size=request.page_size, page_token=request.page_token, visible=visible)
        await self.answer(self.service.workers.logs, page)


class NotFoundHandler(ApiHandler):
    def prepare(self) -> None:
        super().prepare()
        raise ServiceError(404, "NOT_FOUND", f"no such API: {self.request.method} {shown(self.request.path)}")


def make_app(service: Service) -> tornado.web.Application:
    """The service's routes: every manager's collection, entries:list over its jobs, 404 for the rest."""
    common = {"service": service}
    routes: list[Any] = []
    for manager in service.managers:
        args = {**common, "manager": manager}
        base = PARENT + manager.collection.path
        routes += [(base, CollectionHandler, args),
                   (base + r"/(?P<job>[^/:]+)", ResourceHandler, args),
                   (base + r"/(?P<job>[^/:]+):cancel", CancelHandler, args)]
    routes += [(r"/v2/entries:list", EntriesHandler, common), (r".*", NotFoundHandler, common)]
    return tornado.web.Application(routes, default_handler_class=NotFoundHandler, default_handler_args=common)


# ---------------------------------------------------------------- reading requests

def _invalid(message: str) -> ServiceError:
    return ServiceError(400, "INVALID_ARGUMENT", message if len(message) <= MAX_MESSAGE
                        else message[:MAX_MESSAGE] + "...")


def _json_object(body: bytes, type_name: str) -> dict[str, Any]:
    """A request body that must be a JSON object (empty: {}); a 400 otherwise."""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        raise _invalid("invalid JSON body: not JSON") from None
    if not isinstance(data, dict):
        raise _invalid(f"invalid JSON body: a {type_name} is a JSON object, not {_json_type(data)}")
    return data


def _parse(resource_type: Any, body: bytes) -> Any:
    """A create request's body as the collection's message (unknown fields refused, as Google does)."""
    data = _json_object(body, resource_type.__name__)
    message = resource_type()
    try:
        json_format.ParseDict(data, resource_type.pb(message), ignore_unknown_fields=False)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise _invalid(_parse_error(exc)) from None
    if unknown := unknown_enum_value(resource_type.pb(message)):
        where, reason = unknown
        raise _invalid(f"{where}: {reason}")
    return message


_FAILED = re.compile(r"Failed to parse (\w+) field: ")
_AT = re.compile(r'\s+at "?[A-Za-z_]\w*((?:\.\w+|\[\d+\])*)"?\.*$')  # protobuf's path of the bad value
_UNKNOWN = re.compile(r'has no field named "([^"]*)" at "[A-Za-z_]\w*((?:\.\w+|\[\d+\])*)"')


def _parse_error(exc: Exception) -> str:
    """protobuf's JSON parse error as one line naming the field: `jobSpec.workerPoolSpecs[1].replicaCount:
    Couldn't parse integer: inf`, or Google's own words for an unknown field."""
    text = " ".join(str(exc).split())
    if unknown := _UNKNOWN.search(text):
        name, at = unknown.groups()
        where = f" at '{at.lstrip('.')}'" if at else ""
        return f'Invalid JSON payload received. Unknown name "{name}"{where}: Cannot find field.'
    steps = list(_FAILED.finditer(text))
    reason = text[steps[-1].end():] if steps else text
    path = ".".join(step.group(1) for step in steps)
    if at := _AT.search(reason):
        if at.group(1).count(".") >= len(steps):  # as deep, and with the list indexes
            path = at.group(1).lstrip(".")
        reason = reason[:at.start()]
    reason = reason.rstrip(". ") or "not a valid value"
    return f"{path}: {reason}" if path else f"invalid JSON body: {reason}"


def entries_request(body: bytes) -> EntriesRequest:
    """An `entries:list` body, every field checked; a 400 naming the first bad one."""
    data = _json_object(body, "ListLogEntriesRequest")
    for name in data:
        if name not in ENTRIES_FIELDS:
            raise _invalid(f'Invalid JSON payload received. Unknown name {json.dumps(name)}: Cannot find field.')
    projects = []
    for i, name in enumerate(_strings(data, "resourceNames")):
        match = _RESOURCE_NAME.fullmatch(name)
        if not match:
            raise _invalid(f"resourceNames[{i}]: {shown(name)} is not projects/PROJECT_ID")
        projects.append(match.group(1))
    projects += _strings(data, "projectIds")
    return EntriesRequest(tuple(projects) or (LOCAL_PROJECT,), filter=_string(data, "filter"),
                          order_by=_string(data, "orderBy") or "timestamp asc", page_size=_page_size(data),
                          page_token=_string(data, "pageToken"))


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _string(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:  # proto3 JSON: null is the default
        return ""
    if not isinstance(value, str):
        raise _invalid(f"{key}: must be a string, not {_json_type(value)}")
    return value


def _strings(data: dict[str, Any], key: str) -> list[str]:
    values = data.get(key)
    if values is None:
        return []
    if not isinstance(values, list):
        raise _invalid(f"{key}: must be an array of strings, not {_json_type(values)}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise _invalid(f"{key}[{i}]: must be a string, not {_json_type(value)}")
    return values


def _page_size(data: dict[str, Any]) -> int:
    """`pageSize`, an int32 in proto3 JSON: a number or a string of digits."""
    value = data.get("pageSize")
    if value is None:
        return 0
    whole = ((isinstance(value, int) and not isinstance(value, bool))
             or (isinstance(value, float) and value.is_integer())
             or (isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,10}", value) is not None))
    if not whole or not 0 <= int(value) <= INT32:
        what = shown(value) if isinstance(value, str) else _json_type(value) if not whole else int(value)
        raise _invalid(f"pageSize: must be a whole number from 0 to {INT32}, not {what}")
    return int(value)


def log_sources(root: Path, projects: set[str],
                job_projects: dict[str, str]) -> Iterator[tuple[str, str, Path, str | None]]:
    """The logs of the projects' jobs, as Cloud Logging keeps each project's apart (a job the service
    did not run, as `vtrain run`'s, belongs to the local project); a tuning job's trials are
    `<job>/trials/<trial id>/`."""
    if not root.is_dir():
        return
    for job_dir in sorted(root.iterdir()):
        project = job_projects.get(job_dir.name, LOCAL_PROJECT)
        if project not in projects:
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
            raise ServiceError(400, "INVALID_ARGUMENT", f"filter: cannot read {shown(text[pos:])} "
                                                        '(supported: state="JOB_STATE_..." and display_name="...", joined by AND)')
        key, quoted, bare = m.groups()
        value = quoted if quoted is not None else bare
        if key.lower() == "state":
            try:
                states.append(int(v1.JobState[value.upper()]))
            except KeyError:
                raise ServiceError(400, "INVALID_ARGUMENT", f"filter: unknown state {shown(value)}") from None
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
    except (ValueError, TypeError, RecursionError):
        raise ServiceError(400, "INVALID_ARGUMENT", "pageToken: not a token this service gave") from None
