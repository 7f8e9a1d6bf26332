"""A shell in a running replica: Vertex AI's interactive shell (`enableWebAccess`) and its local equivalent.

On Vertex AI a job created with `enableWebAccess` reports one URI per replica (`webAccessUris`, keyed
by task name such as `workerpool0-0`) that opens a shell in the browser. On this machine,
`vtrain shell JOB --replica TASK` does the same in the terminal:

- process backend: the shell starts in the replica's working folder with the replica's exact
  environment, read from the running process (`/proc/PID/environ` and `/proc/PID/cwd`), so
  CLUSTER_SPEC, TF_CONFIG and the AIP_* variables are what the trainer sees;
- docker backend: the shell runs inside the replica's container (`docker exec`).

`access(resource, local)` is what the monitor and the lab panel show: the URIs Vertex AI returned,
or the command for each replica of a running local job. Like Vertex AI, only jobs created with
enableWebAccess (`--enable-web-access`) can be entered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from . import paths, states
from .errors import WorkbenchError

DEFAULT_SHELL = "/bin/sh"  # every image has it; an interactive process shell uses $SHELL


def command(job_id: str, task_name: str) -> str:
    return f"vtrain shell {job_id} --replica {task_name}"


def access(resource: Any, local: bool) -> dict[str, str]:
    """task name -> how to open a shell in that replica: the URI Vertex AI returned, or locally the
    `vtrain shell` command while the job runs. Empty for jobs without enableWebAccess."""
    spec = getattr(resource, "job_spec", None)
    if spec is None or not spec.enable_web_access:
        return {}
    if not local:
        return dict(resource.web_access_uris)
    if states.name(resource.state) != "JOB_STATE_RUNNING":
        return {}
    job_id = resource.name.rsplit("/", 1)[-1]
    return {task: command(job_id, task) for task in task_names(spec)}


def task_names(spec: Any) -> list[str]:
    return [f"workerpool{pos}-{n}" for pos, pool in enumerate(spec.worker_pool_specs)
            for n in range(pool.replica_count)]


def run(resource: Any, task_name: str, argv: Sequence[str]) -> int:
    """Run `argv` (an interactive shell when empty) in the replica `task_name` of a running local job;
    its exit code. Every reason it cannot is one WorkbenchError naming the flag or field."""
    job_id = resource.name.rsplit("/", 1)[-1]
    if not resource.job_spec.enable_web_access:
        raise WorkbenchError(f"enableWebAccess: job {job_id} was created without it; submit it with "
                             "--enable-web-access to open a shell in its replicas")
    if task_name not in task_names(resource.job_spec):
        raise WorkbenchError(f"--replica: job {job_id} has no replica {task_name!r} "
                             f"(it has {', '.join(task_names(resource.job_spec))})")
    if states.name(resource.state) != "JOB_STATE_RUNNING":
        raise WorkbenchError(f"JOB: job {job_id} is {states.short(resource.state)}; a shell needs a running replica")
    from .runner.backend import backend_of

    if backend_of(resource.labels) == "docker":
        return _in_container(job_id, task_name, argv)
    return _in_process_environment(job_id, task_name, argv)


def _in_process_environment(job_id: str, task_name: str, argv: Sequence[str]) -> int:
    pid = _replica_pid(job_id, task_name)
    proc = Path("/proc") / str(pid)
    try:
        raw = (proc / "environ").read_bytes()
        cwd = os.readlink(proc / "cwd")
    except OSError as exc:
        raise WorkbenchError(f"--replica: {task_name} of job {job_id} is not running ({exc.strerror})") from None
    env = dict(item.split("=", 1) for item in raw.decode(errors="surrogateescape").split("\0") if "=" in item)
    if env.get("CLOUD_ML_JOB_ID") != job_id:  # the process ID was reused: the replica is gone
        raise WorkbenchError(f"--replica: {task_name} of job {job_id} is not running")
    shell = [env.get("SHELL") or os.environ.get("SHELL") or DEFAULT_SHELL]
    return _run(list(argv) or shell, env=env, cwd=cwd)


def _replica_pid(job_id: str, task_name: str) -> int:
    """The process the supervisor started for the replica (its status.json names each one)."""
    try:
        status = json.loads((paths.jobs_dir() / job_id / "status.json").read_text())
        ident = next(r["ident"] for r in status["replicas"] if r["task_name"] == task_name)
        return int(ident)
    except (OSError, ValueError, KeyError, StopIteration):
        raise WorkbenchError(f"--replica: {task_name} of job {job_id} has not started yet") from None


def _in_container(job_id: str, task_name: str, argv: Sequence[str]) -> int:
    from . import images
    from .runner.docker import LABEL_JOB_ID, LABEL_TASK

    client = images.connect()
    try:
        found = client.containers(filters={"label": [f"{LABEL_JOB_ID}={job_id}", f"{LABEL_TASK}={task_name}"],
                                           "status": "running"})
    finally:
        client.close()
    if not found:
        raise WorkbenchError(f"--replica: {task_name} of job {job_id} has no running container")
    docker = shutil.which("docker")
    if docker is None:
        raise WorkbenchError("docker: the docker command is needed to open a shell in a container")
    interactive = ["-i", "-t"] if sys.stdin.isatty() and sys.stdout.isatty() else ["-i"]
    return _run([docker, "exec", *interactive, found[0]["Id"], *(list(argv) or [DEFAULT_SHELL])])


def _run(argv: list[str], **kwargs: Any) -> int:
    try:
        return subprocess.run(argv, **kwargs).returncode
    except OSError as exc:
        raise WorkbenchError(f"COMMAND: cannot run {argv[0]!r}: {exc.strerror}") from None
