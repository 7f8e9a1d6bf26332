#!/usr/bin/env python
"""Print the Vertex-style environment this replica received, as one JSON line.

No TensorFlow import: starts fast.  Always exits 0.

Output: {"task_name": "<CLUSTER_SPEC task.type>-<task.index>" (or null),
         "env": {name: value for the Vertex/PyTorch variables that are set},
         "argv": sys.argv[1:]}
"""
import json
import os
import sys

ENV_NAMES = (
    "TF_CONFIG",
    "CLUSTER_SPEC",
    "AIP_MODEL_DIR",
    "AIP_CHECKPOINT_DIR",
    "AIP_TENSORBOARD_LOG_DIR",
    "CLOUD_ML_JOB_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
)


def task_name():
    raw = os.environ.get("CLUSTER_SPEC")
    if not raw:
        return None
    try:
        task = json.loads(raw).get("task", {})
        return f"{task['type']}-{task['index']}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def main():
    env = {k: os.environ[k] for k in ENV_NAMES if k in os.environ}
    print(json.dumps({"task_name": task_name(), "env": env, "argv": sys.argv[1:]}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
