"""Faults: the runner or the service killed, a full disk, output without end. Nothing hangs, nothing
is left running, and what was written stays.

Replicas die with their runner however it dies: a watchdog stops them when `vtrain run` or the
service is killed, and when the watchdog was killed too, the next run or the service's restart
reaps whatever carries a job's marker, processes that left their group with setsid included.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import (job_id, job_status, kill_service, point_sdk_at, pool, processes_of_job, restart_service, vtrain,
                      wait_for, wait_state, write_spec)
from services.fixtures import in_ci

from jupyter_ext import launch
from jupyter_ext.runner import Supervisor
from jupyter_ext.runner.docker import LABEL_JOB_ID
from jupyter_ext.spec import JobSpec

# each replica: itself, a child in its process group, and a child that left it (setsid); then heartbeats
ESCAPING = """\
import subprocess, sys, time
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)
while True:
    print('heartbeat', flush=True)
    time.sleep(0.5)
"""
PROCESSES_PER_REPLICA = 3
MB = 1 << 20


@pytest.fixture
def own_service(fast_sdk_polling: None) -> Iterator[dict]:
    """A local service of this test's own (in its own data folder), with the SDK pointed at it."""
    from google.cloud.aiplatform import initializer

    from jupyter_ext.service import daemon

    info = daemon.ensure_running()
    point_sdk_at(info, project="local", location="us-central1", api_transport="rest",
                 staging_bucket="gs://local-bucket")
    try:
        yield info
    finally:
        daemon.stop()
        initializer.global_config.__init__()


def _watchdogs_of(pid: int) -> list[int]:
    """The watchdog processes a runner (`vtrain run`, the service) started (runner/reaper.py)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
                    and b"runner/reaper.py" in (entry / "cmdline").read_bytes()):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            pass
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _start_run(spec: Path, job_dir: Path, backend: str = "process") -> tuple[subprocess.Popen[str], str]:
    """`vtrain run` in the background, as a user starts it in a terminal; and its job's ID."""
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_ext.cli", "run", str(spec), "--job-dir", str(job_dir),
                             "--backend", backend, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    match = re.match(r"vtrain: job (\d+) ", first)
    assert match, first
    return proc, match[1]


def _left(job: str, docker_api: Any = None, watchdogs: Sequence[int] = ()) -> str:
    """What is left of a job on this machine (and of the watchdogs that clean up after it), described;
    "" when nothing."""
    left = []
    if pids := processes_of_job(job):
        left.append(f"processes {pids}")
    if pids := [pid for pid in watchdogs if _running(pid)]:
        left.append(f"watchdogs {pids}")
    if docker_api is not None:
        label = {"label": f"{LABEL_JOB_ID}={job}"}
        if containers := docker_api.containers(all=True, filters=label):
            left.append(f"containers {[c['Names'] for c in containers]}")
        if networks := docker_api.networks(filters=label):
            left.append(f"networks {[n['Name'] for n in networks]}")
    return "; ".join(left)


def _escaping_job(tmp_path: Path, backend: str = "process",
                  request: pytest.FixtureRequest | None = None) -> tuple[Path, Any]:
    """A job of two replicas that each start a child and a setsid'ed child; the Docker API for docker."""
    if backend == "docker":
        assert request is not None
        services = request.getfixturevalue("docker_env")
        command = ["python", "-c", ESCAPING]
        pools = [pool(image=services.base_image, command=command), pool(image=services.base_image, command=command)]
        return write_spec(tmp_path / "job.yaml", pools), request.getfixturevalue("docker_api")
    return write_spec(tmp_path / "job.yaml", [pool(code=ESCAPING), pool(code=ESCAPING)]), None


def _wait_running(job: str, replicas: int) -> None:
    wait_for(lambda: len(processes_of_job(job)) >= replicas * PROCESSES_PER_REPLICA, 60,
             lambda: f"every replica and its children to start ({len(processes_of_job(job))} processes)")


def _running_escaping_job(tmp_path: Path, backend: str,
                          request: pytest.FixtureRequest) -> tuple[subprocess.Popen[str], str, Any, list[int]]:
    """`vtrain run` of `_escaping_job`, every process started: the runner, the job ID, the Docker
    API (docker) and the runner's watchdogs."""
    spec, docker_api = _escaping_job(tmp_path, backend, request)
    proc, job = _start_run(spec, tmp_path / "job", backend)
    _wait_running(job, 2)
    return proc, job, docker_api, _watchdogs_of(proc.pid)


# ---- vtrain run killed ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["process", "docker"])
def test_sigkill_of_vtrain_run_leaves_nothing_within_5_s(backend: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    proc, job, docker_api, watchdogs = _running_escaping_job(tmp_path, backend, request)
    proc.kill()
    proc.wait()
    wait_for(lambda: not _left(job, docker_api, watchdogs), 5,
             lambda: f"nothing left of the job, but: {_left(job, docker_api, watchdogs)}")
    assert (tmp_path / "job" / "logs" / "workerpool0-0.log").read_text().count("heartbeat") >= 1  # logs stay


@pytest.mark.parametrize("backend", ["process", "docker"])
def test_sighup_of_vtrain_run_cancels_the_job_cleanly(backend: str, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    proc, job, docker_api, watchdogs = _running_escaping_job(tmp_path, backend, request)
    proc.send_signal(signal.SIGHUP)  # the terminal closed
    wait_for(lambda: proc.poll() is not None and not _left(job, docker_api, watchdogs), 5,
             lambda: f"vtrain run to end, nothing left; but: {proc.poll()=} {_left(job, docker_api, watchdogs)}")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    status = job_status(tmp_path / "job")
    assert status["state"] == "CANCELLED" and "terminal closed (SIGHUP)" in status["error"]


@pytest.mark.parametrize("backend", ["process", "docker"])
def test_the_next_run_reaps_what_a_killed_runner_and_its_watchdog_left(backend: str, tmp_path: Path,
                                                                        request: pytest.FixtureRequest) -> None:
    proc, job, docker_api, watchdogs = _running_escaping_job(tmp_path, backend, request)
    for pid in [*watchdogs, proc.pid]:  # as the OOM killer or `kill -9` of everything would
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    if backend == "process":
        assert len(processes_of_job(job)) == 2 * PROCESSES_PER_REPLICA  # orphans, the setsid'ed ones too
    assert "processes" in _left(job, docker_api)

    image = {"image": request.getfixturevalue("docker_env").base_image} if backend == "docker" else {}
    quick = write_spec(tmp_path / "quick.yaml", [pool(command=["python", "-c", "print('hello')"], **image)])
    done = vtrain("run", str(quick), "--job-dir", str(tmp_path / "quick"), "--backend", backend)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not _left(job, docker_api)


def test_a_replica_that_setsids_a_child_leaves_nothing_when_the_job_ends(tmp_path: Path) -> None:
    code = ("import subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
            "print('started a child in its own session', flush=True)\n")
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(code=code)]}, "setsid")
    result = Supervisor(job, job_dir=tmp_path / "job").run()
    assert result.state == "SUCCEEDED"
    assert processes_of_job(result.job_id) == []


# a replica whose grandchild leaves its session and clears its environment: no marker, no group
ORPHANING = """\
import pathlib, subprocess, sys, time
orphan = subprocess.Popen(['sleep', {token!r}], env={{}}, start_new_session=True)
print('orphan', orphan.pid, flush=True)
while {wait!r} and not pathlib.Path({wait!r}).exists():
    time.sleep(0.1)
"""


def _orphaning(token: str, wait_for_file: Path | str = "") -> str:
    """What the replica runs: start `sleep TOKEN` with setsid and an empty environment, then exit
    (after `wait_for_file` appears, if given)."""
    return ORPHANING.format(token=token, wait=str(wait_for_file))


def _sleeping(token: str) -> list[int]:
    """The live `sleep TOKEN` processes on this machine."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{token}\0".encode()
                    and _running(int(entry.name))):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _zombies_of(pid: int) -> list[int]:
    """The exited children a process has not waited for."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and int(fields[1]) == pid and fields[0] == "Z":
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            pass
    return found


@pytest.fixture
def sleep_token() -> Iterator[Callable[[], str]]:
    """Unique `sleep` arguments (600.x seconds) to find a test's orphans by; any left are killed after."""
    tokens: list[str] = []

    def new() -> str:
        tokens.append(f"600.{secrets.randbelow(10 ** 9)}")
        return tokens[-1]

    yield new
    for pid in [pid for token in tokens for pid in _sleeping(token)]:
        os.kill(pid, signal.SIGKILL)


def _orphan_pids(log: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"orphan (\d+)", log)]


def test_a_grandchild_with_setsid_and_no_environment_is_gone_when_vtrain_run_returns(
        tmp_path: Path, sleep_token: Callable[[], str]) -> None:
    token = sleep_token()
    spec = write_spec(tmp_path / "job.yaml", [pool(code=_orphaning(token))])
    done = vtrain("run", str(spec), "--job-dir", str(tmp_path / "job"), timeout=60)
    assert done.returncode == 0 and "SUCCEEDED" in done.stdout.splitlines()[-1], done.stdout + done.stderr
    assert len(_orphan_pids(done.stdout)) == 1, done.stdout  # it did start
    assert _sleeping(token) == []


def test_sigkill_of_vtrain_run_leaves_no_orphan_it_had_adopted(tmp_path: Path,
                                                                sleep_token: Callable[[], str]) -> None:
    """The replica runs on; its child left `sleep` behind (no marker, own session), which the
    runner adopted: the watchdog kills it with the rest."""
    token = sleep_token()
    via_child = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {_orphaning(token)!r}])\n" \
                "while True:\n    time.sleep(0.5)\n"
    proc, _job = _start_run(write_spec(tmp_path / "job.yaml", [pool(code=via_child)]), tmp_path / "job")
    try:
        log = tmp_path / "job" / "logs" / "workerpool0-0.log"
        orphan = wait_for(lambda: log.is_file() and _orphan_pids(log.read_text()), 30, "the orphan to start")[0]
        wait_for(lambda: _parent(orphan) == proc.pid, 5, "the runner to adopt the orphan")
        time.sleep(1.5)  # the runner tells its watchdog of what it adopted every 0.5 s
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not _sleeping(token), 5, lambda: f"the orphan to go, but: {_sleeping(token)}")


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def test_a_grandchild_with_setsid_and_no_environment_is_gone_when_a_service_job_ends(
        own_service: dict, tmp_path: Path, sleep_token: Callable[[], str]) -> None:
    """Two jobs at once: the end of one kills nothing of the other, that still runs; when both
    ended, no orphan of either is left, and the service has no child it did not wait for."""
    from google.cloud import aiplatform

    def submit(name: str, code: str) -> Any:
        job = aiplatform.CustomJob(display_name=name, worker_pool_specs=[pool(code=code, form="sdk")])
        job.submit()
        return job

    def orphans_logged(job: Any) -> list[int]:
        lines = [r.text for r in launch.attach(job_id(job.resource_name)).logs(replica="workerpool0-0")]
        return _orphan_pids("\n".join(lines))

    long_token, short_token, go = sleep_token(), sleep_token(), tmp_path / "go"
    long = submit("orphaning-long", _orphaning(long_token, go))  # its orphan lives while it runs
    wait_for(lambda: orphans_logged(long), 30, "the long job's replica to start its orphan")
    short = submit("orphaning-short", _orphaning(short_token))
    wait_state(short, "JOB_STATE_SUCCEEDED")
    assert len(orphans_logged(short)) == 1  # it did start
    assert len(_sleeping(long_token)) == 1  # the job that runs keeps its own
    assert long.state.name == "JOB_STATE_RUNNING"

    go.touch()
    wait_state(long, "JOB_STATE_SUCCEEDED")
    assert _sleeping(long_token) == [] and _sleeping(short_token) == []
    assert _zombies_of(own_service["pid"]) == []


# ---- the service killed --------------------------------------------------------------------
def _submit_running(count: int) -> list[Any]:
    from google.cloud import aiplatform

    jobs = [aiplatform.CustomJob(display_name=f"crash-{n}", worker_pool_specs=[
        pool(code=ESCAPING, form="sdk"), pool(code=ESCAPING, form="sdk")]) for n in range(count)]
    for job in jobs:
        job.submit()
    for job in jobs:
        wait_state(job, "JOB_STATE_RUNNING")
        _wait_running(job_id(job.resource_name), 2)
        wait_for(lambda job=job: list(launch.attach(job_id(job.resource_name)).logs(replica="workerpool1-0")), 30,
                 "the first log line of workerpool1-0")
    return jobs


def _reconciled(jobs: list[Any]) -> None:
    """After a restart: each job FAILED, saying why, with its logs."""
    from google.cloud import aiplatform

    for job in jobs:
        again = aiplatform.CustomJob.get(job.resource_name)
        assert again.state.name == "JOB_STATE_FAILED"
        assert "service stopped while the job was running" in again.gca_resource.error.message
        lines = [r.text for r in launch.attach(job_id(job.resource_name)).logs(replica="workerpool1-0")]
        assert "heartbeat" in lines


def test_sigkill_of_the_service_with_three_jobs_running(own_service: dict) -> None:
    jobs = _submit_running(3)
    watchdogs = _watchdogs_of(own_service["pid"])
    kill_service(own_service)
    for job in jobs:  # the watchdogs act at once
        wait_for(lambda job=job: not _left(job_id(job.resource_name), watchdogs=watchdogs), 5,
                 lambda job=job: f"nothing left of {job.resource_name}, but: "
                                 f"{_left(job_id(job.resource_name), watchdogs=watchdogs)}")
    restart_service(own_service)
    _reconciled(jobs)


def test_a_restarted_service_reaps_what_its_killed_watchdogs_left(own_service: dict) -> None:
    jobs = _submit_running(1)
    for pid in _watchdogs_of(own_service["pid"]):
        os.kill(pid, signal.SIGKILL)
    kill_service(own_service)
    job = job_id(jobs[0].resource_name)
    assert len(processes_of_job(job)) == 2 * PROCESSES_PER_REPLICA  # orphans, the setsid'ed ones too
    restart_service(own_service)
    assert processes_of_job(job) == []
    _reconciled(jobs)


# ---- a full disk, output without end -------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 5 MB tmpfs (mounting needs root)."""
    if os.geteuid() != 0:
        if in_ci():
            pytest.fail("mounting a tmpfs needs root", pytrace=False)
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "small"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_fails_the_job_at_once_naming_enospc(small_disk: Path, tmp_path: Path) -> None:
    code = ("import sys, time\n"
            "for _ in range(20 * 1024):\n"
            "    sys.stdout.write('x' * 1023 + '\\n')\n"  # 20 MB
            "sys.stdout.flush()\n"
            "time.sleep(300)\n")
    spec = write_spec(tmp_path / "job.yaml", [pool(code=code)])
    started = time.monotonic()
    done = vtrain("run", str(spec), "--quiet", timeout=120, env={"VTRAIN_HOME": str(small_disk)})
    assert time.monotonic() - started < 30  # within seconds, although the replica would sleep for 300
    assert done.returncode == 1, done.stdout + done.stderr
    job = re.match(r"vtrain: job (\d+) ", done.stdout)[1]  # type: ignore[index]
    log = small_disk / "jobs" / job / "logs" / "workerpool0-0.log"
    assert f"cannot write workerpool0-0's log: No space left on device (ENOSPC): {log}" in done.stdout
    assert "FAILED" in done.stdout.splitlines()[-1]
    assert processes_of_job(job) == []
    assert log.stat().st_size > 4 * MB  # what fitted was kept


def _vm_hwm(pid: int) -> int:
    """The peak resident memory of a process, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status)[1]) * 1024  # type: ignore[index]


def test_1_gb_without_a_newline_keeps_the_service_under_200_mb(own_service: dict) -> None:
    code = ("import sys, time\n"
            "chunk = 'x' * (1 << 20)\n"
            "for _ in range(1024):\n"
            "    sys.stdout.write(chunk)\n"  # 1 GB, one line
            "sys.stdout.write('\\ndone\\n')\n"
            "sys.stdout.flush()\n"
            "time.sleep(300)\n")
    handle = launch.submit({"displayName": "one-long-line", "jobSpec": {"workerPoolSpecs": [pool(code=code)]}})
    log = handle.local_dir / "logs" / "workerpool0-0.log"
    try:
        def finished() -> bool:
            if not log.is_file() or log.stat().st_size < 1024 * MB:
                return False
            with open(log, "rb") as f:
                f.seek(-32, os.SEEK_END)
                return f.read().endswith(b" stdout done\n")

        wait_for(finished, 300, "the replica's 1 GB in its log")
        peak = _vm_hwm(own_service["pid"])
        assert peak < 200 * MB, f"the service peaked at {peak / MB:.0f} MB"
        entries = 0
        with open(log, "rb") as f:
            for raw in f:  # split into entries of at most 256 KB, as Cloud Logging takes them
                text = raw.split(b" ", 2)[2][:-1]
                assert len(text) <= 256 * 1024
                entries += 1
        assert entries == 1024 * MB // (256 * 1024) + 1
    finally:
        handle.cancel()
        handle.wait(60)
        shutil.rmtree(log.parent, ignore_errors=True)  # 1 GB
