"""The local service's job store: SQLite under the workbench's data folder.

A row keeps the CustomJob as the API returns it (proto3 JSON) next to the
columns the service queries: state, display name, parent, times. A restarted
service reads the same file, so old jobs and their logs stay listed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.cloud.aiplatform_v1 import types as v1
from google.protobuf import json_format

from .. import paths, states
from ..api import CUSTOM_JOBS, TUNING_JOBS, Collection

SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    id TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    display_name TEXT NOT NULL,
    state INTEGER NOT NULL,
    create_time TEXT NOT NULL,
    update_time TEXT NOT NULL,
    job_dir TEXT NOT NULL,
    backend TEXT NOT NULL,
    resource TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS {table}_parent ON {table} (parent, create_time);
"""


@dataclass
class StoredJob:
    id: str
    parent: str
    job_dir: Path
    backend: str
    resource: Any  # a v1.CustomJob or v1.HyperparameterTuningJob

    @property
    def name(self) -> str:
        return self.resource.name

    @property
    def state(self) -> v1.JobState:
        return self.resource.state


class JobStore:
    """One collection's table of job resources."""

    def __init__(self, path: Path, collection: Collection = CUSTOM_JOBS) -> None:
        paths.private_file(path)  # the owner's only (SQLite gives its WAL and shm files this mode)
        self.table, self.resource_type = TABLES[collection.path], collection.resource_type
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA.format(table=self.table))
        self._lock = threading.Lock()

    def add(self, job: StoredJob) -> None:
        r = job.resource
        with self._lock:
            self._db.execute(
                f"INSERT INTO {self.table} (id, parent, display_name, state, create_time, update_time, job_dir, backend, "
                "resource) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.id, job.parent, r.display_name, int(r.state), _stamp(r, "create_time"), _stamp(r, "update_time"),
                 str(job.job_dir), job.backend, _to_json(r)))

    def save(self, job: StoredJob) -> None:
        r = job.resource
        with self._lock:
            self._db.execute(f"UPDATE {self.table} SET state = ?, update_time = ?, resource = ? WHERE id = ?",
                             (int(r.state), _stamp(r, "update_time"), _to_json(r), job.id))

    def get(self, job_id: str) -> StoredJob | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM {self.table} WHERE id = ?", (job_id,)).fetchone()
        return self._row(row) if row else None

    def list(self, parent: str, *, states: list[int] | None = None, display_name: str | None = None,
             after: tuple[str, str] | None = None, limit: int = 1000) -> list[StoredJob]:
        """Newest first; `after` is the (create_time, id) of the last job of the previous page."""
        sql, args = f"SELECT {_COLUMNS} FROM {self.table} WHERE parent = ?", [parent]
        if states:
            sql += f" AND state IN ({', '.join('?' * len(states))})"
            args += states
        if display_name is not None:
            sql += " AND display_name = ?"
            args.append(display_name)
        if after:
            sql += " AND (create_time < ? OR (create_time = ? AND id < ?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY create_time DESC, id DESC LIMIT ?"
        args.append(limit)
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        return [self._row(r) for r in rows]

    def projects(self) -> dict[str, str]:
        """Every job's project, by job ID."""
        with self._lock:
            rows = self._db.execute(f"SELECT id, parent FROM {self.table}").fetchall()
        return {job_id: parent.split("/")[1] for job_id, parent in rows}

    def unfinished(self) -> list[StoredJob]:
        final = [int(v1.JobState[s]) for s in states.FINAL]
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM {self.table} WHERE state NOT IN "
                                    f"({', '.join('?' * len(final))})", final).fetchall()
        return [self._row(r) for r in rows]

    def delete(self, job_id: str) -> None:
        with self._lock:
            self._db.execute(f"DELETE FROM {self.table} WHERE id = ?", (job_id,))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _row(self, row: tuple[Any, ...]) -> StoredJob:
        job_id, parent, job_dir, backend, resource = row
        return StoredJob(job_id, parent, Path(job_dir), backend,
                         self.resource_type.from_json(resource, ignore_unknown_fields=True))


TABLES = {CUSTOM_JOBS.path: "jobs", TUNING_JOBS.path: "hyperparameter_tuning_jobs"}  # as older data folders have them
_COLUMNS = "id, parent, job_dir, backend, resource"


def _to_json(resource: Any) -> str:
    return json.dumps(json_format.MessageToDict(resource._pb))


def _stamp(resource: Any, field: str) -> str:
    value = getattr(resource, field)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if value else ""  # sorts as text
