#!/usr/bin/env python
"""Report what TFConfigClusterResolver makes of this replica's TF_CONFIG.

Prints one JSON line:
  {"task_type", "task_id", "cluster": cluster_spec().as_dict(),
   "tf_config": <parsed TF_CONFIG or {}>, "cluster_spec": <parsed CLUSTER_SPEC or {}>}
Exits 0.  (Imports TensorFlow, so it takes a few seconds.)
"""
import json
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
# TF 2.21 prints an "oneDNN custom operations are on" notice that
# TF_CPP_MIN_LOG_LEVEL does not silence; turning the oneDNN ops off removes it.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tensorflow as tf  # noqa: E402


def main():
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    report = {
        "task_type": resolver.task_type,
        "task_id": resolver.task_id,
        "cluster": resolver.cluster_spec().as_dict(),
        "tf_config": json.loads(os.environ.get("TF_CONFIG", "{}") or "{}"),
        "cluster_spec": json.loads(os.environ.get("CLUSTER_SPEC", "{}") or "{}"),
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
