"""What the pre-flight check lets through to Vertex AI and what it refuses, for commands and images
whose meaning depends on this machine: its home, current and data folders, and Docker Hub's names.
(Refusals end to end, through the CLI, the local service and the bucket: test_cloud_path.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import pool

from jupyter_ext.launch import Target, preflight
from jupyter_ext.spec import JobSpec

GOOGLE = Target(project="p", region="us-central1", local=False)  # Google's endpoint: every check applies
IMAGE = "us-docker.pkg.dev/p/r/trainer:1"


def _problems(command: list[str] | None = None, image: str = IMAGE) -> list[str]:
    job = JobSpec.load({"workerPoolSpecs": [pool(1, command=command or ["python", "-m", "trainer.task"],
                                                 image=image)]})
    return list(preflight.problems(job, GOOGLE))


@pytest.mark.parametrize("cwd, home", [("/", "/"), ("", "/home/jupyter"), ("/usr/local", "/root")],
                         ids=["root-folder", "workbench", "system-prefix-and-root"])
@pytest.mark.parametrize("program", ["/usr/bin/python3", "/opt/conda/bin/python", "/trainer/task.py",
                                     "/root/train.py"])
def test_commands_an_image_can_have_pass_wherever_the_cli_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             cwd: str, home: str, program: str) -> None:
    """Also on Vertex AI Workbench (Python in /opt/conda, the user in /home/jupyter, a project folder)."""
    monkeypatch.chdir(cwd or tmp_path)
    monkeypatch.setenv("HOME", home)
    assert _problems([program, "-m", "trainer.task"]) == []


def test_commands_under_the_home_current_or_data_folder_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     _workbench_home: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.chdir(tmp_path)
    for program, folder in ((tmp_path / "me" / ".venv/bin/python", tmp_path / "me"),
                            (tmp_path / "project/train.py", tmp_path),
                            (_workbench_home / "builds/t/trainer/task.py", _workbench_home)):
        assert _problems([str(program)]) == [
            (f"workerPoolSpecs[0].containerSpec.command[0]: {program} is a file of this machine (under {folder}); "
             "on Vertex AI the command runs inside the image")]


@pytest.mark.parametrize("image", ["docker.io/library/python:3.11", "docker.io/tensorflow/tensorflow:2.15.0",
                                   "index.docker.io/pytorch/pytorch", "gcr.io/p/trainer@sha256:" + "a" * 64])
def test_images_with_a_registry_host_pass(image: str) -> None:
    assert _problems(image=image) == []


@pytest.mark.parametrize("image, hub", [("python:3.11", "docker.io/library/python:3.11"),
                                        ("tensorflow/tensorflow:2.15.0", "docker.io/tensorflow/tensorflow:2.15.0"),
                                        ("vtrain/trainer", "docker.io/vtrain/trainer")])
def test_names_without_a_registry_are_refused_saying_how_to_mean_docker_hub(image: str, hub: str) -> None:
    assert _problems(image=image) == [
        (f"workerPoolSpecs[0].containerSpec.imageUri: {image!r} names no registry, so it may be an image only this "
         "machine has; push it (e.g. --image us-central1-docker.pkg.dev/PROJECT/REPO/trainer), or for Docker Hub's "
         f"image write {hub}")]


@pytest.mark.parametrize("image", ["localhost:5000/t", "LOCALHOST:5000/t", "Localhost/t", "127.0.0.1:5000/t",
                                   "127.0.0.2:5000/t", "[::1]:5000/t", "[::ffff:127.0.0.1]:5000/t", "0.0.0.0:5000/t"])
def test_images_on_a_host_of_this_machine_are_refused(image: str) -> None:
    """However the host is written: any case, any 127.0.0.0/8 or ::1 address."""
    assert _problems(image=image) == [
        (f"workerPoolSpecs[0].containerSpec.imageUri: {image!r} is only on this machine; Vertex AI pulls images from "
         "a registry it can reach (push it, e.g. --image us-central1-docker.pkg.dev/PROJECT/REPO/trainer)")]


@pytest.mark.parametrize("image", ["localhost.example.com:5000/t", "127.example.com/t", "[2001:db8::1]:5000/t"])
def test_hosts_that_only_look_local_pass(image: str) -> None:
    assert _problems(image=image) == []
