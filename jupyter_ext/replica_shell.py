"""A shell in a running replica: Vertex AI's interactive shell (`enableWebAccess`) and its local equivalent;
and the links to a dashboard the trainer serves (`enableDashboardAccess`).

On Vertex AI a job created with `enableWebAccess` reports one URI per replica (`webAccessUris`, keyed
by task name such as `workerpool0-0`) that opens a shell in the browser. A job created with
`enableDashboardAccess` gets its dashboard links in the same map, keyed by task name and port
(`workerpool0-0:8888`; which variable tells the trainer its port is not documented); data/SOURCES.md,
"Access fields and links", has where both are documented. On this machine, `vtrain shell JOB --replica TASK` opens the
shell in the terminal (the local service serves no dashboards):

- process backend: the shell starts in the replica's working folder with the replica's exact
  environment, read from the running process (`/proc/PID/environ` and `/proc/PID/cwd`), so
  CLUSTER_SPEC, TF_CONFIG and the AIP_* variables are what the trainer sees;
- docker backend: the shell runs inside the replica's container (`docker exec`).

`access(resource, local)` is what the monitor and the lab panel show: the URIs Vertex AI returned (shells
and dashboards, for a job with either field), or the command for each replica of a running local job.
`links(resource, local)` is the same, each labelled by what it opens (`Link.kind`: "shell" or
"dashboard"), and `heading(links)` one line for them all. Like Vertex AI, only jobs created with
enableWebAccess (`--enable-web-access`) can be entered.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import paths, states
from .cluster import missing_replica, task_names
from .errors import WorkbenchError

DEFAULT_SHELL = "/bin/sh"  # every image has it; an interactive process shell uses $SHELL


def command(job_id: str, task_name: str) -> str:
    return f"vtrain shell {job_id} --replica {task_name}"


SHELL, DASHBOARD = "shell", "dashboard"


@dataclass(frozen=True)
class Link:
    """One entry of `access`: a `webAccessUris` key (`workerpool0-0`, or `workerpool0-0:8888` for a dashboard
    on port 8888) and what opens it (a URI, or locally the `vtrain shell` command)."""

    key: str
    target: str

    @property
    def kind(self) -> str:
        """"dashboard" for a key with a port, else "shell"."""
        return DASHBOARD if ":" in self.key else SHELL

    @property
    def task(self) -> str:
        return self.key.split(":", 1)[0]

    @property
    def label(self) -> str:
        """E.g. "shell in workerpool1-0", "dashboard of workerpool0-0 (port 8888)"."""
        if self.kind == SHELL:
            return f"shell in {self.task}"
        return f"dashboard of {self.task} (port {self.key.split(':', 1)[1]})"


def access(resource: Any, local: bool) -> dict[str, str]:
    """`webAccessUris` key -> how to open it: the URI Vertex AI returned (a shell, or with a port a dashboard;
    see `Link`), or locally the `vtrain shell` command per replica while the job runs. Empty for jobs with
    neither enableWebAccess nor enableDashboardAccess."""
    spec = getattr(resource, "job_spec", None)
    if spec is None or not (spec.enable_web_access or spec.enable_dashboard_access):
        return {}
    if not local:
        return dict(resource.web_access_uris)
    if not spec.enable_web_access or states.name(resource.state) != "JOB_STATE_RUNNING":
        return {}
    job_id = resource.name.rsplit("/", 1)[-1]
    return {task: command(job_id, task) for task in task_names(spec)}


def links(resource: Any, local: bool) -> list[Link]:
    """`access` as labelled links, shells first, each kind in task order."""
    def order(link: Link) -> tuple[int, int, int, str]:
        pool, _, index = link.task.removeprefix("workerpool").partition("-")
        numbers = (int(pool), int(index)) if pool.isdigit() and index.isdigit() else (1 << 30, 0)
        return (link.kind != SHELL, *numbers, link.key)
    return sorted((Link(key, target) for key, target in access(resource, local).items()), key=order)


def heading(found: Sequence[Link]) -> str:
    """What a line of `found` offers: "Shell into a replica", "Open the dashboard", or both."""
    kinds = {link.kind for link in found}
    if kinds == {DASHBOARD}:
        return "Open the dashboard"
    return "Shell into a replica or open the dashboard" if DASHBOARD in kinds else "Shell into a replica"


def run(resource: Any, task_name: str, argv: Sequence[str]) -> int:
    """Run `argv` (an interactive shell when empty) in the replica `task_name` of a running local job;
    its exit code. Every reason it cannot is one WorkbenchError naming the flag or field."""
    job_id = resource.name.rsplit("/", 1)[-1]
    if not resource.job_spec.enable_web_access:
        raise WorkbenchError(f"enableWebAccess: job {job_id} was created without it; submit it with "
                             "--enable-web-access to open a shell in its replicas")
    if problem := missing_replica(resource.job_spec, job_id, task_name):
        raise WorkbenchError(problem)
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
        code = subprocess.run(argv, **kwargs).returncode
    except OSError as exc:
        raise WorkbenchError(f"COMMAND: cannot run {argv[0]!r}: {exc.strerror}") from None
    return 128 - code if code < 0 else code  # killed by signal N: 128+N, as a shell says it
