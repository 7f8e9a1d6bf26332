"""Run a lesson notebook headless (nbclient, a real kernel) and say what its jobs did."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from . import launch, paths, states
from .errors import WorkbenchError
from .service import daemon


@dataclass
class JobSummary:
    id: str
    display_name: str
    state: str
    replicas: list[tuple[str, str]]  # (task name, exit code or "stopped")
    logs: Path


@dataclass
class NotebookRun:
    executed: Path
    errors: list[str] = field(default_factory=list)  # "cell N: ename: evalue"
    jobs: list[JobSummary] = field(default_factory=list)


def run_notebook(path: Path, output: Path | None = None, timeout: int = 600) -> NotebookRun:
    """Execute every cell; the executed copy goes to `output` (default: the data folder's
    `notebooks/`). A service the run started is stopped afterwards, so nothing is left running."""
    book = read_notebook(path)
    output = output or paths.data_dir() / "notebooks" / path.name
    if not paths.in_data_dir(output):  # in the data folder `write_private` makes the folders
        output.parent.mkdir(parents=True, exist_ok=True)
    service_was_running = daemon.status() is not None
    started = datetime.now(timezone.utc)
    # as "Run All": the first failing cell (a failed job fails its cell) stops the run
    client = NotebookClient(book, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    stopped: list[str] = []
    try:
        client.execute()
    except CellExecutionError as exc:  # a UsageError leaves no error output: say it from the reply
        stopped.append(f"{exc.ename}: {exc.evalue}")
    finally:
        if paths.in_data_dir(output):
            paths.write_private(output, nbformat.writes(book))  # its outputs may show the job's env values
        else:
            nbformat.write(book, output)
    run = NotebookRun(output, errors=_errors(book) or stopped)
    try:
        run.jobs = [_summary(job) for job in reversed(launch.list_jobs()) if job.create_time >= started]
    finally:
        if not service_was_running:
            daemon.stop()
    return run


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at `path`; anything else (a binary, a YAML file, JSON of another shape) is one line."""
    try:
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
    except (ValueError, KeyError, TypeError, AttributeError, nbformat.ValidationError) as exc:
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise WorkbenchError(f"NOTEBOOK: {path} is not a Jupyter notebook ({why})") from None
    return book


def _errors(book: nbformat.NotebookNode) -> list[str]:
    found = []
    for n, cell in enumerate(book.cells, 1):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {n}: {out.get('ename')}: {out.get('evalue')}")
    return found


def _summary(job: object) -> JobSummary:
    job_id = job.name.rsplit("/", 1)[1]  # type: ignore[attr-defined]
    job_dir = paths.jobs_dir() / job_id
    try:
        status = json.loads((job_dir / "status.json").read_text())
        replicas = [(r["task_name"], "stopped" if r["exit_code"] is None else str(r["exit_code"]))
                    for r in status["replicas"]]
    except (OSError, ValueError, KeyError):
        replicas = []
    return JobSummary(job_id, job.display_name, states.short(job.state),  # type: ignore[attr-defined]
                      replicas, job_dir / "logs")
