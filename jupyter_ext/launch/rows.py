"""A job as one row of a table: what `%vertex_jobs`, `vtrain jobs` and the lab panel list."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .. import replica_shell, states
from ..runner.backend import backend_of
from ..api import CUSTOM_JOBS, TUNING_JOBS, Collection


def job_row(job: Any, local: bool, now: datetime | None = None, collection: Collection = CUSTOM_JOBS) -> dict[str, Any]:
    """id, name, source, display name, state, replicas, backend, times (datetimes), duration (s), error, console URL,
    `access`: how to open a shell in each replica or its dashboard (see replica_shell),
    `access_heading`, what they offer in a few words, and for a tuning job `trials`: "made/maximum"."""
    now = now or datetime.now(timezone.utc)
    _, project, _, region, _, job_id = job.name.split("/")
    start, end = job.start_time, job.end_time
    spec = collection.spec_of(job)
    return {
        "id": job_id,
        "name": job.name,
        "source": "local" if local else "vertex",
        "display_name": job.display_name,
        "state": job.state.name,
        "final": states.is_final(job.state),
        "replicas": sum(p.replica_count for p in spec.worker_pool_specs),  # of each trial, for a tuning job
        "trials": f"{len(job.trials)}/{job.max_trial_count}" if collection is TUNING_JOBS else None,
        "backend": backend_of(job.labels) if local else "vertex",
        "create_time": job.create_time or None,
        "start_time": start or None,
        "end_time": end or None,
        "duration": round(((end or now) - start).total_seconds(), 3) if start else None,
        "error": job.error.message,
        "console_url": "" if local else collection.console_url(project, region, job_id),
        "access": replica_shell.access(job, local),
        "access_heading": replica_shell.heading(replica_shell.links(job, local)),
    }
