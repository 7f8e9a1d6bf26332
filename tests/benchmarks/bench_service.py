"""The local service through the real SDK.

1. Time from `CustomJob.run()` being called to all replicas started, against
   the Supervisor called directly, as a ratio (each replica prints the time it
   started; "all started" is the last of those).
2. Throughput of `GetCustomJob` polls from 50 concurrent clients: requests per
   second and p99 latency.
3. Latency of `GetCustomJob` while two heavy `entries:list` requests (every line of a
   200,000-line log, nothing matching) run, against the same GETs on an idle service.

Run: python tests/benchmarks/bench_service.py [--runs N] [--requests N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).parent))
from common import median, report  # noqa: E402

STARTED = "import time; print(time.time(), flush=True)"


def _pools(replicas: int) -> list[dict]:
    pool = {"machine_spec": {"machine_type": "n1-standard-4"},
            "container_spec": {"image_uri": "x", "command": [sys.executable, "-c", STARTED]}}
    return [{**pool, "replica_count": 1}, {**pool, "replica_count": replicas - 1}]


def _last_start(job_dir: Path) -> float:
    return max(float(p.read_text().split()[2]) for p in (job_dir / "logs").glob("*.log"))


def launch_ratio(runs: int) -> None:
    from google.cloud import aiplatform

    from jupyter_ext import paths
    from jupyter_ext.runner import Supervisor
    from jupyter_ext.spec import JobSpec

    direct, sdk = [], []
    for n in range(runs):
        job = JobSpec.from_dict({"worker_pool_specs": _pools(3)}, "direct")
        start = time.time()
        result = Supervisor(job, job_dir=paths.jobs_dir() / f"direct-{n}").run()
        direct.append(_last_start(Path(result.job_dir)) - start)
        custom = aiplatform.CustomJob(display_name="via-sdk", worker_pool_specs=_pools(3))
        start = time.time()
        custom.submit()
        job_dir = paths.jobs_dir() / custom.resource_name.rsplit("/", 1)[1]
        while len(list((job_dir / "logs").glob("*.log"))) < 3 or any(
                not p.read_text() for p in (job_dir / "logs").glob("*.log")):
            time.sleep(0.01)
        sdk.append(_last_start(job_dir) - start)
        custom.wait()
    report("CustomJob.run() to all 3 replicas started", [
        ("Supervisor directly, median ms", f"{median(direct) * 1000:.0f}"),
        ("through the SDK and the local service, median ms", f"{median(sdk) * 1000:.0f}"),
        ("ratio", f"{median(sdk) / median(direct):.2f}")])


def poll_throughput(name: str, endpoint: str, token: str, clients: int, per_client: int) -> None:
    host, port = endpoint.removeprefix("http://").split(":")
    latencies: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        mine = []
        for _ in range(per_client):
            start = time.perf_counter()
            conn.request("GET", f"/v1/{name}?$alt=json;enum-encoding=int", headers={"Authorization": f"Bearer {token}"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            mine.append(time.perf_counter() - start)
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    latencies.sort()
    report(f"GetCustomJob polls, {clients} concurrent clients", [
        ("requests", str(len(latencies))), ("requests per second", f"{len(latencies) / wall:.0f}"),
        ("p50 latency ms", f"{latencies[len(latencies) // 2] * 1000:.1f}"),
        ("p99 latency ms", f"{latencies[int(len(latencies) * 0.99)] * 1000:.1f}")])


def _latencies(get: Callable[[], None], count: int | None = None,
               while_alive: list[threading.Thread] | None = None) -> list[float]:
    taken = []
    while (count is not None and len(taken) < count) or (while_alive and any(t.is_alive() for t in while_alive)):
        start = time.perf_counter()
        get()
        taken.append(time.perf_counter() - start)
        time.sleep(0.05)
    return sorted(taken)


def gets_under_heavy_listings(endpoint: str, token: str) -> None:
    from google.cloud import aiplatform

    lines = 200_000
    custom = aiplatform.CustomJob(display_name="equals", worker_pool_specs=[{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1, "container_spec": {
            "image_uri": "x", "command": [sys.executable, "-c",
                                          f"import sys; sys.stdout.write(('=' * 40 + '\\n') * {lines})"]}}])
    custom.run()
    host, port = endpoint.removeprefix("http://").split(":")
    headers = {"Authorization": f"Bearer {token}"}

    def call(method: str, path: str, body: str | None = None, timeout: float = 30) -> bytes:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        assert response.status == 200, response.status
        return data

    def get() -> None:
        call("GET", f"/v1/{custom.resource_name}")

    def listing() -> None:  # every line: a page ends after a time budget, the next goes on from its token
        body = {"filter": 'textPayload:"nothing like this"'}
        while token := json.loads(call("POST", "/v2/entries:list", json.dumps(body), timeout=300)).get(
                "nextPageToken"):
            body["pageToken"] = token

    idle = _latencies(get, count=100)
    listings = [threading.Thread(target=listing) for _ in range(2)]
    start = time.perf_counter()
    for t in listings:
        t.start()
    busy = _latencies(get, while_alive=listings)
    wall = time.perf_counter() - start

    def ms(values: list[float], q: float) -> str:
        return f"{values[min(len(values) - 1, int(len(values) * q))] * 1000:.0f}"

    report(f"GetCustomJob while 2 listings read {lines:,} lines each ({wall:.1f} s) vs idle", [
        ("GETs idle / during the listings", f"{len(idle)} / {len(busy)}"),
        ("p50 ms idle / busy", f"{ms(idle, 0.5)} / {ms(busy, 0.5)}"),
        ("p99 ms idle / busy", f"{ms(idle, 0.99)} / {ms(busy, 0.99)}"),
        ("max ms idle / busy", f"{idle[-1] * 1000:.0f} / {busy[-1] * 1000:.0f}"),
        ("p50 ratio busy / idle", f"{statistics.median(busy) / statistics.median(idle):.1f}")])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=40, help="per client")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["VTRAIN_HOME"] = home
        from google.cloud import aiplatform
        from google.oauth2.credentials import Credentials

        from jupyter_ext.service import daemon

        info = daemon.ensure_running()
        try:
            aiplatform.init(project="local", location="us-central1", api_endpoint=info["endpoint"],
                            api_transport="rest", credentials=Credentials(token=daemon.read_token()),
                            staging_bucket="gs://bench")
            launch_ratio(args.runs)
            job = aiplatform.CustomJob.list()[0]
            poll_throughput(job.resource_name, info["endpoint"], daemon.read_token(), 50, args.requests)
            gets_under_heavy_listings(info["endpoint"], daemon.read_token())
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
