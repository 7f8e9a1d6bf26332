"""What the workbench writes into its data folder is its owner's only: folders 0700, files 0600
(job.json and status.json hold the job's env values, an executed notebook shows them too)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from conftest import TRAINERS, vtrain

from jupyter_ext import images, packaging

CELL = "%%vertex_train --name private --job-dir gs://bucket/run --env TOKEN=secret\nprint('trained')\n"


@pytest.fixture(scope="module")
def data_folder(module_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data folder after a packaged build and a notebook run whose job runs a packaged cell."""
    ctx = packaging.build_context(TRAINERS / "hpt_trainer.py")
    packaging.write_context(ctx, images.default_context_dir(ctx))  # what `vtrain build` writes before it builds
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%load_ext jupyter_ext"),
                                           nbformat.v4.new_code_cell(CELL)])
    path = tmp_path_factory.mktemp("notebook") / "private.ipynb"
    nbformat.write(book, path)
    ran = vtrain("notebook", str(path), timeout=300)  # stops the service it started
    assert ran.returncode == 0, ran.stdout + ran.stderr
    yield module_home


@pytest.fixture(autouse=True)
def _workbench_home(data_folder: Path) -> Path:  # the module's data folder, made once
    return data_folder


def _readable_by_others(root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """`<mode> <path>` of every folder and file under `root` (and `root`) that group or others may use."""
    found = []
    for folder, dirs, files in os.walk(root):
        for path in [Path(folder), *(Path(folder) / name for name in files)]:
            mode = path.lstat().st_mode
            shown = str(path.relative_to(root))
            if mode & 0o077 and not stat.S_ISLNK(mode) and not any(shown == s or shown.startswith(f"{s}/")
                                                                   for s in skip):
                found.append(f"{stat.S_IMODE(mode):04o} {shown}")
    return sorted(found)


def _made(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_build_context_the_notebook_and_the_job_are_the_owners_only(data_folder: Path) -> None:
    made = _made(data_folder)
    for expected in ("builds", "contexts", "notebooks/private.ipynb", "jobs.sqlite", "service/service.log", "gcs"):
        assert expected in made, made
    assert any(p.startswith("jobs/") and p.endswith("/job.json") for p in made)
    assert _readable_by_others(data_folder, skip=tuple(_written_by_the_replica(made))) == []


def _written_by_the_replica(made: list[str]) -> list[str]:
    """Its bytecode caches: what a replica writes has the modes its own code gives, as on Vertex AI."""
    return [p for p in made if p.endswith("/__pycache__")]
