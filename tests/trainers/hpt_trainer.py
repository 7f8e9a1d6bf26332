"""A tiny tuning trainer: reads its parameters and TF_CONFIG, writes into AIP_MODEL_DIR, reports `accuracy`.

The metric is a known function of the parameters (`expected_accuracy`), reported at steps 1..3 in
cloudml-hypertune's file format to $CLOUD_ML_HP_METRIC_FILE. Workers report a different value, so a test
can tell that a trial's measurement is its primary's. `--fail-on 2,3` makes every replica of trials
2 and 3 exit 1; `--use-hypertune` reports through the cloudml-hypertune library itself.
"""

import argparse
import json
import math
import os
import sys
import time


def expected_accuracy(learning_rate: float, units: int, optimizer: str) -> float:
    return round(0.9 - abs(math.log10(learning_rate) + 2) / 10 + units / 1000 + (0.05 if optimizer == "adam" else 0), 6)


def report(path: str, tag: str, value: float, step: int, trial: str, queue: list) -> None:
    """What hypertune.HyperTune.report_hyperparameter_tuning_metric writes: the whole queue, keys sorted."""
    queue.append({"timestamp": time.time(), "trial": trial, tag: str(float(value)), "global_step": str(step),
                  "checkpoint_path": ""})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for entry in queue:
            f.write(json.dumps(entry, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--units", type=int, default=32)
    parser.add_argument("--optimizer", default="sgd")
    parser.add_argument("--fail-on", default="")
    parser.add_argument("--use-hypertune", action="store_true")
    parser.add_argument("--no-metric", action="store_true")
    parser.add_argument("--sleep", type=float, default=0.0)
    args, unknown = parser.parse_known_args()
    trial = os.environ.get("CLOUD_ML_TRIAL_ID", "")
    cluster_spec = json.loads(os.environ["CLUSTER_SPEC"])
    task = cluster_spec["task"]
    task_name = f"{task['type']}-{task['index']}"
    primary = task["type"] == "workerpool0"
    print(json.dumps({"argv": sys.argv[1:], "trial": trial, "task": task_name,
                      "tf_config": json.loads(os.environ.get("TF_CONFIG", "null")), "cluster_spec": cluster_spec,
                      "metric_file": os.environ.get("CLOUD_ML_HP_METRIC_FILE", ""),
                      "model_dir": os.environ.get("AIP_MODEL_DIR", "")}), flush=True)
    model_dir = os.environ.get("AIP_MODEL_DIR", "")
    if model_dir:
        os.makedirs(model_dir, exist_ok=True)
        with open(os.path.join(model_dir, f"{task_name}.txt"), "w") as f:
            f.write(f"trial {trial} {task_name}\n")
    if trial in args.fail_on.split(","):
        print(f"trial {trial} breaks on purpose", file=sys.stderr, flush=True)
        sys.exit(1)
    time.sleep(args.sleep)
    if args.no_metric:
        return
    accuracy = expected_accuracy(args.learning_rate, args.units, args.optimizer) if primary else 0.0
    if args.use_hypertune:
        import hypertune

        tuner = hypertune.HyperTune()
        for step in (1, 2, 3):
            tuner.report_hyperparameter_tuning_metric("accuracy", accuracy * step / 3, global_step=step)
        return
    path = os.environ.get("CLOUD_ML_HP_METRIC_FILE", "/tmp/hypertune/output.metrics")
    queue: list = []
    for step in (1, 2, 3):
        report(path, "accuracy", accuracy * step / 3, step, trial, queue)


if __name__ == "__main__":
    main()
