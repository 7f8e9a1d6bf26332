"""From a notebook cell to a Vertex AI job created, on the cloud path, next to doing the same by hand
with the SDK, alternating in one run (medians of N):

- without Docker: `%%vertex_train --vertex --staging-bucket gs://B --no-wait` (package the cell as an
  sdist, upload it, create the job) vs `aiplatform.CustomJob.from_local_script(...).submit()`;
- with Docker: `%%vertex_train --vertex --image REGISTRY/... --no-wait` (build, push, create) vs
  `docker build` + `docker push` with the Docker CLI and `aiplatform.CustomJob(...).submit()`.

Offline, as the tests run it: the local service is Vertex AI's endpoint, a Cloud Storage emulator the
bucket, the test registry the registry (tests/services). Each run's cell differs (a comment), so
nothing is reused from the run before, as after an edit.

Run: python tests/benchmarks/bench_cloud_path.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from common import median, report  # noqa: E402
from services import docker_services, gcs_emulator  # noqa: E402

CELL = "import json, os\nprint(json.loads(os.environ['CLUSTER_SPEC'])['task'])  # run {n}\n"
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["VTRAIN_HOME"] = home
        emulator = gcs_emulator.acquire()
        docker = docker_services.acquire()
        os.environ.update({**emulator.env(), **docker.env()})
        try:
            results = measure(Path(home), emulator, docker, args.runs)
        finally:
            from jupyter_ext.service import daemon

            daemon.stop()
            gcs_emulator.release()
            docker_services.release()
    rows = []
    for path, (ours, theirs) in results.items():
        rows.append((f"{path}: %%vertex_train / by hand with the SDK",
                     f"{median(ours):.2f} s / {median(theirs):.2f} s (ratio {median(ours) / median(theirs):.2f})"))
    report(f"cell to job created on the cloud path, median of {args.runs} alternating runs", rows)


def measure(home: Path, emulator: Any, docker: Any, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials
    from IPython.testing.globalipapp import start_ipython

    from jupyter_ext import packaging
    from jupyter_ext.service import daemon

    bucket = emulator.create_bucket("bench")
    info = daemon.ensure_running()
    aiplatform.init(project="bench", location="us-central1", api_endpoint=info["endpoint"], api_transport="rest",
                    credentials=Credentials(token=daemon.read_token()), staging_bucket=f"gs://{bucket}")
    shell = start_ipython()
    shell.run_line_magic("load_ext", "jupyter_ext")
    pool = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1}
    repository = f"{docker.registry}/bench/trainer"

    def without_docker(action: Callable[[int], None]) -> Callable[[int], None]:
        """`action` with no Docker engine reachable, as in a notebook of Vertex AI Workbench or Colab."""
        def run(n: int) -> None:
            reachable = os.environ["DOCKER_HOST"]
            os.environ["DOCKER_HOST"] = f"unix://{home}/no-docker.sock"
            try:
                action(n)
            finally:
                os.environ["DOCKER_HOST"] = reachable
        return run

    @without_docker
    def package_magic(n: int) -> None:
        shell.run_cell_magic("vertex_train", f"--vertex --staging-bucket gs://{bucket} --no-wait", CELL.format(n=n))

    @without_docker
    def package_by_hand(n: int) -> None:
        script = home / f"train_{n}.py"
        script.write_text(CELL.format(n=n))
        aiplatform.CustomJob.from_local_script(display_name="by-hand", script_path=str(script),
                                               container_uri=PREBUILT).submit()

    def image_magic(n: int) -> None:
        shell.run_cell_magic("vertex_train", f"--vertex --image {repository} --base-image {docker.base_image} "
                             f"--no-wait", CELL.format(n=n))

    def image_by_hand(n: int) -> None:
        context = home / f"context_{n}"
        packaging.write_context(packaging.build_context(CELL.format(n=n), base_image=docker.base_image), context)
        tag = f"{repository}:by-hand-{n}"
        for argv in (["docker", "build", "-q", "-t", tag, str(context)], ["docker", "push", "-q", tag]):
            subprocess.run(argv, check=True, capture_output=True)
        aiplatform.CustomJob(display_name="by-hand", worker_pool_specs=[
            {**pool, "container_spec": {"image_uri": tag}}]).submit()

    pairs = {"without Docker (package in Cloud Storage)": (package_magic, package_by_hand),
             "with Docker (image in a registry)": (image_magic, image_by_hand)}
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in pairs}
    for n in range(runs + 1):  # the first round warms caches and imports; it is not counted
        for name, (ours, theirs) in pairs.items():
            times = (timed(lambda: ours(2 * n)), timed(lambda: theirs(2 * n + 1)))
            if n:
                results[name][0].append(times[0])
                results[name][1].append(times[1])
    return results


if __name__ == "__main__":
    main()
