"""How fast `vtrain` starts: `vtrain --help` and `vtrain validate` of the codelab's job,
next to a bare `python -c pass`, alternating in one run (medians of N each).

Target: `--help` within 3x of a bare interpreter start (it must not import the
Vertex AI client library; `validate` has to, to read the job with its types).

Run: python tests/benchmarks/bench_cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, median, report  # noqa: E402

EXAMPLE = ROOT / "jupyter_ext" / "examples" / "multiworker.yaml"


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, (argv, done.stdout[-500:], done.stderr[-500:])
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    vtrain = shutil.which("vtrain") or sys.exit("vtrain is not installed (pip install -e .)")
    commands = {"python -c pass": [sys.executable, "-c", "pass"],
                "vtrain --help": [vtrain, "--help"],
                "vtrain validate EXAMPLE": [vtrain, "validate", str(EXAMPLE)]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for name, argv in commands.items():  # warm the file cache once
        timed(argv)
    for _ in range(args.runs):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    bare = median(times["python -c pass"])
    rows = [(name, f"{median(values) * 1000:.0f} ms (x{median(values) / bare:.1f} a bare interpreter)")
            for name, values in times.items()]
    help_ratio = median(times["vtrain --help"]) / bare
    rows.append(("target: --help within 3x a bare interpreter", "met" if help_ratio <= 3 else "NOT met"))
    report(f"vtrain start-up, median of {args.runs} alternating runs", rows)


if __name__ == "__main__":
    main()
