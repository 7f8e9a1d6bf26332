"""`vtrain gc` and the data folder's pruning policy: what is over goes, what runs stays."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TRAINERS, job_status, kill_service, pool, vtrain, vtrain_in_process, wait_for, write_spec

from jupyter_ext import gc, paths
from jupyter_ext.runner import Supervisor
from jupyter_ext.spec import JobSpec

DAY = 24 * 3600
WAIT_FOR_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.1)\n"


def _age(path: Path, days: float) -> None:
    """Make everything under `path` look last modified `days` ago."""
    when = time.time() - days * DAY
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files + dirs:
            os.utime(Path(root) / name, (when, when), follow_symlinks=False)
    os.utime(path, (when, when))


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def _finished_job(tmp_path: Path, days: float, base: str = "") -> Path:
    spec = {"workerPoolSpecs": [pool(code="print('trained')")]}
    if base:
        spec["baseOutputDirectory"] = {"outputUriPrefix": base}
    result = Supervisor(JobSpec.from_dict(spec)).run()  # in the data folder, as `vtrain run` puts it
    assert result.state == "SUCCEEDED"
    _age(Path(result.job_dir), days)
    return Path(result.job_dir)


@pytest.fixture
def running_job(tmp_path: Path) -> Iterator[Path]:
    """A job that runs until the test ends, whose folder and outputs in the local bucket are 30 days old."""
    stop = tmp_path / "stop"
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(code=WAIT_FOR_FILE, args=[str(stop)])],
                             "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/running"}})
    sup = Supervisor(job)
    thread = threading.Thread(target=sup.run)
    thread.start()
    try:
        wait_for(lambda: sup.state == "RUNNING", 30, "the job to run")
        checkpoint = paths.data_dir() / "gcs" / "bucket" / "running" / "checkpoints" / "ckpt-1"
        checkpoint.write_text("weights")
        _age(sup.job_dir, 30)
        _age(checkpoint, 30)
        yield sup.job_dir
    finally:
        stop.touch()
        thread.join(30)


def _data_folder(tmp_path: Path) -> dict[str, Path]:
    """A data folder as weeks of use leave it."""
    home = paths.data_dir()
    made = {"old job": _finished_job(tmp_path, 10), "new job": _finished_job(tmp_path, 0)}
    for name, days in (("old context", 10), ("new context", 0)):
        folder = home / "contexts" / name.replace(" ", "-")
        folder.mkdir(parents=True)
        (folder / "Dockerfile").write_text("FROM python\n" * 100)
        _age(folder, days)
        made[name] = folder
    build = home / "builds" / "trainer-1234"
    build.mkdir(parents=True)
    (build / "Dockerfile").write_text("FROM python\n")
    _age(build, 10)
    made["old build"] = build
    for name, days in (("old object", 10), ("new object", 0)):
        blob = home / "gcs" / "bucket" / "runs" / name.replace(" ", "-")
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(b"x" * 1000)
        _age(blob, days)
        made[name] = blob
    starting = home / "jobs" / "1234567890"  # no status.json yet: a job being set up, or queued
    starting.mkdir()
    _age(starting, 10)
    made["starting job"] = starting
    return made


def test_dry_run_lists_what_would_go_with_its_bytes_and_removes_nothing(tmp_path: Path, running_job: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    made = _data_folder(tmp_path)
    old = [made[name] for name in ("old job", "old context", "old build", "old object")]
    code, out, err = vtrain_in_process(capsys, "gc", "--older-than", "7d", "--dry-run")
    assert code == 0, err
    listed = [line.split()[-1] for line in out.splitlines()[1:-1]]
    assert sorted(listed) == sorted(str(p) for p in old)
    total = sum(_size(p) for p in old)
    assert out.splitlines()[-1].endswith(f"({total} bytes) in 4 item(s)") and out.startswith("SIZE")
    assert all(p.exists() for p in made.values())

    code, out, err = vtrain_in_process(capsys, "gc", "--older-than", "7d")
    assert code == 0 and f"freed {gc.human(total)} ({total} bytes) in 4 item(s)" in out
    assert [name for name, p in made.items() if not p.exists()] == ["old job", "old context", "old build",
                                                                    "old object"]
    assert running_job.is_dir() and (paths.data_dir() / "gcs/bucket/running/checkpoints/ckpt-1").is_file()
    assert not (paths.data_dir() / "gcs" / "bucket" / "runs" / "old-object").exists()


def test_keep_and_max_size_never_touch_a_running_job(tmp_path: Path, running_job: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    made = _data_folder(tmp_path)
    code, _, _ = vtrain_in_process(capsys, "gc", "--keep", "1")
    assert code == 0
    assert sorted(name for name, p in made.items() if not p.exists()) == ["old build", "old context", "old job"]

    code, _, _ = vtrain_in_process(capsys, "gc", "--keep", "0", "--max-size", "1")  # everything that may go
    assert code == 0
    assert sorted(name for name, p in made.items() if p.exists()) == ["starting job"]
    assert running_job.is_dir() and (paths.data_dir() / "gcs/bucket/running/checkpoints/ckpt-1").is_file()
    assert job_status(running_job)["state"] == "RUNNING"


def test_keep_keeps_the_newest_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = [_finished_job(tmp_path, days) for days in (4, 3, 2, 1)]
    code, _, _ = vtrain_in_process(capsys, "gc", "--keep", "2", "--older-than", "2d12h")
    assert code == 0
    assert [job.exists() for job in jobs] == [False, False, True, True]


def test_a_job_whose_vtrain_run_was_killed_is_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path / "job.yaml", [pool(code=WAIT_FOR_FILE, args=[str(tmp_path / "never")])])
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_ext.cli", "run", str(spec)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    job_dir = Path(re.search(r"logs in (\S+)/logs", proc.stdout.readline())[1])  # type: ignore[index]
    wait_for(lambda: (job_dir / "status.json").is_file(), 30, "the job to run")
    code, _, _ = vtrain_in_process(capsys, "gc", "--older-than", "0s")
    assert code == 0 and job_dir.is_dir()  # its runner lives: it runs
    proc.kill()
    proc.wait()
    assert job_status(job_dir)["state"] == "RUNNING"  # as the killed runner left it
    code, _, _ = vtrain_in_process(capsys, "gc", "--older-than", "0s")
    assert code == 0 and not job_dir.exists()


def test_a_failed_job_with_a_deep_output_is_measured_and_removed(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """1,500 nested folders: past Python's recursion limit, which a recursive walk or `shutil.rmtree` hits."""
    deep = ("import os\nos.chdir(os.environ['AIP_MODEL_DIR'])\nfor _ in range(1500):\n    os.mkdir('a')\n"
            "    os.chdir('a')\nopen('weights', 'w').write('x' * 1000)\nraise SystemExit(1)\n")
    result = Supervisor(JobSpec.from_dict({"workerPoolSpecs": [pool(code=deep)]})).run()
    job_dir = Path(result.job_dir)
    assert result.state == "FAILED" and (job_dir / "output" / "model" / "a").is_dir()
    code, out, err = vtrain_in_process(capsys, "gc", "--keep", "0", "--dry-run")
    assert (code, err) == (0, "")
    found = subprocess.run(["find", str(job_dir), "!", "-type", "d", "-printf", "%s\n"], capture_output=True,
                           text=True, check=True)  # find walks any depth
    size = sum(int(line) for line in found.stdout.split())
    assert size > 1000 and f"would free {gc.human(size)} ({size} bytes) in 1 item(s)" in out and str(job_dir) in out
    code, out, err = vtrain_in_process(capsys, "gc", "--keep", "0")
    assert (code, err) == (0, "") and not job_dir.exists()


def test_the_service_store_says_when_a_tuning_job_is_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jupyter_ext.service import daemon

    trainer = [sys.executable, str(TRAINERS / "hpt_trainer.py"), "--use-hypertune"]
    spec = write_spec(tmp_path / "job.yaml", [pool(image="x", command=trainer)])
    try:
        done = vtrain("tune", str(spec), "--params", "units=discrete:16", "--metric", "accuracy:maximize",
                      "--trials", "1", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        tuning_id = re.search(r"hyperparameterTuningJobs/(\d+)", done.stdout)[1]  # type: ignore[index]
        tuning_dir = paths.jobs_dir() / tuning_id
        assert tuning_dir.is_dir() and not (tuning_dir / "status.json").exists()  # only its trials have one
        busy = write_spec(tmp_path / "busy.yaml", [pool(code=WAIT_FOR_FILE, args=[str(tmp_path / "stop")])])
        submitted = vtrain("submit", str(busy))
        assert submitted.returncode == 0, submitted.stderr
        busy_dir = paths.jobs_dir() / re.search(r"customJobs/(\d+)", submitted.stdout)[1]  # type: ignore[index]
        wait_for(lambda: (busy_dir / "status.json").is_file(), 30, "the submitted job to run")
        code, _, _ = vtrain_in_process(capsys, "gc", "--older-than", "0s")
        assert code == 0
        assert not tuning_dir.exists() and busy_dir.is_dir()
    finally:
        (tmp_path / "stop").touch()
        daemon.stop()


def test_bad_flags_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for args, message in (((), "--older-than, --keep or --max-size: say what may go (vtrain gc --help)"),
                          (("--older-than", "soon"),
                           "--older-than: 'soon' is not a duration like 30d, 12h, 90m, 45s or 1w2d"),
                          (("--keep", "-1"), "--keep: '-1' is not a whole number of items to keep"),
                          (("--max-size", "big"),
                           "--max-size: 'big' is not a size like 500M, 20G or a number of bytes")):
        code, out, err = vtrain_in_process(capsys, "gc", *args)
        assert (code, out, err) == (2, "", f"vtrain: error: {message}\n")


def test_the_policy_from_the_environment_prunes_at_once_and_says_so(tmp_path: Path) -> None:
    old = _finished_job(tmp_path, 10)
    new = _finished_job(tmp_path, 0)
    notes: list[str] = []
    assert gc.keep_pruning(notes.append, environ={}) is None  # off by default
    assert gc.keep_pruning(notes.append, environ={gc.ENV_OLDER_THAN: "a week"}) is None
    assert notes == [("not pruning the data folder: VTRAIN_GC_OLDER_THAN: 'a week' is not a duration like 30d, "
                      "12h, 90m, 45s or 1w2d")]
    notes.clear()
    assert gc.keep_pruning(notes.append, environ={gc.ENV_OLDER_THAN: "7d"}) is not None
    wait_for(lambda: notes, 30, "the policy to run")
    assert not old.exists() and new.is_dir()
    assert notes[0].startswith("pruned the data folder: 1 item(s), ")


def test_a_removed_job_is_gone_from_the_service_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whether the service runs during `vtrain gc` or not, the job it removed is not listed after."""
    from jupyter_ext.service import daemon

    spec = write_spec(tmp_path / "job.yaml", [pool(code="print('trained')")])
    try:
        for service_runs in (True, False):
            code, out, err = vtrain_in_process(capsys, "submit", str(spec), "--follow")
            assert code == 0 and "trained" in out, err
            job = re.search(r"customJobs/(\d+)", out)[1]  # type: ignore[index]
            if not service_runs:
                daemon.stop()
            code, out, _ = vtrain_in_process(capsys, "gc", "--older-than", "0s")
            assert code == 0 and str(paths.jobs_dir() / job) in out
            code, out, _ = vtrain_in_process(capsys, "jobs")
            assert code == 0 and job not in out
            code, _, err = vtrain_in_process(capsys, "cancel", job)
            assert code == 2 and err.startswith("vtrain: error: 404 ") and f"CustomJob {job} does not exist" in err
    finally:
        daemon.stop()


def test_what_the_service_saves_after_a_gc_survives_its_restart(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`vtrain gc` opens the service's store beside the running service: that must not take the
    store's write-ahead log from under the service, whose later writes would go to a deleted file,
    lost when the service crashes."""
    from jupyter_ext.service import daemon

    spec = write_spec(tmp_path / "job.yaml", [pool(code="print('trained')")])
    try:
        jobs = []
        for _ in range(2):
            code, out, err = vtrain_in_process(capsys, "submit", str(spec), "--follow")
            assert code == 0, err
            jobs.append(re.search(r"customJobs/(\d+)", out)[1])  # type: ignore[index]
            assert vtrain_in_process(capsys, "gc", "--older-than", "30d")[0] == 0  # removes nothing
        kill_service(daemon.status())  # type: ignore[arg-type]
        code, out, _ = vtrain_in_process(capsys, "jobs")  # a new service, from the store on disk
        assert code == 0
        assert sorted(line.split()[:2] for line in out.splitlines()[1:]) == sorted([job, "SUCCEEDED"] for job in jobs)
    finally:
        daemon.stop()
