"""Every error the workbench raises on purpose, in one place.

User mistakes are `WorkbenchError`s: the CLI and the magics print their one-line
`str()` without a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit


class WorkbenchError(Exception):
    """Root of the errors a user can cause and fix."""


class SpecError(WorkbenchError):
    """A job description that cannot be read: names the field path."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class ValidationError(WorkbenchError):
    """A readable job that breaks one or more rules; one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class BackendError(WorkbenchError):
    """A replica backend could not start, run or stop a replica."""


class UnknownBackendError(BackendError):
    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"--backend: unknown backend {name!r} (available: {', '.join(sorted(available))})")


class JobFailedError(WorkbenchError):
    """A job that ended FAILED or CANCELLED. In a notebook it fails the cell with its one line (no
    frames: the failure is the job's, the cell did what it should), so "Run All" stops there."""

    def __init__(self, job: str, state: str, detail: str) -> None:
        self.job, self.state, self.detail = job, state, detail
        super().__init__(f"{job} {state}: {detail}")

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback."""
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]


class PackagingError(WorkbenchError):
    """A trainer that cannot be packaged: names the input and the reason."""


class ImageError(WorkbenchError):
    """Building, pushing or pulling an image failed; the message is one line."""


class BuildError(ImageError):
    pass


class PushError(ImageError):
    pass


class PullError(ImageError):
    pass


class EngineError(BackendError):
    """The Docker engine cannot be reached."""


class FilterError(WorkbenchError):
    """A log filter, order or page token the service cannot use (answered as 400 INVALID_ARGUMENT)."""

    def __init__(self, message: str, position: int | None = None) -> None:
        self.position = position  # 0-based index into the filter text
        super().__init__(message if position is None else f"filter: {message} at position {position}")


class UnreachableError(WorkbenchError):
    """An API endpoint that does not answer (not the user's request: the panel answers 502)."""


class ServiceError(WorkbenchError):
    """An error of the local service's API: HTTP status, google.rpc status name and message."""

    def __init__(self, http: int, status: str, message: str) -> None:
        self.http, self.status = http, status
        super().__init__(message)


def without_request(message: str) -> str:
    """An API client's error message without the request it starts with over REST ("GET http://...: ")."""
    return re.sub(r"^(GET|POST|PUT|PATCH|DELETE) \S+: ", "", message)


def no_answer(exc: BaseException) -> tuple[str, str] | None:
    """(where, why) of an HTTP request that got no answer: the scheme and host asked
    (`http://127.0.0.1:1`) and the reason (`connection refused`, `no answer in time`), for the
    `requests` errors that say so (the clients of Vertex AI, Cloud Logging and Cloud Storage use
    `requests`); None for any other error."""
    import requests

    if not isinstance(exc, (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)):
        return None
    url = urlsplit(exc.request.url or "") if exc.request is not None else None
    where = f"{url.scheme}://{url.netloc}" if url and url.netloc else "the server"
    if isinstance(exc, requests.Timeout):
        return where, "no answer in time"
    if isinstance(exc, requests.exceptions.SSLError):
        return where, "the TLS handshake failed (is it a plain http:// service?)"
    cause: BaseException | None = exc
    for _ in range(10):  # requests wraps urllib3's error, which wraps the socket's
        if cause is None:
            break
        if isinstance(cause, OSError) and cause.strerror:
            return where, cause.strerror[:1].lower() + cause.strerror[1:]
        reason = getattr(cause, "reason", None)
        nested = cause.args[0] if cause.args and isinstance(cause.args[0], BaseException) else None
        cause = reason if isinstance(reason, BaseException) else cause.__cause__ or nested or cause.__context__
    return where, "the connection failed"


def client_error_message(exc: BaseException) -> str | None:
    """What the API clients report of a user's mistake (a bad job ID: 404; no credentials) as one line
    for the CLI and the magics, or None for anything else (a bug). Over REST the clients' message starts
    with the request ("GET http://...: "), which is not the user's."""
    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError

    if isinstance(exc, GoogleAPICallError):
        message = without_request(exc.message or "")
        return " ".join(f"{exc.code.value if exc.code else ''} {message}".split())
    if isinstance(exc, GoogleAuthError):
        return " ".join(f"Google Cloud credentials: {exc}".split())
    return None
