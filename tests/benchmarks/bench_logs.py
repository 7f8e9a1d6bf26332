"""The log path: a replica printing short lines as fast as it can.

The same trainer (print N lines, report how long printing took) runs
(a) writing straight to a file and (b) under the Supervisor (pipe -> capture ->
log file), alternating; then every line is read back through the log API
(the local service's entries:list, 1000 per page) and counted.
Targets: the trainer is slowed by at most 10%; no line is lost.

Run: python tests/benchmarks/bench_logs.py [--lines N] [--runs N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import median, report  # noqa: E402

PRINTER = """
import sys, time
n = int(sys.argv[1])
start = time.perf_counter()
for i in range(n):
    print(f"line {i}")
sys.stdout.flush()
print(f"printed {n} in {time.perf_counter() - start:.4f}", file=sys.stderr)
"""


def _printed_seconds(text: str) -> float:
    return float(text.strip().splitlines()[-1].split()[-1])


def straight(n: int, out: Path) -> float:
    with open(out, "wb") as f:
        done = subprocess.run([sys.executable, "-c", PRINTER, str(n)], stdout=f, stderr=subprocess.PIPE, text=True)
    return _printed_seconds(done.stderr)


def supervised(n: int, job_dir: Path) -> tuple[float, float, str]:
    from jupyter_ext.runner import Supervisor
    from jupyter_ext.spec import JobSpec

    job = JobSpec.from_dict({"worker_pool_specs": [{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
        "container_spec": {"image_uri": "x", "command": [sys.executable, "-c", PRINTER, str(n)]}}]}, "printer")
    start = time.perf_counter()
    result = Supervisor(job, job_dir=job_dir).run()
    wall = time.perf_counter() - start
    assert result.state == "SUCCEEDED", result.error
    last = (job_dir / "logs" / "workerpool0-0.log").read_text().splitlines()[-1]
    return _printed_seconds(last), wall, result.job_id


def count_through_api(job_id: str, endpoint: str, token: str) -> tuple[int, float]:
    host, port = endpoint.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    query = f'resource.type="ml_job" AND resource.labels.job_id="{job_id}" AND severity<ERROR'
    count, token_page, start = 0, "", time.perf_counter()
    while True:
        body = {"resourceNames": ["projects/local"], "filter": query, "pageSize": 1000, "pageToken": token_page}
        conn.request("POST", "/v2/entries:list", json.dumps(body), {"Authorization": f"Bearer {token}",
                                                                     "Content-Type": "application/json"})
        page = json.loads(conn.getresponse().read())
        count += len(page.get("entries", []))
        token_page = page.get("nextPageToken", "")
        if not token_page:
            return count, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["VTRAIN_HOME"] = home
        from jupyter_ext import paths
        from jupyter_ext.service import daemon

        plain, captured, walls, job_id = [], [], [], ""
        for n in range(args.runs):
            plain.append(straight(args.lines, Path(home) / f"plain-{n}.txt"))
            seconds, wall, job_id = supervised(args.lines, paths.jobs_dir() / f"printer-{n}")
            captured.append(seconds)
            walls.append(wall)
        log_file = paths.jobs_dir() / f"printer-{args.runs - 1}" / "logs" / "workerpool0-0.log"
        on_disk = sum(1 for line in open(log_file, "rb") if b" stdout " in line[:40])
        info = daemon.ensure_running()
        try:
            api_count, api_seconds = count_through_api(f"printer-{args.runs - 1}", info["endpoint"],
                                                       daemon.read_token())
        finally:
            daemon.stop()
        report(f"log path: one replica printing {args.lines:,} lines", [
            ("trainer's print time, straight to a file, median s", f"{median(plain):.3f}"),
            ("trainer's print time under the Supervisor, median s", f"{median(captured):.3f}"),
            ("slow-down of the trainer", f"{median(captured) / median(plain) - 1:+.1%} (target <= +10%)"),
            ("job wall time under the Supervisor, median s", f"{median(walls):.2f}"),
            ("capture rate, lines per second", f"{args.lines / median(walls):,.0f}"),
            ("lines in the log file / printed", f"{on_disk:,} / {args.lines:,}"),
            ("lines read back through entries:list", f"{api_count:,} in {api_seconds:.1f} s "
                                                     f"({api_count / api_seconds:,.0f} per second)"),
        ])
        assert on_disk == api_count == args.lines, "lines were lost"


if __name__ == "__main__":
    main()
