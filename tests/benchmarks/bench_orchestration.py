"""Orchestration overhead and scale of the local runner (process backend).

1. A 3-replica MultiWorkerMirroredStrategy trainer launched by hand (three
   processes, hand-written TF_CONFIG) and through `vtrain run`, alternating:
   the ratio of medians (target <= 1.05).
2. A trivial trainer (exits at once): milliseconds `vtrain run` and the
   in-process Supervisor add per job and per replica (target < 150 ms per job
   for 3 replicas).
3. 8, 32 and 64 trivial replicas: wall time from start to SUCCEEDED, the
   supervisor's CPU time and peak memory; a fit of time against replicas shows
   whether there is a quadratic term.

Run: python tests/benchmarks/bench_orchestration.py [--runs N]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import TRAINERS, TRIVIAL, by_hand, median, report, spec_file, via_vtrain  # noqa: E402

from jupyter_ext.runner import Supervisor  # noqa: E402
from jupyter_ext.spec import JobSpec  # noqa: E402


def in_process(spec: Path, job_dir: Path) -> float:
    job = JobSpec.load(spec)
    start = time.perf_counter()
    result = Supervisor(job, job_dir=job_dir).run()
    assert result.state == "SUCCEEDED", result.error
    return time.perf_counter() - start


def overhead(runs: int, work: Path) -> None:
    mwms = [sys.executable, str(TRAINERS / "mwms_ctl.py"), "--epochs", "3"]
    (work / "mwms").mkdir()
    spec = spec_file(work / "mwms", mwms, workers=2)
    hand, tool = [], []
    for n in range(runs):
        hand.append(by_hand(mwms, 3))
        tool.append(via_vtrain(spec, work / f"mwms-job-{n}"))
    report("MultiWorkerMirroredStrategy, 3 replicas", [
        ("by hand, median s", f"{median(hand):.2f}"), ("vtrain run, median s", f"{median(tool):.2f}"),
        ("ratio vtrain / by hand", f"{median(tool) / median(hand):.3f} (target <= 1.05)")])

    trivial = [sys.executable, "-c", TRIVIAL]
    (work / "trivial").mkdir()
    spec = spec_file(work / "trivial", trivial, workers=2)
    hand, tool, lib = [], [], []
    for n in range(runs * 3):
        hand.append(by_hand(trivial, 3))
        tool.append(via_vtrain(spec, work / f"trivial-cli-{n}"))
        lib.append(in_process(spec, work / f"trivial-lib-{n}"))
    added_cli = (median(tool) - median(hand)) * 1000
    added_lib = (median(lib) - median(hand)) * 1000
    report("trivial trainer, 3 replicas", [
        ("by hand, median ms", f"{median(hand) * 1000:.0f}"),
        ("vtrain run (CLI start included), median ms", f"{median(tool) * 1000:.0f}"),
        ("Supervisor in-process, median ms", f"{median(lib) * 1000:.0f}"),
        ("added by vtrain run, ms per job / per replica", f"{added_cli:.0f} / {added_cli / 3:.0f}"),
        ("added by the Supervisor, ms per job / per replica", f"{added_lib:.0f} / {added_lib / 3:.0f} (target < 150)"),
    ])


def scale(work: Path) -> None:
    rows, sizes, times = [], [8, 32, 64], []
    for n in sizes:
        spec = spec_file(work, [sys.executable, "-c", TRIVIAL], workers=n - 1)
        cpu0 = time.process_time()
        wall = in_process(spec, work / f"scale-{n}")
        cpu = time.process_time() - cpu0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        times.append(wall)
        rows.append((f"{n} replicas", f"wall {wall:.2f} s, supervisor CPU {cpu:.2f} s, peak RSS {rss:.0f} MB"))
    quad, lin, const = np.polyfit(sizes, times, 2)
    rows.append(("fit wall = a n^2 + b n + c", f"a={quad * 1000:.3f} ms, b={lin * 1000:.1f} ms, c={const * 1000:.0f} ms"))
    rows.append(("quadratic share at 64 replicas", f"{quad * 64 * 64 / times[-1]:.1%}"))
    report("scale: trivial replicas on the process backend", rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        overhead(args.runs, Path(tmp))
        scale(Path(tmp))


if __name__ == "__main__":
    main()
