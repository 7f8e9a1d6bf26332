"""Reading a job's logs through the Cloud Logging client: the filter, the cursor, the follower.

One code path for Cloud Logging and the local service (which serves the same
`entries:list`). What a follower does, and why:

- one filter for all replicas of a job (`log_filter`); a poll reads the pages of
  what is new, each page one request, and a follower's poll at most a few of
  them (`ReadPace.pages`), so a long backlog leaves the quota to other readers;
- entries can arrive late and out of order (Cloud Logging ingests with a delay),
  so each listing starts `overlap` seconds before the newest entry read and drops
  what it has already seen by `insertId` (`LogCursor`);
- every request counts against a per-project quota (about 60 a minute on Google),
  shared by every follower of this process (`ReadBudget`: one slot per page); the
  cursor moves and records are handed out page by page, so a 429
  RESOURCE_EXHAUSTED on a page keeps the pages before it and is answered by
  waiting (the server's Retry-After, else a growing back-off) and reading that
  page again (its page token, the same filter), never by starting over;
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

from ..api import LOG_RESOURCE_TYPE, TRIAL_LABEL
from ..errors import WorkbenchError
from .target import Session

STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"
EPOCH = "1970-01-01T00:00:00Z"


def log_filter(job_id: str, replica: str | None = None, trial: str | int | None = None) -> str:
    """The filter gcloud uses for a job's entries (of one replica, one tuning trial)."""
    query = f'resource.type="{LOG_RESOURCE_TYPE}" AND resource.labels.job_id="{job_id}"'
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


def time_of_day(moment: datetime) -> str:
    """An entry's time of day on this machine's clock, to the millisecond, as the monitor and the panel show
    it beside start times that are local too."""
    return moment.astimezone().strftime("%H:%M:%S.%f")[:-3]


class LogCursor:
    """Where a reader stopped: the newest entry's timestamp, and the insertIds read from
    `overlap` seconds before it on (entries that arrive late into that window are still read once);
    while a listing goes on over several polls, the window start it was asked for and the token of
    the page to read next (the next request goes on there, with the same filter).
    The overlap is the reader's (`ReadPace`): the text form holds only the position."""

    def __init__(self, since: str = "", seen: dict[str, str] | None = None, overlap: float = 0.0,
                 start: str = "", token: str = "") -> None:
        self.since = since  # RFC 3339 (STAMP), "" before the first entry
        self.seen = dict(seen or {})  # insertId -> its timestamp, within the window
        self.overlap = overlap
        self.start = start  # the window start of the listing under way; "": none, the next one starts afresh
        self.token = token  # that listing's next page; "": its first
        self._prune_at = max(4096, 2 * len(self.seen))  # pruning as the window moves costs O(1) per entry

    def window_start(self) -> str:
        """Where the next listing starts."""
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
        self.since = max(self.since, stamp)
        return True

    def turn_page(self, start: str, token: str) -> None:
        """A page of the listing from `start` was read whole; `token` is the next page's ("": it was the last).
        A page read in part is not turned: it is read again, and what was read of it is still in `seen`."""
        self.start, self.token = (start, token) if token else ("", "")
        if not token or len(self.seen) > self._prune_at:
            self.prune()

    def prune(self) -> None:
        """Forget the entries before the window: a read never goes back that far."""
        start = self.window_start()
        self.seen = {i: s for i, s in self.seen.items() if s >= start}
        self._prune_at = max(4096, 2 * len(self.seen))

    # ---- opaque text form (the lab panel's cursor) -------------------------------------
    def encode(self) -> str:
        raw = json.dumps([self.since, self.seen, self.start, self.token], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> LogCursor:
        """The position `encode` wrote ("": the start); a reader given it applies its own overlap."""
        if not text:
            return cls()
        try:
            since, seen, start, token = json.loads(zlib.decompress(base64.urlsafe_b64decode(
                text + "=" * (-len(text) % 4))))
            if not all(isinstance(value, str) for value in (since, start, token)):
                raise ValueError(text)
            for stamp in (since, "" if start == EPOCH else start):  # `start` goes into the filter: a timestamp only
                if stamp:
                    datetime.strptime(stamp, STAMP)
            if not (isinstance(seen, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in seen.items())):
                raise ValueError(text)
        except (ValueError, TypeError, zlib.error):
            raise WorkbenchError("cursor: not a cursor this server gave") from None
        return cls(since, seen, start=start, token=token)


class ReadBudget:
    """`entries.list` requests (pages) this process may send per minute to one project, shared by all
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
        # a restarted local service is another server, with its own quota, even on the port of the one before
        service = session.local_service()
        place = f"{service['endpoint']} pid {service.get('pid')}" if service else session.target.endpoint or "google"
        key = (place, session.target.project)
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
    job's log must stay quiet, how far each listing looks back, requests per minute (None: unknown),
    and the pages one poll of a follower reads at most (so its backlog leaves the quota to others)."""

    floor: float
    ceiling: float
    settle: float
    overlap: float
    quota: float | None
    pages: int

    @classmethod
    def of(cls, session: Session) -> ReadPace:
        service = session.local_service()
        if service is None:  # Google's Cloud Logging: ingestion takes seconds, 60 reads a minute per project
            return cls(floor=5.0, ceiling=30.0, settle=20.0, overlap=30.0, quota=50.0, pages=3)
        options = service.get("options", {})
        lag = float(options.get("ingestion_delay", 0.0)) + float(options.get("ingestion_jitter", 0.0))
        late = lag + 1.0 if lag else 0.0  # an emulated ingestion delay and jitter, plus a second for the clocks
        return cls(floor=0.5, ceiling=5.0, settle=late, overlap=late, quota=None, pages=10)


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
    """Reads a job's entries, poll by poll and page by page, from where it stopped (its `cursor`: a
    position; the overlap is always this reader's pace's, whoever made the cursor)."""

    def __init__(self, session: Session, query: str, *, with_trial: bool = False,
                 cursor: LogCursor | None = None, page_size: int = 1000, clock: Clock | None = None) -> None:
        self.session, self.query, self.with_trial, self.page_size = session, query, with_trial, page_size
        self.pace = ReadPace.of(session)
        given = cursor or LogCursor()
        self.cursor = LogCursor(given.since, given.seen, self.pace.overlap, given.start, given.token)
        self.budget = ReadBudget.of(session)
        self.clock = clock or Clock()
        self.refused = 0  # 429s in a row
        self.held = False  # the last poll stopped before the end of what is readable: read again

    def poll(self, stop: threading.Event | None = None, limit: int | None = None, wait: bool = True,
             pages: int | None = None) -> list[LogRecord]:
        """Entries now readable after the cursor: up to `limit` of them and `pages` pages (None: to
        the end). Each page is one request, takes one slot of the read budget and moves the cursor.
        A 429 keeps the pages read before it; the refused page is read again when the budget allows.
        The poll waits for that (and for any slot; `stop` ends the wait) while it has nothing to hand
        out, or always when asked to read to the end; else it returns what it has, and so does
        `wait=False` at once. `held` says whether it stopped short of the end."""
        from google.api_core.exceptions import TooManyRequests

        size = min(self.page_size, limit or self.page_size)  # the same for every page of a listing
        records: list[LogRecord] = []
        read = 0
        while limit is None or len(records) < limit:
            patient = wait and (pages is None or not records)
            if read == pages or not self.budget.acquire(stop if patient else _NO_WAIT):
                self.held = True
                return records
            wanted = None if limit is None else limit - len(records)
            try:
                records += self.session.logging(lambda client: self._page(client, size, wanted))
            except TooManyRequests as exc:
                # the server's Retry-After once; a second refusal in a row waits a whole quota minute
                self.refused += 1
                self.budget.throttled(60.0 if self.refused > 1 else _retry_after(exc) or 2.0)
                continue
            self.refused, read = 0, read + 1
            if not self.cursor.start:  # the listing's last page
                break
        self.held = False
        return records

    def next_poll(self) -> float:
        """Seconds until the next poll of a caller that polls on its own: the pace's floor, or
        longer while the read quota holds this project's readers back (a 429's back-off)."""
        return max(self.pace.floor, self.budget.delay())

    def settled(self, end_time: datetime | None) -> bool:
        """A job that ended at `end_time` has had time for its last entries to be ingested."""
        return end_time is not None and (datetime.now(timezone.utc) - end_time).total_seconds() >= self.pace.settle

    def _page(self, client: Any, size: int, wanted: int | None) -> list[LogRecord]:
        """One `entries.list` request: the next page of the listing under way, or the first page of
        one from the window's start. The cursor moves past the page, or, once `wanted` entries came
        from it, stays on it (what is left of it is read next time)."""
        from google.cloud.logging_v2._helpers import entry_from_resource  # the client's own parsing

        cursor = self.cursor
        start = cursor.start or cursor.window_start()
        body: dict[str, Any] = {"resourceNames": [f"projects/{self.session.target.project}"],
                                "filter": f'{self.query} AND timestamp>="{start}"', "orderBy": "timestamp asc",
                                "pageSize": size}
        if cursor.token:
            body["pageToken"] = cursor.token
        # the client's list_entries hides the page tokens: the same POST, one page of it
        page = client.logging_api.api_request(method="POST", path="/entries:list", data=body)
        records: list[LogRecord] = []
        loggers: dict[str, Any] = {}
        for resource in page.get("entries", ()):
            if len(records) == wanted:
                cursor.start = start
                return records
            entry = entry_from_resource(resource, client, loggers)
            if cursor.admit(stamp_text(entry.timestamp), entry.insert_id):
                records.append(to_record(entry, self.with_trial))
        cursor.turn_page(start, page.get("nextPageToken", ""))
        return records

    def follow(self, is_final: Callable[[], bool], stop: threading.Event | None = None) -> Iterator[LogRecord]:
        """Entries as they come, until the job is final and its log has been quiet for the
        session's settle time (or `stop` is set). A backlog is read a few pages a poll."""
        floor, ceiling, settle = self.pace.floor, self.pace.ceiling, self.pace.settle
        delay, final_since = floor, None
        while stop is None or not stop.is_set():
            final = is_final()
            records = self.poll(stop, pages=self.pace.pages)
            yield from records
            now = self.clock.monotonic()
            if records:
                final_since = now if final else None
                delay = floor
            else:  # quiet; but a poll that stopped short (the rest of a window read again) cannot end it
                delay = floor if self.held else min(ceiling, delay * 1.5)
                if final and final_since is None:
                    final_since = now
            if final_since is not None and not self.held and now - final_since >= settle:
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
