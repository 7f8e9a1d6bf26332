"""Print numbered lines evenly over a time span; optionally end with a burst and fail.

    python lines.py COUNT SECONDS [--fail-with CODE]

Each line is `<task name> line <n>`. With --fail-with, the last 25 lines come within the final
half second (a traceback's worth, just before the crash), then the process exits with CODE.
"""

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("count", type=int)
parser.add_argument("seconds", type=float)
parser.add_argument("--fail-with", type=int, default=0)
args = parser.parse_args()
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
name = f"{task['type']}-{task['index']}"
burst = 25 if args.fail_with else 0
steady = args.count - burst
start = time.monotonic()
for n in range(args.count):
    if n < steady:
        time.sleep(max(0.0, start + args.seconds * n / max(1, steady) - time.monotonic()))
    else:
        time.sleep(0.5 / burst)
    print(f"{name} line {n}", flush=True)
sys.exit(args.fail_with)
