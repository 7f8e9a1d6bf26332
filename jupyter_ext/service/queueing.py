"""Which created jobs run now, across every collection of the local service.

At most `max_running_jobs` jobs and `max_replicas` replicas run at once (`jupyter_ext.limits`); a
job that does not fit waits QUEUED, first created first started, as Vertex AI queues jobs until
there is room. When a job ends its room goes to the waiting ones in order. A waiting job
cancelled by its user just leaves the queue. Nothing here runs a job: each is started by the
callback it was queued with.
"""

from __future__ import annotations

import threading
from typing import Callable

from ..limits import Limits


class JobQueue:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._waiting: dict[str, tuple[int, Callable[[], None]]] = {}  # in creation order
        self._running: dict[str, int] = {}  # job ID: the replicas it holds
        self._lock = threading.Lock()

    def submit(self, job_id: str, replicas: int, start: Callable[[], None]) -> None:
        """Queue a created job; `start` is called (now, or when its turn comes) to run it."""
        with self._lock:
            self._waiting[job_id] = (replicas, start)
        self._admit()

    def withdraw(self, job_id: str) -> bool:
        """Take a waiting job out of the queue; False when it is not waiting (started already)."""
        with self._lock:
            return self._waiting.pop(job_id, None) is not None

    def done(self, job_id: str) -> None:
        """A started job ended: its room goes to the next ones."""
        with self._lock:
            self._running.pop(job_id, None)
        self._admit()

    def _admit(self) -> None:
        started = []
        with self._lock:
            while self._waiting:
                job_id, (replicas, start) = next(iter(self._waiting.items()))
                busy = sum(self._running.values())
                # a job alone always starts (the limits checked at create keep it within the total)
                if self._running and (len(self._running) >= self.limits.max_running_jobs
                                      or busy + replicas > self.limits.max_replicas):
                    break
                del self._waiting[job_id]
                self._running[job_id] = replicas
                started.append(start)
        for start in started:
            start()
