"""The notebook's log pipeline: 4 replicas print 100,000 lines in total.

The JobMonitor follows the job through the local service and the Cloud Logging
client, as in a notebook. Measured: lines per second into the monitor, the p95
delay from a replica's print to the line being in the monitor's model, and the
memory the monitor holds; next to the same lines appended to a plain ipywidgets
Output widget (what a notebook would do without the workbench), whose memory
grows with every line.

Also: what following a job costs the notebook's process over 30 s: API client
constructions, probes of the local service (/proc reads), job and log requests.
Target: one client of each kind and one probe for the whole time.

Run: python tests/benchmarks/bench_monitor.py [--lines N] [--follow-seconds S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import report  # noqa: E402

PRINTER = """
import sys, time
for i in range(int(sys.argv[1])):
    print(f"{time.time():.6f} line {i}")
"""


def follow_with_monitor(lines: int) -> tuple[float, float, float, int]:
    from jupyter_ext import launch
    from widgets.logbuffer import Line
    from widgets.monitor import JobMonitor

    arrivals: list[tuple[float, float]] = []  # (printed at, in the model at)

    class TimedMonitor(JobMonitor):
        def add_lines(self, new: list[Line]) -> None:
            now = time.time()
            arrivals.extend((float(line.text.split(" ", 1)[0]), now) for line in new)
            super().add_lines(new)

    per_replica = lines // 4
    pool = {"machine_spec": {"machine_type": "n1-standard-4"},
            "container_spec": {"image_uri": "x", "command": [sys.executable, "-c", PRINTER, str(per_replica)]}}
    job = {"worker_pool_specs": [{**pool, "replica_count": 1}, {**pool, "replica_count": 3}]}
    start = time.time()
    monitor = TimedMonitor(launch.submit(job, display_name="monitor-bench"))
    state = monitor.wait()
    elapsed = time.time() - start
    held = _deep_size(monitor.buffer) + sum(len(view.value) for view in monitor._views.values())
    assert state == "JOB_STATE_SUCCEEDED" and len(arrivals) == per_replica * 4, (state, len(arrivals))
    delays = sorted(seen - printed for printed, seen in arrivals)
    return len(arrivals) / elapsed, delays[int(len(delays) * 0.95)], held / 2**20, monitor.buffer.max_lines


def _deep_size(buffer: object) -> int:
    """Bytes the monitor's line buffers hold (tracemalloc would slow the follower down)."""
    lines = [line for view in buffer._views.values() for line in view]  # type: ignore[attr-defined]
    return sum(sys.getsizeof(line) + sys.getsizeof(line.text) + sys.getsizeof(line.time) for line in lines)


def plain_output(lines: int) -> tuple[float, float]:
    import ipywidgets

    out = ipywidgets.Output()
    text = [f"{time.time():.6f} line {i}\n" for i in range(lines)]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    start = time.perf_counter()
    for line in text:
        out.append_stdout(line)
    elapsed = time.perf_counter() - start
    held = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    return lines / elapsed, held / 2**20


TICKER = """
import sys, time
for i in range(int(sys.argv[1])):
    print(f"tick {i}", flush=True)
    time.sleep(0.5)
"""


def following_costs(seconds: float) -> dict[str, int]:
    """Counts, in this process, of what a JobMonitor does while a job runs for `seconds`."""
    from pathlib import Path as _Path

    from google.cloud import logging as cloud_logging
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

    from jupyter_ext import launch
    from jupyter_ext.service import daemon
    from widgets.monitor import JobMonitor

    counts = {"job clients built": 0, "logging clients built": 0, "service probes": 0, "/proc file reads": 0,
              "job requests": 0, "log requests": 0}

    def counting(owner: object, name: str, key: str, test: object = None) -> None:
        original = getattr(owner, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            if test is None or test(*args):  # type: ignore[operator]
                counts[key] += 1
            return original(*args, **kwargs)
        setattr(owner, name, wrapper)

    counting(JobServiceClient, "__init__", "job clients built")
    counting(cloud_logging.Client, "__init__", "logging clients built")
    counting(daemon, "status", "service probes")
    for method in ("read_text", "read_bytes"):
        counting(_Path, method, "/proc file reads", lambda path, *_: str(path).startswith("/proc/"))
    counting(JobServiceClient, "get_custom_job", "job requests")
    counting(cloud_logging.Client, "list_entries", "log requests")
    pool = {"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "container_spec": {"image_uri": "x", "command": [sys.executable, "-c", TICKER, str(int(seconds * 2))]}}
    launch.Session._sessions.clear()  # as in a new kernel: the first submit builds the clients
    monitor = JobMonitor(launch.submit({"worker_pool_specs": [pool]}, display_name="follow-bench"))
    assert monitor.wait() == "JOB_STATE_SUCCEEDED"
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--plain-lines", type=int, default=10_000)
    parser.add_argument("--follow-seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["VTRAIN_HOME"] = home
        from jupyter_ext.service import daemon

        try:
            rate, p95, held, cap = follow_with_monitor(args.lines)
            costs = following_costs(args.follow_seconds)
        finally:
            daemon.stop()
    # one probe of the service reads two /proc files: its process's stat (alive?) and cmdline (ours?)
    once = (costs["job clients built"] == costs["logging clients built"] == costs["service probes"] == 1
            and costs["/proc file reads"] <= 2)
    report(f"following a job for {args.follow_seconds:g} s from a notebook (this process)",
           [(key, str(value)) for key, value in costs.items()] +
           [("target: each client built once, the service probed once (the 2 /proc reads of that probe)",
             "met" if once else "NOT met")])
    report(f"log pipeline into the notebook: 4 replicas, {args.lines:,} lines", [
        ("JobMonitor: lines per second into the model (print to model, end to end)", f"{rate:,.0f}"),
        ("JobMonitor: p95 delay from print to the model", f"{p95:.2f} s"),
        ("JobMonitor: memory held after the job (bounded buffer)", f"{held:.1f} MB (last {cap} lines per view)"),
    ])
    # Output.append_stdout re-validates the whole output list on every line: quadratic, so it is
    # measured on fewer lines, twice, to show the growth
    rows = []
    for n in (args.plain_lines // 2, args.plain_lines):
        plain_rate, plain_held = plain_output(n)
        rows.append((f"plain Output widget, {n:,} lines: lines per second / memory held",
                     f"{plain_rate:,.0f} / {plain_held:.1f} MB"))
    report("the same lines appended to a plain ipywidgets Output widget (no job)", rows)


if __name__ == "__main__":
    main()
