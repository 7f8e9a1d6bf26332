"""Pruning the workbench's data folder: `vtrain gc`, and the policy the local service applies.

What may go, under the data folder (`paths.data_dir()`):
- `jobs/<id>/`: the folder (logs, outputs, status) of a job that is over;
- `contexts/<tag>/` and `builds/<name>-<tag>/`: build contexts, written again when needed;
- `gcs/`: the local bucket folder, file by file (then its empty folders), except under the
  base output directory of a job that is not over.

A job is over when the local service's store calls it final (SUCCEEDED, FAILED, CANCELLED);
for a job the store does not know (`vtrain run`, a notebook's run), when its `status.json`
says a final state, or names a runner process that is gone (a killed `vtrain run`). A
running, queued or unknown job, and everything under its base output directory, stays. A job
removed that the store knows is deleted from it too, as the service's DELETE does.

Which of those go:
- `older_than` (seconds): what was last modified longer ago;
- `keep` (N): of jobs, and of build contexts, all but the N newest (with `older_than`:
  only what is both older and not among the N newest); the bucket's files are not counted;
- `max_bytes`: then, while the data folder is larger, the oldest of the rest, the N newest
  jobs and contexts always kept.

The service's policy comes from the environment, off unless one is set:
VTRAIN_GC_OLDER_THAN (a duration: 30d, 12h, 1w2d), VTRAIN_GC_KEEP (N), VTRAIN_GC_MAX_SIZE
(bytes, or 500M, 20G); the service applies it when it starts and once a day.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import paths, states
from .errors import WorkbenchError

if TYPE_CHECKING:
    from .service.store import JobStore

DAY = 24 * 3600.0
ENV_OLDER_THAN, ENV_KEEP, ENV_MAX_SIZE = "VTRAIN_GC_OLDER_THAN", "VTRAIN_GC_KEEP", "VTRAIN_GC_MAX_SIZE"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": DAY, "w": 7 * DAY}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)


@dataclass(frozen=True)
class Policy:
    older_than: float | None = None  # seconds
    keep: int | None = None
    max_bytes: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Policy | None:
        """The configured policy, or None (off). Raises WorkbenchError naming a bad variable."""
        older = environ.get(ENV_OLDER_THAN, "").strip()
        keep = environ.get(ENV_KEEP, "").strip()
        size = environ.get(ENV_MAX_SIZE, "").strip()
        if not (older or keep or size):
            return None
        return cls(parse_duration(older, ENV_OLDER_THAN) if older else None,
                   parse_count(keep, ENV_KEEP) if keep else None,
                   parse_size(size, ENV_MAX_SIZE) if size else None)


@dataclass(frozen=True)
class Item:
    kind: str  # job, context, bucket
    path: Path
    bytes: int
    modified: float  # the newest modification time in it


@dataclass
class Report:
    items: list[Item] = field(default_factory=list)  # what went (or, in a dry run, would go)
    errors: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(item.bytes for item in self.items)


def parse_duration(text: str, where: str) -> float:
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise WorkbenchError(f"{where}: {text!r} is not a duration like 30d, 12h, 90m, 45s or 1w2d")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_count(text: str, where: str) -> int:
    if not text.isdigit():
        raise WorkbenchError(f"{where}: {text!r} is not a whole number of items to keep")
    return int(text)


def parse_size(text: str, where: str) -> int:
    m = _SIZE.fullmatch(text)
    if not m:
        raise WorkbenchError(f"{where}: {text!r} is not a size like 500M, 20G or a number of bytes")
    return int(float(m[1]) * 1024 ** " KMGT".index(m[2].upper() or " "))


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


# ---- what there is ---------------------------------------------------------------------
def plan(policy: Policy, now: float | None = None) -> list[Item]:
    """What `policy` removes from the data folder now, oldest first."""
    now = time.time() if now is None else now
    root = paths.data_dir()
    over, kept_jobs = _jobs(root / "jobs")
    protected = [folder for job_dir in kept_jobs for folder in _output_folders(job_dir)]
    contexts = [_item("context", p) for name in ("contexts", "builds") for p in _children(root / name)]
    bucket = [Item("bucket", p, p.lstat().st_size, p.lstat().st_mtime) for p in _files(root / "gcs")
              if not any(p == f or f in p.parents for f in protected)]
    groups = [sorted(over, key=lambda i: -i.modified), sorted(contexts, key=lambda i: -i.modified)]
    may_go: list[Item] = []
    for items in groups:
        may_go += items[policy.keep:] if policy.keep is not None else items
    may_go += bucket
    if policy.older_than is not None:
        going = [i for i in may_go if now - i.modified > policy.older_than]
    elif policy.keep is not None:
        going = [i for i in may_go if i.kind != "bucket"]
    else:
        going = []
    if policy.max_bytes is not None:
        size = _size(root) - sum(i.bytes for i in going)
        chosen = set(going)
        for item in sorted((i for i in may_go if i not in chosen), key=lambda i: i.modified):
            if size <= policy.max_bytes:
                break
            going.append(item)
            size -= item.bytes
    return sorted(going, key=lambda i: i.modified)


def prune(policy: Policy, dry_run: bool = False, now: float | None = None) -> Report:
    """Remove what `policy` says may go (nothing with `dry_run`); what could not be removed is
    in the report's errors."""
    report = Report()
    for item in plan(policy, now):
        if not dry_run and (problem := paths.remove_tree(item.path)):
            report.errors.append(f"cannot remove all of {item.path}: {problem}")
            continue
        report.items.append(item)
    if not dry_run:
        report.errors += _forget([item.path.name for item in report.items if item.kind == "job"])
        _remove_empty_folders(paths.data_dir() / "gcs")
    return report


def keep_pruning(on_note: Callable[[str], None], environ: Mapping[str, str] = os.environ,
                 every: float = DAY) -> threading.Thread | None:
    """The service's policy: applied now, then every `every` seconds, in a daemon thread that
    says what it removed through `on_note`. None when no policy is configured."""
    try:
        policy = Policy.from_env(environ)
    except WorkbenchError as exc:
        on_note(f"not pruning the data folder: {exc}")
        return None
    if policy is None:
        return None

    def run() -> None:
        while True:
            try:
                report = prune(policy)
            except Exception as exc:  # noqa: BLE001  (a bad day must not stop the next one)
                on_note(f"pruning the data folder failed: {exc!r}")
            else:
                if report.items or report.errors:
                    on_note(f"pruned the data folder: {len(report.items)} item(s), {human(report.bytes)} freed"
                            + "".join(f"; {error}" for error in report.errors))
            time.sleep(every)

    thread = threading.Thread(target=run, name="vtrain-gc", daemon=True)
    thread.start()
    return thread


# ---- jobs ------------------------------------------------------------------------------
def _jobs(jobs_dir: Path) -> tuple[list[Item], list[Path]]:
    """Folders of jobs that are over, as items, and those of the others."""
    folders = _children(jobs_dir)
    is_final = _store_states(paths.job_store_file())
    over, kept = [], []
    for folder in folders:
        if not folder.is_dir() or folder.is_symlink():
            continue
        final = is_final(folder.name)
        if final is None:
            final = _over_by_status(folder)
        if final:
            over.append(_item("job", folder))
        else:
            kept.append(folder)
    return over, kept


def _store_states(database: Path) -> Callable[[str], bool | None]:
    """Whether the local service's store calls a job (or tuning job) final; None: not its job."""
    if not database.is_file():
        return lambda _job_id: None
    stores = _stores(database)
    unfinished = {stored.id for store in stores for stored in store.unfinished()}
    known = {stored_id for store in stores for stored_id in store.projects()}
    for store in stores:
        store.close()
    return lambda job_id: (job_id not in unfinished) if job_id in known else None


def _forget(job_ids: list[str]) -> list[str]:
    """Delete removed jobs from the local service's store, with the store's own delete, as the
    service's DELETE does: `vtrain jobs` must not list a job whose logs are gone. SQLite lets a
    running service share the file, and it keeps no final job in memory. Returns errors."""
    database = paths.job_store_file()
    if not job_ids or not database.is_file():
        return []
    stores: list[JobStore] = []
    try:
        stores = _stores(database)
        for store in stores:
            for job_id in job_ids:
                store.delete(job_id)
    except sqlite3.Error as exc:
        return [f"cannot delete the removed jobs from the job store {database}: {exc}"]
    finally:
        for store in stores:
            store.close()
    return []


def _stores(database: Path) -> list[JobStore]:
    """The store's tables: custom jobs and tuning jobs."""
    from .api import CUSTOM_JOBS, TUNING_JOBS
    from .service.store import JobStore

    return [JobStore(database, collection) for collection in (CUSTOM_JOBS, TUNING_JOBS)]


def _over_by_status(folder: Path) -> bool:
    from .runner.reaper import runner_alive

    try:
        status = json.loads((folder / "status.json").read_text())
    except (OSError, ValueError):
        return False  # starting, queued, or not a job's folder: not ours to judge
    if not isinstance(status, dict):
        return False
    if states.is_final(status.get("state", "")):
        return True
    runner = status.get("runner")
    return isinstance(runner, str) and bool(runner) and not runner_alive(runner)


def _output_folders(job_dir: Path) -> Iterator[Path]:
    """The local folders of the base output directories of a job and its trials (job.json)."""
    for spec in [job_dir / "job.json", *job_dir.glob("trials/*/job.json")]:
        try:
            base = json.loads(spec.read_text())["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(base, str) and base:
            yield Path(paths.local_output_dir(base, spec.parent)[0])


# ---- files -----------------------------------------------------------------------------
def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _item(kind: str, path: Path) -> Item:
    size, modified = 0, 0.0
    for _, st in paths.walk_tree(path):
        size += 0 if _is_dir(st) else st.st_size
        modified = max(modified, st.st_mtime)
    return Item(kind, path, size, modified)


def _files(folder: Path) -> Iterator[Path]:
    """Everything under `folder` that is not a folder (a symbolic link is one file)."""
    return (path for path, st in paths.walk_tree(folder) if not _is_dir(st))


def _size(folder: Path) -> int:
    return sum(st.st_size for _, st in paths.walk_tree(folder) if not _is_dir(st))


def _is_dir(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode)


def _remove_empty_folders(folder: Path) -> None:
    inside = [path for path, st in paths.walk_tree(folder) if _is_dir(st) and path != folder]
    for path in reversed(inside):  # each after the folders it held
        try:
            os.rmdir(path)  # only when empty
        except OSError:
            pass
