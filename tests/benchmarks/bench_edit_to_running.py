#!/usr/bin/env python
"""Benchmark: edit-to-running on a warm cache, next to the cold build.

    python tests/benchmarks/bench_edit_to_running.py [--replicas 3] [--repeat 3]

Uses the Docker test services (tests/services/docker_services.py: engine,
registry, base image; started here if needed and stopped again if this run
started them). The trainer's dependencies (default: numpy) are wheels fetched
once from PyPI with the host's pip into the services' cache folder, then
installed offline in the image; without PyPI a tiny local wheel stands in.
Measures, on the engine's classic builder:

- cold build: package the trainer folder and build it with no cache at all
  (the dependency layers, a pip install of the wheels, are rebuilt);
- edit-to-running (warm): from "task.py changed" (the file written) through
  packaging, the cached rebuild (only the code layer is new) and the docker
  backend starting a job of 1 primary + N-1 workers, to the moment the
  supervisor reports RUNNING (every replica's container started). The job is
  then cancelled; nothing is left behind.

Prints both times (median of --repeat runs) and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from services import docker_services

from jupyter_ext import images, packaging
from jupyter_ext.runner import Supervisor
from jupyter_ext.runner.docker import DockerBackend
from jupyter_ext.spec import JobSpec

TASK = """\
import os, time
print("version {version} on", os.environ.get("CLOUD_ML_JOB_ID"), flush=True)
while True:
    time.sleep(1)
"""


def dependency_wheels(packages: list[str], root: Path) -> list[Path]:
    """Wheels of `packages` (and their dependencies) for the base image's Python 3.11, cached."""
    cache = docker_services.services_dir() / "cache" / "bench-wheels"
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                           "--python-version", "3.11", "--implementation", "cp", "--platform",
                           "manylinux2014_x86_64", "--dest", str(cache), *packages], capture_output=True, text=True,
                          check=False)
    wheels = sorted(cache.glob("*.whl"))
    wanted = {p.split("=")[0].split("<")[0].split(">")[0].lower().replace("-", "_") for p in packages}
    chosen = [w for w in wheels if w.name.split("-")[0].lower() in wanted]
    if done.returncode == 0 and chosen:
        return chosen
    print(f"[bench] cannot fetch {', '.join(packages)} from PyPI; a tiny local wheel stands in", file=sys.stderr)
    wheel = root / "benchdep-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.writestr("benchdep/__init__.py", "VALUE = 1\n")
        whl.writestr("benchdep-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: benchdep\nVersion: 0.1\n")
        whl.writestr("benchdep-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                                                      "Tag: py3-none-any\n")
        whl.writestr("benchdep-0.1.dist-info/RECORD", "")
    return [wheel]


def make_trainer(root: Path, wheels: list[Path]) -> Path:
    """A trainer folder: trainer/task.py and a requirements.txt naming local wheels."""
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "task.py").write_text(TASK.format(version=0))
    (root / "requirements.txt").write_text("".join(f"{w}\n" for w in wheels))
    return root


def build(folder: Path, base: str, engine: str, nocache: bool, context_dir: Path) -> str:
    ctx = packaging.build_context(folder, base_image=base)
    packaging.write_context(ctx, context_dir)
    ref = f"vtrain-bench/trainer:{ctx.tag}"
    steps = []
    for event in images.build(ctx, ref, engine=engine, nocache=nocache):
        if isinstance(event, images.BuildStep):
            steps.append(event)
    if not nocache:
        code_step = next(s for s in steps if s.text.startswith("COPY trainer"))
        reused = [s for s in steps if s.n < code_step.n]
        assert all(s.cached for s in reused), "the warm build rebuilt a dependency layer"
    return ref


def run_until_started(image: str, replicas: int, engine: str, job_dir: Path) -> float:
    """Start the job; returns the monotonic time at which every replica had started."""
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": image}}
    job = JobSpec.from_dict({"workerPoolSpecs": [{**pool, "replicaCount": 1},
                                                 {**pool, "replicaCount": replicas - 1}]}, "bench")
    started: list[float] = []
    running = threading.Event()

    def on_state(state: str) -> None:
        if state == "RUNNING":
            started.append(time.monotonic())
            running.set()

    sup = Supervisor(job, backend=DockerBackend(engine=engine), job_dir=job_dir, on_state=on_state)
    runner = threading.Thread(target=sup.run)
    runner.start()
    running.wait(120)
    sup.cancel()
    runner.join(60)
    if not started or sup.result.state != "CANCELLED":
        raise SystemExit(f"the job did not start: {sup.result.state} {sup.result.error}")
    return started[0]


def image_ids(engine: str) -> set[str]:
    client = images.connect(engine)
    try:
        return {i["Id"] for i in client.images(all=True)}
    finally:
        client.close()


def remove_images(engine: str, refs: set[str], before: set[str]) -> None:
    """Remove the benchmark's images, then the untagged build layers it made."""
    client = images.connect(engine)
    try:
        for ref in sorted(refs):
            try:
                client.remove_image(ref, force=True)
            except Exception as exc:  # noqa: BLE001  (already gone: nothing to do)
                print(f"[bench] {ref}: {exc}", file=sys.stderr)
        for _ in range(20):  # children before parents: each pass removes the current leaves
            made = [i["Id"] for i in client.images(all=True)
                    if i["Id"] not in before and set(i.get("RepoTags") or []) <= {"<none>:<none>"}]
            removed = 0
            for image in made:
                try:
                    client.remove_image(image, noprune=True)
                    removed += 1
                except Exception:  # noqa: BLE001, S110  (a parent, or in use by someone else's build)
                    pass
            if not removed:
                break
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requirements", nargs="+", default=["numpy"], metavar="PKG",
                        help="the trainer's dependencies (default: numpy)")
    args = parser.parse_args()

    services = docker_services.acquire(log=lambda m: print(f"[services] {m}", file=sys.stderr))
    built: set[str] = set()
    before = image_ids(services.engine_url)
    try:
        cold, warm = [], []
        with tempfile.TemporaryDirectory(prefix="vtrain-bench-") as tmp:
            wheels = dependency_wheels(args.requirements, Path(tmp))
            print(f"[bench] dependencies: {', '.join(w.name for w in wheels)}", file=sys.stderr)
            folder = make_trainer(Path(tmp) / "src", wheels)
            for n in range(args.repeat):
                t0 = time.monotonic()
                built.add(build(folder, services.base_image, services.engine_url, True, Path(tmp) / "ctx"))
                cold.append(time.monotonic() - t0)

                t0 = time.monotonic()  # "task.py changed"
                (folder / "trainer" / "task.py").write_text(TASK.format(version=n + 1))
                image = build(folder, services.base_image, services.engine_url, False, Path(tmp) / "ctx")
                built.add(image)
                t1 = run_until_started(image, args.replicas, services.engine_url, Path(tmp) / f"job{n}")
                warm.append(t1 - t0)
    finally:
        remove_images(services.engine_url, built, before)
        docker_services.release()
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"cold build (no cache):                          {c:6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in cold)})")
    print(f"edit-to-running, {args.replicas} replicas, warm cache:      {w:6.2f} s  "
          f"(runs: {', '.join(f'{x:.2f}' for x in warm)})")
    print(f"ratio edit-to-running / cold build:             {w / c:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
