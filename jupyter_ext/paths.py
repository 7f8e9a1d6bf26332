"""Where the workbench keeps its files, and local job IDs."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import platformdirs


def data_dir() -> Path:
    """`$VTRAIN_HOME`, else the user's data folder (~/.local/share/vertex-workbench)."""
    home = os.environ.get("VTRAIN_HOME")
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir("vertex-workbench"))


def jobs_dir() -> Path:
    return data_dir() / "jobs"


def new_job_id() -> str:
    """A numeric ID like Vertex's CustomJob IDs: time-ordered, 19 digits."""
    return f"{time.time_ns() // 1000:016d}{secrets.randbelow(1000):03d}"


def local_output_dir(base: str, job_dir: Path) -> tuple[str, str]:
    """The local folder for a job's base output directory, and a note when it was moved.

    Local runs keep outputs on this machine: no base gives `<job dir>/output/`,
    a `gs://bucket/path` base maps to `<data dir>/gcs/bucket/path/`.
    """
    if not base:
        return f"{job_dir / 'output'}/", ""
    if base.startswith("gs://"):
        local = f"{data_dir() / 'gcs' / base[5:].strip('/')}/"
        return local, f"baseOutputDirectory {base} is kept locally in {local}"
    return base, ""
