"""jupyter_server routes behind the lab's Training Jobs panel, under `<base_url>/vertex-train/`.

    GET  jobs                       every local job and the first page of Vertex AI's (when a project
                                    is configured); the `vertex` source holds `next_page_token`
    GET  jobs?source=vertex&page_token=
                                    the next page of Vertex AI's jobs, and `next_page_token`
    GET  jobs/<id>                  the CustomJob as JSON and each replica's TF_CONFIG, CLUSTER_SPEC
                                    and PyTorch variables
    GET  jobs/<id>/logs?cursor=&replica=&limit=
                                    one page of log entries; `next_cursor` follows, `done` says the
                                    job is final and every entry was read, `next_poll_ms` when to
                                    ask again (the reader's pace, e.g. 5 s on Cloud Logging)
    POST jobs/<id>/cancel           cancel a running job

A Vertex AI job is addressed with `?source=vertex`. Every verb is authenticated
and authorized (`auth_resource = "vertex_train"`). The handlers go through
`launch`, the same clients the CLI, the magics and the widgets use; blocking
client calls run in a thread so the server stays responsive. A job that does
not exist is a 404 JSON error, a user mistake (WorkbenchError) a 400. The job's `env` values are
never sent to the page (`***`, see `sensitive`): a notebook or a screenshot may keep what it shows.

Vertex AI's list is asked for by every panel refresh (every 2 s), so `VertexListing`
keeps at most one listing call in flight per project and region and reuses its
answer for a while; a slow Vertex AI is an `errors` entry, never a pile of threads.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, TypeVar

import tornado.web
from google.cloud.aiplatform_v1 import types as v1
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from traitlets import Float, Unicode
from traitlets.config import Configurable

from . import cluster, launch, paths, sensitive, states
from .errors import UnreachableError, WorkbenchError, without_request
from .spec import JobSpec, message_to_dict

NAMESPACE = "vertex-train"
NPM_NAME = "jupyter-vertex-train"
AUTH_RESOURCE = "vertex_train"
SETTINGS_KEY = "vertex_train"
SOURCES = ("local", "vertex")
MAX_JOBS = 200
PAGE_SIZE = 1000
MAX_PAGE_SIZE = 5000
VERTEX_PAGE_SIZE = 50  # Vertex AI jobs per page: the first on every refresh, the next ones when the panel asks
VERTEX_CALL_DEADLINE = 300.0  # seconds a silent Vertex AI call waits, so a hung one ends and the next can start
_JOB_ID = r"(?P<job_id>[^/]+)"
_VALID_JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # Vertex's are numeric; anything else cannot exist
_REPLICA = re.compile(r"workerpool[0-3]-\d{1,5}")
T = TypeVar("T")


# ---- extension entry points (re-exported by jupyter_ext/__init__.py) -------------------

def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "jupyter_ext.handlers"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """The built front end: `jupyter_ext/labextension` (paths are relative to the `jupyter_ext` package)."""
    return [{"src": "labextension", "dest": NPM_NAME}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    config = VertexTrain(parent=server_app)
    setup_handlers(server_app.web_app, config)
    vertex = config.vertex_target()
    where = f", Vertex AI {vertex.parent}" if vertex else ""
    server_app.log.info(f"vertex-train: routes under {url_path_join(server_app.base_url, NAMESPACE)} "
                        f"(local jobs{where})")


def setup_handlers(web_app: Any, config: VertexTrain | None = None) -> None:
    web_app.settings[SETTINGS_KEY] = config or VertexTrain()
    base = url_path_join(web_app.settings["base_url"], NAMESPACE)
    web_app.add_handlers(".*$", [
        (url_path_join(base, "jobs") + "/?", JobsHandler),
        (url_path_join(base, "jobs", _JOB_ID) + "/?", JobHandler),
        (url_path_join(base, "jobs", _JOB_ID, "logs") + "/?", LogsHandler),
        (url_path_join(base, "jobs", _JOB_ID, "cancel") + "/?", CancelHandler),
    ])


class VertexTrain(Configurable):
    """Server-side settings of the Training Jobs panel (`c.VertexTrain.project = ...`)."""

    project = Unicode(help="Google Cloud project whose Vertex AI jobs the panel also lists (default: as "
                           "everywhere, see the README's 'Where jobs run'; none: local jobs only)").tag(config=True)
    region = Unicode(help="Vertex AI region of those jobs (default: as everywhere, see the README's "
                          "'Where jobs run')").tag(config=True)
    endpoint = Unicode(help="a Vertex AI API endpoint other than Google's (default: as everywhere, "
                            "see the README's 'Where jobs run')").tag(config=True)
    vertex_timeout = Float(20.0, help="seconds a job list waits for Vertex AI before it reports Vertex AI as slow "
                                      "(the listing goes on and is shown when it ends)").tag(config=True)
    vertex_cache = Float(10.0, help="seconds a Vertex AI job list is reused (the panel refreshes every 2 s)"
                         ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._listings: dict[tuple[str, str], VertexListing] = {}  # by (parent, endpoint)

    def vertex_target(self) -> launch.Target | None:
        """Vertex AI's place for the panel, resolved as everywhere else; None without a project."""
        try:
            return launch.Target.resolve(vertex=True, project=self.project or None, region=self.region or None,
                                         endpoint=self.endpoint or None)
        except WorkbenchError:
            return None

    def listing(self, target: launch.Target) -> VertexListing:
        """The one listing of the target's jobs that every request of this server shares (keyed by
        place, not by credentials: a target resolved again may carry new ones)."""
        return self._listings.setdefault((target.parent, target.endpoint), VertexListing())

    def target(self, source: str) -> launch.Target:
        if source == "local":
            return launch.Target()
        target = self.vertex_target()
        if target is None:
            raise WorkbenchError("source=vertex: no Vertex AI project is configured (c.VertexTrain.project; "
                                 "see the README's 'Where jobs run')")
        return target


class VertexListing:
    """The first page of Vertex AI's jobs in one place: at most one listing call in flight,
    which every request awaits, and its last good answer reused for a while. Used on the
    server's event loop only, so it needs no lock."""

    def __init__(self) -> None:
        self._answer: tuple[float, list[v1.CustomJob], str] | None = None  # (when, jobs, next page token)
        self._call: asyncio.Task[tuple[list[v1.CustomJob], str]] | None = None
        self._pages: dict[str, asyncio.Task[tuple[list[v1.CustomJob], str]]] = {}  # "Load more" calls in flight

    async def first_page(self, target: launch.Target, timeout: float,
                         reuse: float) -> tuple[list[v1.CustomJob], str]:
        """(jobs, next page token): the answer of the last `reuse` seconds, else the call in flight
        (started if there is none). After `timeout` s a WorkbenchError says Vertex AI is slow; the
        call goes on and its answer serves the requests that follow."""
        if self._answer and time.monotonic() - self._answer[0] < reuse:
            return self._answer[1], self._answer[2]
        if self._call is None:
            self._call = asyncio.create_task(self._list(target))
        try:
            # shield: a request that stops waiting must not cancel the call the others await
            return await asyncio.wait_for(asyncio.shield(self._call), timeout)
        except asyncio.TimeoutError:
            raise WorkbenchError(f"Vertex AI is slow: no answer in {timeout:g} s (its jobs are listed when it "
                                 "answers)") from None

    async def next_page(self, target: launch.Target, page_token: str) -> tuple[list[v1.CustomJob], str]:
        """The page after `page_token` ("Load more"): not cached; one call per page in flight, which
        every request for that page awaits, so clicks on a slow Vertex AI do not pile up threads."""
        call = self._pages.get(page_token)
        if call is None:
            call = self._pages[page_token] = asyncio.create_task(asyncio.to_thread(
                launch.list_jobs_page, target, VERTEX_PAGE_SIZE, page_token, timeout=VERTEX_CALL_DEADLINE))
            call.add_done_callback(lambda _: self._pages.pop(page_token, None))
        return await asyncio.shield(call)

    async def _list(self, target: launch.Target) -> tuple[list[v1.CustomJob], str]:
        try:
            jobs, token = await asyncio.to_thread(launch.list_jobs_page, target, VERTEX_PAGE_SIZE,
                                                  timeout=VERTEX_CALL_DEADLINE)
        finally:
            self._call = None
        self._answer = (time.monotonic(), jobs, token)
        return jobs, token


# ---- handlers ----------------------------------------------------------------------------

class BaseHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, tornado.web.HTTPError):  # its text is a message, not a %-format (it may hold a '%')
            self.log.warning("%d %s: %s", value.status_code, self._request_summary(), value.get_message())
        else:
            super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """As jupyter_server writes an error (`{"message", "reason"}`), with the message as raised:
        jupyter_server sends tornado's `log_message`, which doubles each `%` of a message."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, tornado.web.HTTPError) and error.get_message():
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"message": error.get_message(), "reason": error.reason}))
        else:
            super().write_error(status_code, **kwargs)

    @property
    def workbench(self) -> VertexTrain:
        return self.settings[SETTINGS_KEY]  # type: ignore[no-any-return]

    def source(self) -> str:
        source = self.get_query_argument("source", "local")
        if source not in SOURCES:
            raise tornado.web.HTTPError(400, f"source: {source!r} is not one of {', '.join(SOURCES)}")
        return source

    def handle(self, job_id: str) -> launch.Handle:
        if not _VALID_JOB_ID.fullmatch(job_id):
            raise tornado.web.HTTPError(404, f"CustomJob {job_id} does not exist")  # as the service says it
        try:
            return launch.attach(job_id, self.workbench.target(self.source()))
        except WorkbenchError as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None

    async def call(self, func: Callable[..., T], *args: Any) -> T:
        """A blocking client call in a thread; its errors become HTTP errors."""
        return await self.awaited(asyncio.to_thread(func, *args))

    async def awaited(self, call: Awaitable[T]) -> T:
        """A client call's answer; its errors become HTTP errors."""
        try:
            return await call
        except UnreachableError as exc:
            raise tornado.web.HTTPError(502, str(exc)) from None
        except WorkbenchError as exc:
            raise tornado.web.HTTPError(400, str(exc).replace("\n", "; ")) from None
        except Exception as exc:
            raise _http_error(exc) from None

    def reply(self, body: dict[str, Any]) -> None:
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body))


class JobsHandler(BaseHandler):
    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        """Local jobs and the first page of Vertex AI's when a project is configured; with
        `page_token`, the next page of Vertex AI's. A source that fails is reported in `errors`
        (the other's jobs are still listed), never a 500."""
        page_token = self.get_query_argument("page_token", "")
        if page_token:
            await self._next_vertex_page(page_token)
            return
        now = datetime.now(timezone.utc)
        sources: list[dict[str, str]] = [{"source": "local", "parent": launch.Target().parent}]
        errors: list[dict[str, str]] = []
        jobs: list[dict[str, Any]] = []
        vertex = self.workbench.vertex_target()
        local, remote = await asyncio.gather(self._local(), self._vertex(vertex), return_exceptions=True)
        if isinstance(local, BaseException):
            errors.append({"source": "local", "message": _message(local)})
        else:
            jobs += [summary(job, True, now) for job in local]
        if vertex is not None:
            next_page_token = ""
            if isinstance(remote, BaseException):
                errors.append({"source": "vertex", "message": _message(remote)})
            else:
                jobs += [summary(job, False, now) for job in remote[0]]
                next_page_token = remote[1]
            sources.append({"source": "vertex", "parent": vertex.parent, "next_page_token": next_page_token})
        jobs.sort(key=lambda j: j["create_time"] or "", reverse=True)
        self.reply({"jobs": jobs[:MAX_JOBS], "truncated": len(jobs) > MAX_JOBS, "sources": sources,
                    "errors": errors, "now": _iso(now)})

    async def _local(self) -> list[v1.CustomJob]:
        from .service import daemon

        if daemon.stopped_on_purpose():  # a refresh every 2 s would start it again under the user's hands
            raise WorkbenchError("the local service was stopped (vtrain service stop); it starts again with the "
                                 "next local job, or vtrain service start")
        return await asyncio.to_thread(launch.list_jobs, launch.Target())  # starts the local service if needed

    async def _vertex(self, target: launch.Target | None) -> tuple[list[v1.CustomJob], str]:
        workbench = self.workbench
        if target is None:
            return [], ""
        return await workbench.listing(target).first_page(target, workbench.vertex_timeout,
                                                          workbench.vertex_cache)

    async def _next_vertex_page(self, page_token: str) -> None:
        """A page the user asked for ("Load more"): not cached, and awaited to its end."""
        if self.source() != "vertex":
            raise tornado.web.HTTPError(400, "page_token: only Vertex AI's job list has pages (source=vertex)")
        try:
            target = self.workbench.target("vertex")
        except WorkbenchError as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        jobs, next_page_token = await self.awaited(self.workbench.listing(target).next_page(target, page_token))
        now = datetime.now(timezone.utc)
        self.reply({"jobs": [summary(job, False, now) for job in jobs], "next_page_token": next_page_token,
                    "now": _iso(now)})


class JobHandler(BaseHandler):
    @tornado.web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        handle = self.handle(job_id)
        resource = await self.call(handle.refresh)
        self.reply({"summary": summary(resource, handle.target.local, datetime.now(timezone.utc)),
                    "job": sensitive.mask_job(message_to_dict(resource)), **replica_environment(handle)})


class LogsHandler(BaseHandler):
    @tornado.web.authenticated
    @authorized
    async def get(self, job_id: str) -> None:
        handle = self.handle(job_id)
        replica = self.get_query_argument("replica", "") or None
        if replica is not None and not _REPLICA.fullmatch(replica):
            raise tornado.web.HTTPError(400, f"replica: {replica!r} is not a task name like workerpool0-0")
        try:
            limit = int(self.get_query_argument("limit", str(PAGE_SIZE)))
        except ValueError:
            raise tornado.web.HTTPError(400, "limit: not a number") from None
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise tornado.web.HTTPError(400, f"limit: between 1 and {MAX_PAGE_SIZE}")
        try:
            cursor = launch.LogCursor.decode(self.get_query_argument("cursor", ""))
        except WorkbenchError as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        self.reply(await self.call(read_log_page, handle, replica, cursor, limit))


class CancelHandler(BaseHandler):
    @tornado.web.authenticated
    @authorized
    async def post(self, job_id: str) -> None:
        handle = self.handle(job_id)
        await self.call(handle.cancel)
        resource = await self.call(handle.refresh)
        self.reply({"summary": summary(resource, handle.target.local, datetime.now(timezone.utc))})


# ---- what the handlers answer -------------------------------------------------------------

def summary(job: v1.CustomJob, local: bool, now: datetime) -> dict[str, Any]:
    """One row of the panel's table (times as RFC 3339 text)."""
    row = launch.job_row(job, local, now)
    return {**row, **{key: _iso(row[key]) for key in ("create_time", "start_time", "end_time")}}


def replica_environment(handle: launch.Handle) -> dict[str, Any]:
    """Every replica's TF_CONFIG, CLUSTER_SPEC and PyTorch variables (None where a replica has none:
    evaluators and Reduction Server replicas have no RANK), from `cluster.replicas`, as the job's
    replicas see them but for the `env` values in their `job`, which are ***.

    A local job that ran records its replicas' addresses (`<job dir>/status.json`); they are used when
    present, so process-backend ports are the real ones. Cloud addresses are placeholders until Vertex runs it.
    """
    style = handle.address_style
    recorded = handle.target.local and style == "process"
    try:
        job = JobSpec.load(handle.resource)
        ports = _recorded_ports(handle.id, job.replica_count) if recorded else None
        replicas = cluster.replicas(job, style=style, job_id=handle.id, ports=ports, mask_env=True)
    except (WorkbenchError, ValueError) as exc:
        return {"address_style": style, "replicas": [], "replicas_error": str(exc)}
    rows = []
    for r in replicas:
        rows.append({"task_name": r.task_name, "pool": r.pool, "index": r.index, "role": r.role,
                     "tf_task": r.tf_task, "address": r.address,
                     "TF_CONFIG": json.loads(r.env["TF_CONFIG"]) if "TF_CONFIG" in r.env else None,
                     "CLUSTER_SPEC": json.loads(r.env["CLUSTER_SPEC"]) if "CLUSTER_SPEC" in r.env else None,
                     **{name: r.env.get(name) for name in cluster.PYTORCH_VARIABLES}})
    return {"address_style": style, "addresses_recorded": bool(recorded and ports), "replicas": rows}


def _recorded_ports(job_id: str, count: int) -> list[int] | None:
    try:
        status = json.loads((paths.jobs_dir() / job_id / "status.json").read_text())
        ports = [int(r["address"].rsplit(":", 1)[1]) for r in status.get("replicas", [])]
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return ports if len(ports) == count else None


def read_log_page(handle: launch.Handle, replica: str | None, cursor: launch.LogCursor,
                  limit: int = PAGE_SIZE) -> dict[str, Any]:
    """Up to `limit` of a job's log entries after `cursor`, read as every follower reads them
    (`launch.LogReader`, with its overlap and pace). `done`: the job is final and its log was read
    to the end; `next_poll_ms`: when to read again (at once after a full page)."""
    resource = handle.refresh()  # first: once final, what follows the read is all there is
    reader = launch.LogReader(handle.session, launch.log_filter(handle.id, replica), cursor=cursor)
    records = reader.poll(limit=limit, wait=False)  # held back by the read quota: nothing now, try again later
    entries = [{"timestamp": launch.logs.stamp_text(r.timestamp), "time": launch.logs.time_of_day(r.timestamp),
                "replica": r.task_name, "severity": r.severity, "text": r.text, "insert_id": r.insert_id}
               for r in records]
    more = len(records) == limit
    done = states.is_final(resource.state) and not more and not reader.held and reader.settled(resource.end_time)
    return {"entries": entries, "next_cursor": reader.cursor.encode(), "done": done, "state": resource.state.name,
            "next_poll_ms": 0 if more else round(reader.next_poll() * 1000)}


def _http_error(exc: Exception) -> tornado.web.HTTPError:
    """The job service's or logging API's error as ours: its 4xx kept (404 for a job that
    does not exist, 400 for cancelling a finished one), anything else a 502 naming it."""
    code = getattr(exc, "code", None)
    if isinstance(code, int) and 400 <= code < 500 and code not in (401, 403, 407):
        return tornado.web.HTTPError(code, _message(exc))
    # the service's own authentication failing is not the browser's: no 401/403 to the page
    return tornado.web.HTTPError(502, f"the job service failed: {_message(exc)}")


def _message(exc: BaseException) -> str:
    """The first line of an error, without the request the client sent (`GET http://...: `)."""
    text = str(getattr(exc, "message", None) or exc).strip()
    if not text:
        return type(exc).__name__
    return without_request(text.splitlines()[0])


def _iso(stamp: datetime | None) -> str | None:
    return stamp.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if stamp else None
