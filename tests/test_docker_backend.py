"""The docker backend on a real engine: Vertex hostnames and port, job semantics, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TRAINERS, log_lines, pool, wait_for, write_spec
from services.docker_services import Services

import jupyter_ext.runner.docker  # noqa: F401  (registers the docker backend until runner/__init__ does)
from jupyter_ext import images, packaging
from jupyter_ext.runner import Supervisor
from jupyter_ext.runner.docker import LABEL_JOB_ID, DockerBackend
from jupyter_ext.spec import JobSpec


HEARTBEAT = "import time\nfor i in range(600):\n    print('heartbeat', i, flush=True)\n    time.sleep(0.5)\n"


@pytest.fixture(scope="module")
def trainer_image(docker_services: Services) -> str:
    """The rendezvous trainer in the codelab's layout on the test base image."""
    ctx = packaging.build_context(TRAINERS / "rendezvous.py", base_image=docker_services.base_image)
    ref = f"vtrain-test/rendezvous:{ctx.tag}"
    for _ in images.build(ctx, ref, engine=docker_services.engine_url):
        pass
    return ref


def _left(api: Any, job_id: str) -> tuple[list[Any], list[Any]]:
    """Containers and networks of the job, asked of the engine itself."""
    label = {"label": f"{LABEL_JOB_ID}={job_id}"}
    return api.containers(all=True, filters=label), api.networks(filters=label)


def _reports(job_dir: Path, task: str) -> list[dict]:
    return [json.loads(text) for _, stream, text in log_lines(job_dir, task)
            if stream == "stdout" and text.startswith("{")]


def test_a_ps_job_rendezvous_over_vertex_addresses(docker_env: Services, docker_api: Any, trainer_image: str,
                                                    tmp_path: Path) -> None:
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=trainer_image), pool(2, image=trainer_image),
                                                 pool(image=trainer_image)]}, "rendezvous")
    seen_networks: list[list[Any]] = []

    def on_state(state: str) -> None:
        if state == "RUNNING":  # every replica started
            seen_networks.append(_left(docker_api, sup.job_id)[1])

    sup = Supervisor(job, backend="docker", job_dir=tmp_path / "job", on_state=on_state)
    result = sup.run()
    assert result.state == "SUCCEEDED", result.error
    assert [r.exit_code for r in result.replicas] == [0, 0, 0, 0]
    assert all(len(r.ident) == 64 for r in result.replicas)  # the container IDs
    assert len(seen_networks[0]) == 1 and seen_networks[0][0]["Name"] == f"vtrain-{result.job_id}"

    tasks = {"workerpool0-0": "chief:0", "workerpool1-0": "worker:0", "workerpool1-1": "worker:1",
             "workerpool2-0": "ps:0"}
    addresses = {name: f"{task}:2222" for task, name in tasks.items()}
    for task, me in tasks.items():
        (report,) = _reports(tmp_path / "job", task)
        assert report["me"] == me and report["hostname"] == task and report["listen"] == f"{task}:2222"
        peers = {a: n for n, a in addresses.items() if n != me}
        assert report["reached"] == peers  # a real TCP connection to each peer's port 2222
        assert sorted(report["heard"]) == sorted(peers.values())
    written = json.loads((tmp_path / "job" / "output" / "model" / "rendezvous.json").read_text())
    assert written["me"] == "chief:0"  # AIP_MODEL_DIR inside the container is the folder on the host
    assert _left(docker_api, result.job_id) == ([], [])


def test_a_crashing_replica_fails_the_job_and_leaves_nothing(docker_env: Services, docker_api: Any,
                                                              trainer_image: str, tmp_path: Path) -> None:
    crash = ["python", "-c", ("import sys, time; print('about to fail', flush=True); time.sleep(0.5); "
                              "raise SystemExit('worker gave up: disk full')")]
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=trainer_image, command=["python", "-c", HEARTBEAT]),
                                                 pool(1, image=trainer_image, command=crash)]}, "crash")
    start = time.monotonic()
    result = Supervisor(job, backend="docker", job_dir=tmp_path / "job").run()
    assert result.state == "FAILED"
    assert result.error.startswith("replica workerpool1-0 (worker) exited with code 1; last lines:")
    assert "worker gave up: disk full" in result.error and "about to fail" in result.error
    assert [r.exit_code for r in result.replicas] == [None, 1]
    assert time.monotonic() - start < 30
    assert _left(docker_api, result.job_id) == ([], [])


def test_cancelling_a_running_job_leaves_nothing(docker_env: Services, docker_api: Any, trainer_image: str,
                                                 tmp_path: Path) -> None:
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=trainer_image, command=["python", "-c", HEARTBEAT]),
                                                 pool(2, image=trainer_image, command=["python", "-c", HEARTBEAT])]},
                            "cancel-me")
    running: list[list[Any]] = []

    def on_lines(task: str, _stream: str, _stamp: str, lines: list[str]) -> None:
        if task == "workerpool1-1" and "heartbeat 2" in lines[-1] and not running:
            running.append(_left(docker_api, sup.job_id)[0])
            sup.cancel()

    sup = Supervisor(job, backend="docker", job_dir=tmp_path / "job", on_lines=on_lines)
    start = time.monotonic()
    result = sup.run()
    assert result.state == "CANCELLED" and result.exit_code == 130
    assert len(running[0]) == 3 and all(c["State"] == "running" for c in running[0])
    assert time.monotonic() - start < 20  # SIGTERM stops a replica at once (the container has an init)
    assert _left(docker_api, result.job_id) == ([], [])


def test_an_exception_in_the_runner_leaves_nothing(docker_env: Services, docker_api: Any, trainer_image: str,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_supervise(self: Supervisor) -> tuple[str, str]:
        raise RuntimeError("bug in the runner")

    monkeypatch.setattr(Supervisor, "_supervise", broken_supervise)
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(1, image=trainer_image, command=["python", "-c", HEARTBEAT]),
                                                 pool(1, image=trainer_image, command=["python", "-c", HEARTBEAT])]})
    sup = Supervisor(job, backend="docker", job_dir=tmp_path / "job")
    with pytest.raises(RuntimeError, match="bug in the runner"):
        sup.run()
    assert _left(docker_api, sup.job_id) == ([], [])


def test_output_streams_stay_apart_and_args_replace_cmd(docker_env: Services, trainer_image: str,
                                                        tmp_path: Path) -> None:
    code = "import sys; print('out', sys.argv[1:]); print('err', file=sys.stderr); sys.stdout.write('tail')"
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=trainer_image, command=["python", "-c", code],
                                                       args=["--lr", "0.1"])]})
    result = Supervisor(job, backend="docker", job_dir=tmp_path / "job").run()
    assert result.state == "SUCCEEDED", result.error
    lines = [(stream, text) for _, stream, text in log_lines(tmp_path / "job", "workerpool0-0")]
    assert sorted(lines) == [("stderr", "err"), ("stdout", "out ['--lr', '0.1']"), ("stdout", "tail")]


def test_a_python_package_job_runs_from_an_sdist(docker_env: Services, tmp_path: Path) -> None:
    ctx = packaging.build_context("import os, sys\nprint('from the sdist', os.environ['CLOUD_ML_JOB_ID'], "
                                  "sys.argv[1:])\n")
    sdist = packaging.write_sdist(ctx, tmp_path / "dist")
    job = JobSpec.from_dict({"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": docker_env.base_image, "packageUris": [str(sdist)],
                              "pythonModule": "trainer.task", "args": ["--epochs", "2"]}}]})
    result = Supervisor(job, backend="docker", job_dir=tmp_path / "job").run()
    assert result.state == "SUCCEEDED", result.error
    log = (tmp_path / "job/logs/workerpool0-0.log").read_text()
    assert f"from the sdist {result.job_id} ['--epochs', '2']" in log


def test_vtrain_run_with_the_docker_backend(docker_env: Services, docker_api: Any, trainer_image: str,
                                            tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "job.yaml", [pool(image=trainer_image), pool(1, image=trainer_image)])
    # `vtrain run` as a user runs it; the docker backend is imported first until runner/__init__ does it
    code = "import sys, jupyter_ext.runner.docker, jupyter_ext.cli; sys.exit(jupyter_ext.cli.main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "run", str(spec), "--backend", "docker", "--job-dir",
                           str(tmp_path / "job")], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "DOCKER_HOST": docker_env.engine_url})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[workerpool1-0] worker:0: listening on 0.0.0.0:2222" in done.stdout
    assert "SUCCEEDED [workerpool0-0=0, workerpool1-0=0]" in done.stdout.splitlines()[-1]


def test_missing_images_fail_before_anything_starts(docker_env: Services, docker_api: Any, tmp_path: Path) -> None:
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=f"{docker_env.registry}/tests/never-pushed:1")]})
    result = Supervisor(job, backend="docker", job_dir=tmp_path / "job").run()
    assert result.state == "FAILED"
    assert result.error.startswith(f"workerPoolSpecs[0].containerSpec.imageUri: image {docker_env.registry}/tests/"
                                   "never-pushed:1 is not on the Docker engine and cannot be pulled: ")
    assert not list((tmp_path / "job" / "logs").iterdir())
    assert _left(docker_api, result.job_id) == ([], [])


def test_an_unreachable_engine_fails_the_job_with_a_clear_reason(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/no-engine.sock"
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image="vtrain-test/any:1")]})
    result = Supervisor(job, backend=DockerBackend(engine=url), job_dir=tmp_path / "job").run()
    assert result.state == "FAILED"
    assert result.error == f"cannot reach the Docker engine at {url}: No such file or directory"


def test_cleanup_is_safe_twice_and_threads_do_not_leak(docker_env: Services, trainer_image: str,
                                                       tmp_path: Path) -> None:
    before = threading.active_count()
    backend = DockerBackend()
    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=trainer_image, command=["python", "-c", "print(1)"])]})
    assert Supervisor(job, backend=backend, job_dir=tmp_path / "job").run().state == "SUCCEEDED"
    backend.cleanup()
    wait_for(lambda: threading.active_count() <= before, 5,
             lambda: f"the backend's threads to end ({threading.active_count()} running, {before} before)")


def test_a_crashed_supervisors_job_is_cleaned_up_by_job_id(docker_env: Services, docker_api: Any,
                                                             trainer_image: str, tmp_path: Path) -> None:
    from jupyter_ext import cluster

    job = JobSpec.from_dict({"workerPoolSpecs": [pool(image=trainer_image, command=["python", "-c", HEARTBEAT]),
                                                 pool(1, image=trainer_image, command=["python", "-c", HEARTBEAT])]})
    backend = DockerBackend()  # a supervisor that dies after starting its replicas, before any cleanup
    backend.prepare(tmp_path / "job", job)
    pools = dict(job.pools)
    handles = [backend.start(r, pools[r.pool], lambda _s, _d: None)
               for r in cluster.replicas(job, style="docker", job_id="crashed-42", output_dir=f"{tmp_path}/out/")]
    containers, networks = _left(docker_api, "crashed-42")
    assert {c["Id"] for c in containers} == {h.ident for h in handles} and len(networks) == 1

    DockerBackend().cleanup_job("crashed-42")  # what the local service does when it restarts
    assert _left(docker_api, "crashed-42") == ([], [])
    backend.cleanup()  # and the original backend's own cleanup still copes
