"""How the local service runs (`Options`): the cloud behaviour it can put on, so what follows
logs is tested the way Google will treat it, a record of the requests it was sent, and the local
limits it keeps (`jupyter_ext.limits`).

- `ReadQuota`: Cloud Logging limits `entries.list` per project (about 60 a
  minute); beyond N requests in the last 60 seconds the service answers 429
  RESOURCE_EXHAUSTED in Google's error shape, with the seconds until a request
  is allowed again as `Retry-After`.
- An ingestion delay: an entry becomes visible to `entries.list` only that many
  seconds after it was written (Cloud Logging ingests with a delay), plus a
  jitter of its own, so entries of different replicas arrive out of order; see
  `ingestion`.
- `RequestRecord`: every request as one JSON line (method, path, user agent,
  status, and the body of a create), for tests and debugging.

All are off unless the service is started with `--read-quota N`,
`--ingestion-delay SECONDS`, `--ingestion-jitter SECONDS` or `--record-requests`. The limits' flags
are `limits.add_arguments`.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import paths
from ..limits import Limits
from ..limits import add_arguments as add_limit_arguments
from ..limits import at_least

MAX_INGESTION_SECONDS = 3600.0  # Cloud Logging's delays are seconds; anything near this is a typo


@dataclass(frozen=True)
class Options:
    read_quota: int = 0  # entries.list requests per minute and project; 0: no limit
    ingestion_delay: float = 0.0  # seconds before a written entry can be read
    ingestion_jitter: float = 0.0  # up to this many seconds more, fixed per entry
    record_requests: bool = False
    limits: Limits = field(default_factory=Limits)

    def as_dict(self) -> dict[str, Any]:
        """The emulation options (service.json's `options`; the limits go beside them, `limits`)."""
        return {k: v for k, v in asdict(self).items() if k != "limits"}

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> Options:
        """The options a running service's service.json names."""
        return cls(**info.get("options", {}), limits=Limits(**info.get("limits", {})))

    @classmethod
    def from_args(cls, args: Any) -> Options:
        return cls(read_quota=args.read_quota, ingestion_delay=args.ingestion_delay,
                   ingestion_jitter=args.ingestion_jitter, record_requests=args.record_requests,
                   limits=Limits.from_args(args))

    def argv(self) -> list[str]:
        """The service's command-line flags for these options."""
        args = [f"--read-quota={self.read_quota}"] if self.read_quota else []
        args += [f"--ingestion-delay={self.ingestion_delay:g}"] if self.ingestion_delay else []
        args += [f"--ingestion-jitter={self.ingestion_jitter:g}"] if self.ingestion_jitter else []
        return args + (["--record-requests"] if self.record_requests else []) + self.limits.argv()


def add_arguments(parser: Any, when: str = "") -> None:
    """The service's flags for these options (the limits' too), on the service's and on `vtrain service`'s parser."""
    parser.add_argument("--read-quota", type=at_least(0), default=0, metavar="N",
                        help=f"{when}answer 429 RESOURCE_EXHAUSTED "
                        "beyond N entries:list requests per minute and project, as Cloud Logging does")
    parser.add_argument("--ingestion-delay", type=_seconds, default=0.0, metavar="SECONDS", help=f"{when}log entries "
                        "become readable that long after they were written, as in Cloud Logging")
    parser.add_argument("--ingestion-jitter", type=_seconds, default=0.0, metavar="SECONDS", help=f"{when}log entries "
                        "become readable up to that much later still, each by its own amount (out of order)")
    parser.add_argument("--record-requests", action="store_true", help=f"{when}append every request to "
                        "<data dir>/service/requests.jsonl (tests, debugging)")
    add_limit_arguments(parser, when)


def _seconds(text: str) -> float:
    """argparse type of the ingestion flags: a number of seconds, 0 up to an hour."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_INGESTION_SECONDS):
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_INGESTION_SECONDS:g} seconds, not {text}")
    return value


class ReadQuota:
    """At most `per_minute` requests per project in any 60 seconds."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._sent: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def admit(self, project: str) -> float:
        """0 when the request may go on, else the seconds until one may."""
        now = time.monotonic()
        with self._lock:
            sent = self._sent.setdefault(project, deque())
            while sent and now - sent[0] >= 60.0:
                sent.popleft()
            if len(sent) >= self.per_minute:
                return max(0.001, 60.0 - (now - sent[0]))
            sent.append(now)
            return 0.0


def quota_error(project: str, per_minute: int) -> dict[str, Any]:
    """Cloud Logging's answer beyond the read quota (HTTP 429)."""
    return {"error": {
        "code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": ("Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of "
                    f"service 'logging.googleapis.com' for consumer 'project:{project}'."),
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED",
                     "domain": "googleapis.com",
                     "metadata": {"quota_limit": "ReadRequestsPerMinutePerProject",
                                  "quota_limit_value": str(per_minute), "service": "logging.googleapis.com"}}]}}


def ingestion(options: Options) -> Callable[[int, str], bool] | None:
    """Whether `entries.list` may show an entry now, by its timestamp (ns) and identity; None when
    every entry is there. An entry shows `ingestion_delay` seconds after it was written, plus a
    share of `ingestion_jitter` drawn from its identity (the same on every read, so an entry
    never disappears once shown)."""
    if not (options.ingestion_delay or options.ingestion_jitter):
        return None
    now, delay, jitter = time.time_ns(), int(options.ingestion_delay * 1e9), int(options.ingestion_jitter * 1e9)

    def visible(stamp: int, identity: str) -> bool:
        return stamp + delay + jitter * zlib.crc32(identity.encode()) // 2**32 <= now
    return visible


class RequestRecord:
    """Appends one JSON line per request to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def add(self, **fields: Any) -> None:
        line = json.dumps({"time": time.time(), **fields}) + "\n"
        with self._lock, open(self.path, "a", opener=paths.private_opener) as out:
            out.write(line)
