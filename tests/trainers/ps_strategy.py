#!/usr/bin/env python
"""ParameterServerStrategy training (TF 2.21 / Keras 3), following the TF
"Parameter server training" tutorial.

Roles (from TF_CONFIG via TFConfigClusterResolver):
  * worker / ps : start tf.distribute.Server(...) and server.join() forever
                  (never exit by themselves; the runner stops them);
  * evaluator   : trivial side-car: prints that it is the evaluator and sleeps
                  in a loop "waiting for a checkpoint" (never exits by itself);
  * chief       : the coordinator: ParameterServerStrategy (+ optional variable
                  partitioner), ClusterCoordinator, per-worker dataset, custom
                  loop with coordinator.schedule / coordinator.join; prints the
                  loss per epoch and "final_loss=<float> first_loss=<float>"
                  and exits 0.

Args: --epochs N (default 3), --steps-per-epoch N (default 10),
      --batch-size N (default 32), --partitioner none|minsize
      (default minsize: MinSizePartitioner(min_shard_bytes=256K, max_shards=#ps),
      which leaves this tiny model unsharded.  Keras 3 layers cannot use
      ShardedVariable -- a partitioner that really shards, e.g.
      FixedShardsPartitioner, fails in tape.gradient with "'ShardedVariable'
      object has no attribute 'handle'"), --model-dir DIR (chief writes done.json there; default
      $AIP_MODEL_DIR, skipped when unset).
"""
import argparse
import json
import os
import sys
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # silences the oneDNN notice
# As the TF docs advise for parameter server training.
os.environ["GRPC_FAIL_FAST"] = "use_caller"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

T0 = time.monotonic()
NUM_FEATURES = 16


def log(tag, msg):
    print(f"[{tag} {time.monotonic() - T0:6.2f}s] {msg}", flush=True)


def run_server(resolver):
    tag = f"{resolver.task_type}:{resolver.task_id}"
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True)
    log(tag, f"server started at {server.target}; joining (runs until stopped)")
    server.join()


def run_evaluator(resolver, model_dir):
    tag = f"{resolver.task_type}:{resolver.task_id}"
    log(tag, "I am the evaluator (side-car); waiting for checkpoints until stopped")
    n = 0
    while True:
        time.sleep(1.0)
        n += 1
        ckpt = tf.train.latest_checkpoint(model_dir) if model_dir else None
        log(tag, f"evaluator heartbeat {n}: latest checkpoint={ckpt}")


def make_data(seed=0, n=2048):
    """Binary problem: label = 1 if w.x > 0 (linearly separable)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(NUM_FEATURES,)).astype("float32")
    x = rng.normal(size=(n, NUM_FEATURES)).astype("float32")
    y = (x @ w > 0).astype("float32").reshape(-1, 1)
    return x, y


def run_coordinator(resolver, args):
    tag = f"{resolver.task_type}:{resolver.task_id}" if resolver.task_type else "local"
    cluster = resolver.cluster_spec().as_dict()
    num_ps = len(cluster.get("ps", []))
    num_workers = len(cluster.get("worker", []))
    if num_ps == 0 or num_workers == 0:
        log(tag, f"error: ParameterServerStrategy needs worker and ps tasks, cluster={cluster}")
        return 1
    log(tag, f"coordinator: workers={num_workers} ps={num_ps}")

    if args.partitioner == "minsize":
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=256 << 10, max_shards=num_ps)
    else:
        partitioner = None
    strategy = tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    log(tag, f"strategy ready: partitioner={args.partitioner}")

    x_all, y_all = make_data()

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(args.batch_size)
        ds = tf.data.Dataset.from_tensor_slices((x_all, y_all)).shuffle(1024).repeat()
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds.batch(batch).prefetch(2)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input(shape=(NUM_FEATURES,)),
            tf.keras.layers.Dense(8, activation="relu"),
            tf.keras.layers.Dense(1),
        ])
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.2)

    per_worker_dataset = coordinator.create_per_worker_dataset(per_worker_dataset_fn)
    per_worker_iterator = iter(per_worker_dataset)

    @tf.function
    def step_fn(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                per_example = tf.keras.losses.binary_crossentropy(y, logits, from_logits=True)
                loss = tf.nn.compute_average_loss(per_example)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        x, y = next(iterator)
        losses = strategy.run(replica_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    epoch_losses = []
    scheduled = 0
    for epoch in range(args.epochs):
        results = [coordinator.schedule(step_fn, args=(per_worker_iterator,))
                   for _ in range(args.steps_per_epoch)]
        coordinator.join()
        scheduled += args.steps_per_epoch
        loss = float(np.mean([r.fetch() for r in results]))
        epoch_losses.append(loss)
        log(tag, f"epoch {epoch + 1}/{args.epochs} loss={loss:.4f} steps={scheduled}")

    first_loss, final_loss = epoch_losses[0], epoch_losses[-1]
    print(f"final_loss={final_loss:.6f} first_loss={first_loss:.6f}", flush=True)
    if args.model_dir:
        tf.io.gfile.makedirs(args.model_dir)
        with tf.io.gfile.GFile(os.path.join(args.model_dir, "done.json"), "w") as f:
            f.write(json.dumps({"final_loss": final_loss, "first_loss": first_loss,
                                "steps": scheduled}))
        log(tag, f"wrote {os.path.join(args.model_dir, 'done.json')}")
    log(tag, "coordinator done")
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--partitioner", choices=["none", "minsize"], default="minsize")
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR") or None)
    args = parser.parse_args()

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("worker", "ps"):
        run_server(resolver)
        return 0
    if resolver.task_type == "evaluator":
        run_evaluator(resolver, os.environ.get("AIP_CHECKPOINT_DIR"))
        return 0
    return run_coordinator(resolver, args)


if __name__ == "__main__":
    sys.exit(main())
