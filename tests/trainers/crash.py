#!/usr/bin/env python
"""A replica that (optionally) crashes, to test failure handling.

Every replica prints a couple of lines and spawns a grandchild process
(`python -c "import time; time.sleep(300)"`, same process group, NOT detached)
so a test can check that the runner kills grandchildren too.

If --crash-task TYPE:INDEX matches this replica's TF_CONFIG task (e.g.
worker:1; a CLUSTER_SPEC name like workerpool1:0 also matches; with no
TF_CONFIG the replica counts as chief:0), it heartbeats for --after seconds
and then raises RuntimeError("boom from <type> <index>"), so Python prints a
traceback to stderr and exits 1.  All other replicas heartbeat once a second
forever (they never exit by themselves).

Args:
  --crash-task TYPE:INDEX   replica that crashes (default: none)
  --after SECONDS           delay before the crash (default 1)
  --pid-dir DIR             optional: write "<task>.pid" (this process) and
                            "<task>.grandchild.pid" files into DIR
"""
import argparse
import json
import os
import subprocess
import sys
import time


def own_tasks():
    """Names this replica answers to: TF_CONFIG type:index and CLUSTER_SPEC type:index."""
    names = []
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task") or {}
    if "type" in task:
        names.append(f"{task['type']}:{task.get('index', 0)}")
    cluster_spec = json.loads(os.environ.get("CLUSTER_SPEC") or "{}")
    task = cluster_spec.get("task") or {}
    if "type" in task:
        names.append(f"{task['type']}:{task.get('index', 0)}")
    if not tf_config:
        names.append("chief:0")  # single-replica job: no TF_CONFIG
    return names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-task", default=None, help="TYPE:INDEX, e.g. worker:1")
    parser.add_argument("--after", type=float, default=1.0)
    parser.add_argument("--pid-dir", default=None)
    args = parser.parse_args()

    names = own_tasks()
    me = names[0]
    print(f"[{me}] crash.py starting pid={os.getpid()} pgid={os.getpgid(0)} "
          f"names={names}", flush=True)

    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print(f"[{me}] spawned grandchild pid={grandchild.pid}", flush=True)
    if args.pid_dir:
        os.makedirs(args.pid_dir, exist_ok=True)
        tag = me.replace(":", "-")
        with open(os.path.join(args.pid_dir, f"{tag}.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
        with open(os.path.join(args.pid_dir, f"{tag}.grandchild.pid"), "w") as f:
            f.write(f"{grandchild.pid}\n")

    will_crash = args.crash_task is not None and args.crash_task in names
    if will_crash:
        print(f"[{me}] I am the crash task; crashing in {args.after:g}s", flush=True)
        deadline = time.monotonic() + args.after
        beat = 0
        while time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            beat += 1
            print(f"[{me}] heartbeat {beat} (before crash)", flush=True)
        ttype, _, tindex = args.crash_task.partition(":")
        raise RuntimeError(f"boom from {ttype} {tindex}")

    print(f"[{me}] not the crash task; heartbeating until stopped", flush=True)
    beat = 0
    while True:
        time.sleep(1.0)
        beat += 1
        print(f"[{me}] heartbeat {beat}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
