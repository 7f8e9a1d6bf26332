"""Reading a job's logs through the Cloud Logging client: the filter, the cursor, the follower.

One code path for Cloud Logging and the local service (which serves the same
`entries:list`). What a follower does, and why:

- one request per poll for all replicas of a job (`log_filter`), every page of
  what is new;
- entries can arrive late and out of order (Cloud Logging ingests with a delay),
  so each poll starts `overlap` seconds before the newest entry read and drops
  what it has already seen by `insertId` (`LogCursor`);
- read requests count against a per-project quota (about 60 a minute on Google),
  shared by every follower of this process (`ReadBudget`); a 429
  RESOURCE_EXHAUSTED is answered by waiting (the server's Retry-After, else a
  growing back-off) and reading the same window again, never by starting over;
- polling adapts: fast while lines arrive, slower when quiet, never faster than
  the target's floor (several seconds on Google, sub-second locally); a caller
  that polls on its own (the lab panel) asks `next_poll` when to come back;
- after the job ends, reading goes on until the log has been quiet for the
  target's settle time, so a failing replica's last lines are shown.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

from ..errors import WorkbenchError
from .target import Session

TRIAL_LABEL = "ml.googleapis.com/trial_id"
STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"
EPOCH = "1970-01-01T00:00:00Z"


def log_filter(job_id: str, replica: str | None = None, trial: str | int | None = None) -> str:
    """The filter gcloud uses for a job's entries (of one replica, one tuning trial)."""
    query = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'
    if trial is not None:
        query += f' AND labels."{TRIAL_LABEL}"="{trial}"'
    if replica:
        query += f' AND resource.labels.task_name="{replica}"'
    return query


@dataclass(frozen=True)
class LogRecord:
    timestamp: datetime
    task_name: str  # with several trials read at once: `<trial>/<task name>`
    severity: str
    text: str
    insert_id: str


def to_record(entry: Any, with_trial: bool = False) -> LogRecord:
    payload = entry.payload
    if isinstance(payload, str):
        text = payload
    else:  # a JSON line: its message, or the line itself
        text = str(payload["message"]) if isinstance(payload, dict) and "message" in payload else json.dumps(payload)
    labels = entry.resource.labels if entry.resource else {}
    task = labels.get("task_name", "")
    trial = (entry.labels or {}).get(TRIAL_LABEL, "")
    if with_trial and trial:
        task = f"{trial}/{task}"
    return LogRecord(entry.timestamp, task, entry.severity or "DEFAULT", text, entry.insert_id)


def stamp_text(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(STAMP)


class LogCursor:
    """Where a reader stopped: the newest entry's timestamp, and the insertIds read from
    `overlap` seconds before it on (entries that arrive late into that window are still read once).
    The overlap is the reader's (`ReadPace`): the text form holds only the position."""

    def __init__(self, since: str = "", seen: dict[str, str] | None = None, overlap: float = 0.0) -> None:
        self.since = since  # RFC 3339 (STAMP), "" before the first entry
        self.seen = dict(seen or {})  # insertId -> its timestamp, within the window
        self.overlap = overlap
        self._prune_at = max(4096, 2 * len(self.seen))  # pruning as the window moves costs O(1) per entry

    def window_start(self) -> str:
        """Where the next read starts."""
        if not self.since:
            return EPOCH
        if not self.overlap:
            return self.since
        start = datetime.strptime(self.since, STAMP).replace(tzinfo=timezone.utc) - timedelta(seconds=self.overlap)
        return stamp_text(start)

    def admit(self, stamp: str, insert_id: str) -> bool:
        """True the first time an entry is read."""
        if insert_id in self.seen:
            return False
        self.seen[insert_id] = stamp
        if stamp > self.since:
            self.since = stamp
            if len(self.seen) > self._prune_at:
                self.prune()
        return True

    def prune(self) -> None:
        """Forget the entries before the window: a read never goes back that far."""
        start = self.window_start()
        self.seen = {i: s for i, s in self.seen.items() if s >= start}
        self._prune_at = max(4096, 2 * len(self.seen))

    # ---- opaque text form (the lab panel's cursor) -------------------------------------
    def encode(self) -> str:
        raw = json.dumps([self.since, self.seen], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> LogCursor:
        """The position `encode` wrote ("": the start); a reader given it applies its own overlap."""
        if not text:
            return cls()
        try:
            since, seen = json.loads(zlib.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))))
            if since:
                datetime.strptime(since, STAMP)
            if not (isinstance(seen, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in seen.items())):
                raise ValueError(text)
        except (ValueError, TypeError, zlib.error):
            raise WorkbenchError("cursor: not a cursor this server gave") from None
        return cls(since, seen)


class ReadBudget:
    """`entries.list` requests this process may send per minute to one project, shared by all
    its readers. Unknown limits (the local service) start unlimited. A 429 holds every reader
    until the server's Retry-After has passed and halves the rate (other processes read the same
    quota); each quiet minute after that gives a quarter back."""

    _budgets: dict[tuple[str, str], ReadBudget] = {}
    _budgets_lock = threading.Lock()

    def __init__(self, per_minute: float | None) -> None:
        self.initial = self.per_minute = per_minute
        self._sent: deque[float] = deque()
        self._held_until = 0.0
        self._refused_at = 0.0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, session: Session) -> ReadBudget:
        service = session.local_service()  # a restarted local service is another server, with its own quota
        key = (service["endpoint"] if service else session.target.endpoint or "google", session.target.project)
        with cls._budgets_lock:
            budget = cls._budgets.get(key)
            if budget is None:
                budget = cls._budgets[key] = cls(ReadPace.of(session).quota)
            return budget

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Wait for a request slot; False when `stop` was set meanwhile."""
        while True:
            with self._lock:
                now = time.monotonic()
                wait = self._wait(now)
                if wait <= 0:
                    self._sent.append(now)
                    return True
            pause = min(wait, 1.0)
            if stop is None:
                time.sleep(pause)
            elif stop.wait(pause):
                return False

    def delay(self) -> float:
        """Seconds until a request may go."""
        with self._lock:
            return max(0.0, self._wait(time.monotonic()))

    def _wait(self, now: float) -> float:
        """Seconds until a request may go (none or fewer: now); the caller holds the lock."""
        while self._sent and now - self._sent[0] >= 60.0:
            self._sent.popleft()
        self._recover(now)
        wait = self._held_until - now
        if wait <= 0 and self.per_minute is not None and len(self._sent) >= self.per_minute:
            wait = 60.0 - (now - self._sent[0])
        return wait

    def throttled(self, retry_after: float) -> None:
        """A 429: slow every reader of this project down."""
        with self._lock:
            now = self._refused_at = time.monotonic()
            self._held_until = max(self._held_until, now + retry_after)
            recent = max(1.0, len(self._sent) / 2)
            self.per_minute = recent if self.per_minute is None else max(1.0, min(self.per_minute, recent))

    def _recover(self, now: float) -> None:
        if self.per_minute is None or self.per_minute == self.initial or now - self._refused_at < 60.0:
            return
        self._refused_at = now
        self.per_minute *= 1.25
        if self.initial is not None:
            self.per_minute = min(self.per_minute, self.initial)
        elif self.per_minute > 600:  # back to what the server never limited
            self.per_minute = None


@dataclass(frozen=True)
class ReadPace:
    """How a reader polls one place: seconds between polls (floor and ceiling), how long a finished
    job's log must stay quiet, how far each poll looks back, and requests per minute (None: unknown)."""

    floor: float
    ceiling: float
    settle: float
    overlap: float
    quota: float | None

    @classmethod
    def of(cls, session: Session) -> ReadPace:
        service = session.local_service()
        if service is None:  # Google's Cloud Logging: ingestion takes seconds, 60 reads a minute per project
            return cls(floor=5.0, ceiling=30.0, settle=20.0, overlap=30.0, quota=50.0)
        options = service.get("options", {})
        lag = float(options.get("ingestion_delay", 0.0)) + float(options.get("ingestion_jitter", 0.0))
        late = lag + 1.0 if lag else 0.0  # an emulated ingestion delay and jitter, plus a second for the clocks
        return cls(floor=0.5, ceiling=5.0, settle=late, overlap=late, quota=None)


class Clock:
    """A follower's time; a test gives a fake one to check the pace without waiting for it."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float, stop: threading.Event | None) -> None:
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)


class LogReader:
    """Reads a job's entries, poll by poll, from where it stopped (its `cursor`: a position; the
    overlap is always this reader's pace's, whoever made the cursor)."""

    def __init__(self, session: Session, query: str, *, with_trial: bool = False,
                 cursor: LogCursor | None = None, page_size: int = 1000, clock: Clock | None = None) -> None:
        self.session, self.query, self.with_trial, self.page_size = session, query, with_trial, page_size
        self.pace = ReadPace.of(session)
        start = cursor or LogCursor()
        self.cursor = LogCursor(start.since, start.seen, self.pace.overlap)
        self.budget = ReadBudget.of(session)
        self.clock = clock or Clock()
        self.refused = 0  # 429s in a row
        self.held = False  # the last poll read nothing: the quota holds readers back

    def poll(self, stop: threading.Event | None = None, limit: int | None = None,
             wait: bool = True) -> list[LogRecord]:
        """Every entry now readable after the cursor (each page is one request), or the first
        `limit`. A 429 makes it wait and read the same window again (`stop` ends the wait); with
        `wait=False` it returns nothing at once instead, and `held` says so."""
        from google.api_core.exceptions import TooManyRequests

        stop = stop if wait else _NO_WAIT
        while True:
            self.held = not self.budget.acquire(stop)
            if self.held:
                return []
            try:
                records = self.session.logging(lambda client: self._read(client, limit))
                self.refused = 0
                return records
            except TooManyRequests as exc:
                # the server's Retry-After once; a second refusal in a row waits a whole quota minute
                self.refused += 1
                self.budget.throttled(60.0 if self.refused > 1 else _retry_after(exc) or 2.0)

    def next_poll(self) -> float:
        """Seconds until the next poll of a caller that polls on its own: the pace's floor, or
        longer while the read quota holds this project's readers back (a 429's back-off)."""
        return max(self.pace.floor, self.budget.delay())

    def settled(self, end_time: datetime | None) -> bool:
        """A job that ended at `end_time` has had time for its last entries to be ingested."""
        return end_time is not None and (datetime.now(timezone.utc) - end_time).total_seconds() >= self.pace.settle

    def _read(self, client: Any, limit: int | None) -> list[LogRecord]:
        from google.cloud import logging as cloud_logging

        cursor = LogCursor(self.cursor.since, self.cursor.seen, self.cursor.overlap)  # committed once all pages came
        query = f'{self.query} AND timestamp>="{cursor.window_start()}"'
        records: list[LogRecord] = []
        for entry in client.list_entries(resource_names=[f"projects/{self.session.target.project}"], filter_=query,
                                         order_by=cloud_logging.ASCENDING,
                                         page_size=min(self.page_size, limit or self.page_size)):
            if len(records) == limit:
                break
            if cursor.admit(stamp_text(entry.timestamp), entry.insert_id):
                records.append(to_record(entry, self.with_trial))
        cursor.prune()
        self.cursor = cursor
        return records

    def follow(self, is_final: Callable[[], bool], stop: threading.Event | None = None) -> Iterator[LogRecord]:
        """Entries as they come, until the job is final and its log has been quiet for the
        session's settle time (or `stop` is set)."""
        floor, ceiling, settle = self.pace.floor, self.pace.ceiling, self.pace.settle
        delay, final_since = floor, None
        while stop is None or not stop.is_set():
            final = is_final()
            records = self.poll(stop)
            yield from records
            now = self.clock.monotonic()
            if records:
                final_since = now if final else None
                delay = floor
            else:
                delay = min(ceiling, delay * 1.5)
                if final and final_since is None:
                    final_since = now
            if final_since is not None and now - final_since >= settle:
                return
            self.clock.wait(delay, stop)


_NO_WAIT = threading.Event()
_NO_WAIT.set()


def _retry_after(exc: Any) -> float:
    response = getattr(exc, "response", None)
    try:
        return float(response.headers.get("Retry-After", "")) if response is not None else 0.0
    except ValueError:
        return 0.0
