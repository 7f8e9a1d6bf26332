"""Every lesson notebook runs top to bottom with a real kernel, on the local default."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, processes_of_job
from jupyter_ext.notebooks import JobSummary, run_notebook
from jupyter_ext.service import daemon

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CODELAB_TRAINER = ROOT / "jupyter_ext" / "examples" / "multiworker" / "trainer" / "task.py"
# the last update of a Keras 2 progress bar in an epoch: "10/10 [====] - 2s 200ms/step - loss: 1.1788 - ..."
EPOCH_END = re.compile(r"(\d+)/\1 \[=+\] - .*/step - loss: ([0-9.]+)")
pytestmark = pytest.mark.slow


def epoch_losses(job_dir: Path, task: str) -> list[str]:
    """The loss a replica logged at the end of each epoch. Keras writes its updates into one line,
    each after backspaces and a carriage return (the log file keeps them): what the line shows is
    the text after its last carriage return."""
    text = (job_dir / "logs" / f"{task}.log").read_bytes().decode()  # read_text() makes each CR a line break
    shown = (line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return [match[2] for line in shown if (match := EPOCH_END.search(line))]


def check_codelab(book: nbformat.NotebookNode, jobs: list[JobSummary]) -> None:
    """Lesson 01 runs the codelab's trainer: model.fit under MultiWorkerMirroredStrategy, a chief and
    a worker training one model, the chief saving to the model folder, the worker under workertemp_N."""
    trainer_cells = [c.source for c in book.cells if c.source.startswith("%%vertex_train")]
    assert [cell.split("\n", 1)[1] for cell in trainer_cells] == [CODELAB_TRAINER.read_text()] * 2
    assert all("--env TF_USE_LEGACY_KERAS=1" in cell.split("\n", 1)[0] for cell in trainer_cells)
    [job] = [job for job in jobs if job.display_name == "codelab-multiworker"]
    assert job.replicas == [("workerpool0-0", "0"), ("workerpool1-0", "0")]
    job_dir = job.logs.parent
    model_dir = job_dir / "output" / "model"  # AIP_MODEL_DIR
    worker_id = 0  # workerpool1-0 is worker 0 in TF_CONFIG
    assert sorted((job_dir / "output").rglob("saved_model.pb")) == [
        model_dir / "saved_model.pb", model_dir / f"workertemp_{worker_id}" / "saved_model.pb"]
    assert [p.name for p in model_dir.glob("workertemp_*")] == [f"workertemp_{worker_id}"]
    chief, worker = (epoch_losses(job_dir, task) for task in ("workerpool0-0", "workerpool1-0"))
    assert len(chief) == 2 and chief == worker


def check_chief_or_master(book: nbformat.NotebookNode, jobs: list[JobSummary]) -> None:
    """Lesson 02: a legacy trainingInput config showed AI Platform's `master`, and runs with Vertex AI's `chief`."""
    [job] = [job for job in jobs if job.display_name == "legacy_master"]
    log = (job.logs / "workerpool0-0.log").read_text()
    assert 'TF_CONFIG task: {"type": "chief", "index": 0}' in log
    assert 'CLUSTER_SPEC task: {"type": "workerpool0", "index": 0}' in log


def check_restart(book: nbformat.NotebookNode, jobs: list[JobSummary]) -> None:
    """Lesson 04: the lost worker's log says it was started again, where the lesson points the learner."""
    [job] = [job for job in jobs if job.display_name == "with-restarts"]
    log = (job.logs / "workerpool1-0.log").read_text()
    assert ("[runner] workerpool1-0 exited with code -9; restarting it (restartJobOnWorkerRestart, restart 1 of 3)"
            in log)


LESSON_CHECKS: dict[str, Callable[[nbformat.NotebookNode, list[JobSummary]], None]] = {
    "01_multiworker_codelab": check_codelab,
    "02_tf_config_and_cluster_spec": check_chief_or_master,
    "04_fault_tolerance": check_restart,
}


def test_there_are_five_lessons() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_clean(path: Path, tmp_path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    assert book.cells[0].cell_type == "markdown" and "Learning goal" in book.cells[0].source
    expected_failures = set(book.metadata.get("vtrain", {}).get("expected_failed", []))
    run = run_notebook(path, tmp_path / path.name, timeout=300)
    assert run.errors == []
    for job in run.jobs:
        wanted = "FAILED" if job.display_name in expected_failures else "SUCCEEDED"
        assert job.state == wanted, f"{job.display_name}: {job.state}"
        assert processes_of_job(job.id) == []
    assert {job.display_name for job in run.jobs} >= expected_failures
    if path.stem in LESSON_CHECKS:
        LESSON_CHECKS[path.stem](book, run.jobs)
    assert daemon.status() is None  # nothing left running
