"""Helpers shared by the benchmarks: timing, medians, hand-made TF_CONFIG, a trivial trainer."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / "tests" / "trainers"
TRIVIAL = "import os; os.environ.get('TF_CONFIG')"


def median(values: list[float]) -> float:
    return statistics.median(values)


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def spec_file(folder: Path, command: list[str], workers: int) -> Path:
    pool = {"machineSpec": {"machineType": "n1-standard-4"},
            "containerSpec": {"imageUri": "local/bench", "command": command}}
    pools = [{**pool, "replicaCount": 1}] + ([{**pool, "replicaCount": workers}] if workers else [])
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump({"workerPoolSpecs": pools}))
    return path


def by_hand(command: list[str], replicas: int) -> float:
    """Start a chief and workers as plain processes with hand-written TF_CONFIG; seconds until all exit."""
    ports = free_ports(replicas)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    tasks = [("chief", 0)] + [("worker", i) for i in range(replicas - 1)]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        procs = []
        for n, (kind, index) in enumerate(tasks):
            env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}),
                   "AIP_MODEL_DIR": f"{out}/model/", "PYTHONUNBUFFERED": "1"}
            log = open(f"{out}/{n}.log", "wb")
            procs.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), log))
        codes = [p.wait() for p, _ in procs]
        elapsed = time.perf_counter() - start
        for _, log in procs:
            log.close()
    assert codes == [0] * replicas, codes
    return elapsed


def via_vtrain(spec: Path, job_dir: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "jupyter_ext.cli", "run", str(spec), "--job-dir", str(job_dir),
                           "--quiet"], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return elapsed


def report(title: str, rows: list[tuple[str, str]]) -> None:
    print(f"\n== {title}")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")
