"""Where jobs run, resolved once, and the clients that reach it.

A `Target` is this machine's local service (the default) or Vertex AI in a
project and region. `Target.resolve` is the one place that decides it, for the
magics, the CLI and the lab's server alike; the rule and the order of defaults
are written once, in the README ("Where jobs run").

A `Session` holds a target's clients, built on first use and reused by every
handle on that target in this process (`Session.of`), so following a job does
not start or probe the local service, or build a client, on every poll. A local
session reconnects once when the service was restarted (a new port or token).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import shlex
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit

from .. import paths
from ..api import LOCAL_PROJECT
from ..catalog import DEFAULT_REGION
from ..errors import UnreachableError, WorkbenchError, no_answer
from ..runner.backend import DEFAULT_BACKEND, address_style

T = TypeVar("T")
ENDPOINT_VARIABLE = "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM"  # gcloud's property api_endpoint_overrides/aiplatform
TOKEN_VARIABLE = "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"  # gcloud's property auth/access_token_file
# Lenient: project IDs (my-project), domain-scoped ones (example.com:my-project) and numbers; what the
# clients would put in a URL path badly (/ ? # %, spaces) can be no project
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_TOKEN = re.compile(r"[\x21-\x7e]+")  # an OAuth access token: printable ASCII, no spaces (RFC 6750's b64token)
_TOKEN_FILE_LIMIT = 16 * 1024  # Google's access tokens are at most a few KiB; read no more than this


@dataclass(frozen=True)
class Target:
    """Where jobs run: the local service (default) or Vertex AI."""

    project: str = LOCAL_PROJECT
    region: str = DEFAULT_REGION
    staging_bucket: str = ""
    local: bool = True
    backend: str = DEFAULT_BACKEND  # local only: process or docker
    endpoint: str = ""  # Vertex AI's API endpoint as the clients take it; "": Google's regional one
    credentials: Any = field(default=None, repr=False)  # None: application-default credentials
    encryption_key: str = ""  # aiplatform.init's encryption_spec_key_name
    service_account: str = ""
    network: str = ""

    @classmethod
    def resolve(cls, *, vertex: bool = False, local: bool = False, project: str | None = None,
                region: str | None = None, staging_bucket: str | None = None, endpoint: str | None = None,
                backend: str | None = None, access_token_file: str | None = None) -> Target:
        """The target the flags given describe, completed from `aiplatform.init` and the environment
        (README, "Where jobs run"). `vertex`/`local`: --vertex/--local; the others: their flags."""
        # --region is no reason for Vertex AI: it also sets the region a local dry run is planned for
        vertex_only = {"--project": project, "--endpoint": endpoint, "--staging-bucket": staging_bucket,
                       "--access-token-file": access_token_file}
        asked = [flag for flag, value in vertex_only.items() if value] + (["--vertex"] if vertex else [])
        if local and asked:
            raise WorkbenchError(f"--local: {', '.join(asked)} would send the job to Vertex AI; give one or "
                                 "the other")
        if not asked:
            return cls(backend=backend or DEFAULT_BACKEND)
        if backend not in (None, DEFAULT_BACKEND):
            raise WorkbenchError(f"--backend {backend}: only for local jobs; Vertex AI runs its own machines")
        init = _sdk_settings()
        project, source = _first(("--project", project), ("aiplatform.init(project=...)", init.get("project")),
                                 ("$GOOGLE_CLOUD_PROJECT", os.environ.get("GOOGLE_CLOUD_PROJECT")))
        if not project:
            raise WorkbenchError("--project: Vertex AI needs a Google Cloud project (the flag, aiplatform.init"
                                 "(project=...), or $GOOGLE_CLOUD_PROJECT)")
        if not _PROJECT.fullmatch(project):
            raise WorkbenchError(f"{source}: {project!r} is not a Google Cloud project ID or number (letters, "
                                 "digits, '-', e.g. my-project or 123456789012)")
        credentials = (_token_credentials(access_token_file, "--access-token-file") if access_token_file
                       else init.get("credentials"))
        if credentials is None and os.environ.get(TOKEN_VARIABLE):
            credentials = _token_credentials(os.environ[TOKEN_VARIABLE], f"${TOKEN_VARIABLE}")
        endpoint, source = _first(("--endpoint", endpoint), ("aiplatform.init(api_endpoint=...)",
                                                             init.get("api_endpoint")),
                                  (f"${ENDPOINT_VARIABLE}", os.environ.get(ENDPOINT_VARIABLE)))
        return cls(project, resolve_region(region), staging_bucket or init.get("staging_bucket") or "", local=False,
                   endpoint=_client_endpoint(endpoint, source), credentials=credentials,
                   encryption_key=init.get("encryption_spec_key_name") or "",
                   service_account=init.get("service_account") or "", network=init.get("network") or "")

    def flags(self) -> str:
        """The flags that name this place to `vtrain` and the magics, with a leading space (none for the
        local service): for the hints that say how to follow or cancel a job from elsewhere."""
        if self.local:
            return ""
        words = ["--project", self.project, "--region", self.region]
        if self.endpoint and not _google_host(self.endpoint):
            words += ["--endpoint", self.endpoint]
        return " " + shlex.join(words)

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    @property
    def address_style(self) -> str:
        """How replicas' addresses look here: the local backend's style, or `cloud`."""
        return address_style(self.backend) if self.local else "cloud"

    def with_location(self, project: str, region: str) -> Target:
        """The same place, another project or region (a job named by its full resource name)."""
        return self if (project, region) == (self.project, self.region) else replace(self, project=project,
                                                                                      region=region)


def resolve_region(region: str | None = None) -> str:
    """The flag, else `aiplatform.init(location=...)`, else $CLOUD_ML_REGION, else us-central1."""
    return region or _sdk_settings().get("location") or os.environ.get("CLOUD_ML_REGION", "") or DEFAULT_REGION


def _first(*places: tuple[str, str | None]) -> tuple[str, str]:
    """The first (value, where it came from) of `places` ((where, value) pairs) that holds a value."""
    return next(((value, where) for where, value in places if value), ("", places[0][0]))


def _client_endpoint(endpoint: str, source: str) -> str:
    """What the clients take as `api_endpoint`: [scheme://]host[:port]. gcloud's override is a URL with
    a path (https://us-central1-aiplatform.googleapis.com/), which the clients would put before /v1.
    Without a scheme the clients speak HTTPS, as Google's endpoints do; a service on this machine (the
    local one) speaks plain HTTP and would never answer the TLS handshake, so one is refused at once."""
    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    if endpoint and not parts.scheme and loopback(parts.hostname or ""):
        raise WorkbenchError(f"{source}: {endpoint!r} has no scheme, so the clients would speak HTTPS to it; a "
                             f"service on this machine such as the local one is http://{parts.netloc}")
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme else parts.netloc


def loopback(host: str) -> bool:
    """Whether a host name or address is this machine's own: localhost, 127.0.0.0/8, ::1 (any case,
    with or without brackets), or the unspecified address (0.0.0.0, ::), which reaches it too."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return any(a.is_loopback or a.is_unspecified for a in (address, mapped) if a is not None)


def _same_service(endpoint: str, service: str) -> bool:
    """Whether an API endpoint is the local service at `service` (http://127.0.0.1:PORT), however its
    loopback host is written (http://localhost:PORT too)."""
    mine, its = urlsplit(endpoint), urlsplit(service)
    try:
        return mine.scheme == its.scheme and loopback(mine.hostname or "") and mine.port == its.port
    except ValueError:  # a port that is not a number
        return False


def _google_host(endpoint: str) -> bool:
    """Whether an API endpoint is one of Google's (regional, mTLS, Private Service Connect), not a
    service standing in for Vertex AI."""
    host = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}").hostname or ""
    return host == "googleapis.com" or host.endswith(".googleapis.com")


def _token_credentials(path: str, where: str) -> Any:
    """Credentials from a file holding an OAuth access token (`gcloud auth print-access-token > FILE`),
    `where` naming the flag or variable that gave it; the same object while the token is the same, so
    a target resolved again keeps its session. A file that holds no token is refused in one line that
    shows none of it (it is a secret, and would otherwise end in an HTTP header or a traceback)."""
    try:
        with open(path, "rb") as file:
            data = file.read(_TOKEN_FILE_LIMIT + 1)  # bounded: /dev/zero or a log file named by mistake
    except OSError as exc:
        raise WorkbenchError(f"{where}: cannot read {path}: {exc.strerror}") from None
    hint = "an access token is one line (gcloud auth print-access-token > FILE)"
    if len(data) > _TOKEN_FILE_LIMIT:
        raise WorkbenchError(f"{where}: {path} is larger than {_TOKEN_FILE_LIMIT // 1024} KiB; {hint}")
    lines = data.decode("latin-1").split()  # any bytes: the checks below keep printable ASCII only
    if not lines:
        raise WorkbenchError(f"{where}: {path} is empty")
    if not all(_TOKEN.fullmatch(line) for line in lines):
        raise WorkbenchError(f"{where}: {path} holds characters an access token cannot (control characters "
                             f"or non-ASCII); {hint}")
    if len(lines) > 1:
        raise WorkbenchError(f"{where}: {path} holds more than one word or line; {hint}")
    return _credentials_for(lines[0], where, path)


@functools.lru_cache(maxsize=8)
def _credentials_for(token: str, where: str, path: str) -> Any:
    from google.auth.credentials import Credentials
    from google.auth.exceptions import RefreshError

    class TokenCredentials(Credentials):
        """A bare access token. The clients ask for a new one when the endpoint answers 401, which
        only its maker can give: say so, naming where the token came from."""

        def __init__(self) -> None:
            super().__init__()
            self.token = token

        def refresh(self, request: Any) -> None:
            raise RefreshError(f"the API endpoint refused the access token of {where} {path} (HTTP 401: expired, "
                               f"revoked or not a token); write a new one: gcloud auth print-access-token > {path}")

    return TokenCredentials()


def _sdk_settings() -> dict[str, Any]:
    """What `aiplatform.init` set in this process; nothing when the SDK was never imported (the CLI)."""
    initializer = sys.modules.get("google.cloud.aiplatform.initializer")
    if initializer is None:
        return {}
    config = initializer.global_config
    names = ("project", "location", "staging_bucket", "api_endpoint", "credentials", "encryption_spec_key_name",
             "service_account", "network")
    return {name: getattr(config, f"_{name}", None) for name in names}


class Session:
    """A target's API clients, made once per process and target."""

    _sessions: dict[tuple[Target, str], Session] = {}
    _sessions_lock = threading.Lock()

    def __init__(self, target: Target) -> None:
        self.target = target
        self._lock = threading.RLock()
        self._clients: dict[str, Any] = {}
        self._endpoint: tuple[str, Any] | None = None  # (API endpoint, credentials), found once
        self._service: dict[str, Any] | None = None  # the local service's info; {}: not the local service

    @classmethod
    def of(cls, target: Target) -> Session:
        """The process's session for `target` (a local one per data folder: each has its own service)."""
        key = (target, str(paths.data_dir()) if target.local else "")
        with cls._sessions_lock:
            session = cls._sessions.get(key)
            if session is None:
                session = cls._sessions[key] = cls(target)
            return session

    # ---- calls -----------------------------------------------------------------
    def jobs(self, call: Callable[[Any], T]) -> T:
        """`call(JobServiceClient)`; a local session retries once after reconnecting."""
        return self._call("jobs", call)

    def logging(self, call: Callable[[Any], T]) -> T:
        """`call(google.cloud.logging.Client)`, with the same retry."""
        return self._call("logging", call)

    def _call(self, kind: str, call: Callable[[Any], T]) -> T:
        """`call(client)`; an endpoint that does not answer is one line naming it, not the clients' traceback."""
        import requests

        try:
            return self._call_once_more_if_restarted(kind, call)
        except requests.RequestException as exc:
            if (failure := no_answer(exc)) is None:
                raise
            raise UnreachableError("cannot reach the API endpoint {}: {}".format(*failure)) from None

    def _call_once_more_if_restarted(self, kind: str, call: Callable[[Any], T]) -> T:
        from google.api_core.exceptions import Unauthenticated

        client = self._client(kind)
        try:
            return call(client)
        except (OSError, Unauthenticated):  # the local service restarted: a new port or token
            if not self.target.local:
                raise
            self.reset()
            return call(self._client(kind))

    def reset(self) -> None:
        with self._lock:
            self._clients.clear()
            self._endpoint = self._service = None

    def local_service(self) -> dict[str, Any] | None:
        """The local service's runtime info when this session talks to it (also as a Vertex AI
        endpoint, under any of this machine's names: http://localhost:PORT too), else None. The one
        place that decides whether an endpoint is the local service."""
        with self._lock:
            if self._service is None:
                if self.target.local:
                    self._connection()
                elif self.target.endpoint:
                    from ..service import daemon

                    info = daemon.status()
                    self._service = info if info and _same_service(self.target.endpoint, info["endpoint"]) else {}
                else:
                    self._service = {}
            return self._service or None

    # ---- clients ---------------------------------------------------------------
    def _client(self, kind: str) -> Any:
        with self._lock:
            client = self._clients.get(kind)
            if client is None:
                endpoint, credentials = self._connection()
                client = self._clients[kind] = (_job_client if kind == "jobs" else _logging_client)(
                    self.target, endpoint, credentials, self._user_agent())
            return client

    def _user_agent(self) -> str:
        """Who is asking; to the local service also which process (its request record tells followers apart)."""
        from .. import __version__

        agent = f"vertex-workbench/{__version__}"
        return f"{agent} pid/{os.getpid()}" if self.local_service() is not None else agent

    def _connection(self) -> tuple[str, Any]:
        """(API endpoint, credentials): the local service's, started on demand, or the target's own."""
        if not self.target.local:
            return self.target.endpoint, self.target.credentials
        if self._endpoint is None:
            from google.oauth2.credentials import Credentials

            from ..service import daemon

            info = self._service = daemon.ensure_running()
            self._endpoint = info["endpoint"], Credentials(token=daemon.read_token())
        return self._endpoint


def _job_client(target: Target, endpoint: str, credentials: Any, user_agent: str) -> Any:
    from google.api_core.gapic_v1.client_info import ClientInfo
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

    return JobServiceClient(credentials=credentials, transport="rest", client_info=ClientInfo(user_agent=user_agent),
                            client_options={"api_endpoint": endpoint or f"{target.region}-aiplatform.googleapis.com"})


def _logging_client(target: Target, endpoint: str, credentials: Any, user_agent: str) -> Any:
    """Cloud Logging over REST everywhere, so the path tested against the local service is the shipped one."""
    from google.api_core.client_info import ClientInfo
    from google.cloud import logging as cloud_logging

    # a stand-in service answers Cloud Logging's API too; Google's Vertex AI hosts do not
    options = {"api_endpoint": endpoint} if endpoint and not _google_host(endpoint) else None
    return cloud_logging.Client(project=target.project, credentials=credentials, _use_grpc=False,
                                client_options=options, client_info=ClientInfo(user_agent=user_agent))
