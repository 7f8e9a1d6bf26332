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
import os
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit

from .. import paths
from ..api import LOCAL_PROJECT
from ..catalog import DEFAULT_REGION
from ..errors import WorkbenchError
from ..runner.backend import DEFAULT_BACKEND, address_style

T = TypeVar("T")
ENDPOINT_VARIABLE = "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM"  # gcloud's property api_endpoint_overrides/aiplatform


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
        project = project or init.get("project") or os.environ.get("GOOGLE_CLOUD_PROJECT", "")
        if not project:
            raise WorkbenchError("--project: Vertex AI needs a Google Cloud project (the flag, aiplatform.init"
                                 "(project=...), or $GOOGLE_CLOUD_PROJECT)")
        credentials = _token_credentials(access_token_file) if access_token_file else init.get("credentials")
        if credentials is None and os.environ.get("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"):
            credentials = _token_credentials(os.environ["CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"])
        endpoint = endpoint or init.get("api_endpoint") or os.environ.get(ENDPOINT_VARIABLE, "")
        return cls(project, resolve_region(region), staging_bucket or init.get("staging_bucket") or "", local=False,
                   endpoint=_client_endpoint(endpoint), credentials=credentials,
                   encryption_key=init.get("encryption_spec_key_name") or "",
                   service_account=init.get("service_account") or "", network=init.get("network") or "")

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


def _client_endpoint(endpoint: str) -> str:
    """What the clients take as `api_endpoint`: [scheme://]host[:port]. gcloud's override is a URL with
    a path (https://us-central1-aiplatform.googleapis.com/), which the clients would put before /v1."""
    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme else parts.netloc


def _google_host(endpoint: str) -> bool:
    """Whether an API endpoint is one of Google's (regional, mTLS, Private Service Connect), not a
    service standing in for Vertex AI."""
    host = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}").hostname or ""
    return host == "googleapis.com" or host.endswith(".googleapis.com")


def _token_credentials(path: str) -> Any:
    """Credentials from a file holding an OAuth access token (`gcloud auth print-access-token > FILE`);
    the same object while the token is the same, so a target resolved again keeps its session."""
    try:
        token = open(path).read().strip()
    except OSError as exc:
        raise WorkbenchError(f"--access-token-file: cannot read {path}: {exc.strerror}") from None
    if not token:
        raise WorkbenchError(f"--access-token-file: {path} is empty")
    return _credentials_for(token)


@functools.lru_cache(maxsize=8)
def _credentials_for(token: str) -> Any:
    from google.oauth2.credentials import Credentials

    return Credentials(token=token)


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
        endpoint), else None."""
        with self._lock:
            if self._service is None:
                if self.target.local:
                    self._connection()
                elif self.target.endpoint:
                    from ..service import daemon

                    info = daemon.status()
                    self._service = info if info and info["endpoint"] == self.target.endpoint.rstrip("/") else {}
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
