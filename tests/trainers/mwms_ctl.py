#!/usr/bin/env python
"""MultiWorkerMirroredStrategy with a custom training loop (TF 2.21 / Keras 3).

Follows the "multi-worker training with a custom training loop" codelab:
  * synthetic, easily learnable 10-class data made with numpy (no downloads);
  * tf.data pipeline with auto_shard_policy = DATA;
  * global batch = per-replica batch x strategy.num_replicas_in_sync;
  * model + optimizer built in strategy.scope();
  * train step = strategy.run(step_fn) with the loss scaled by the global batch
    (tf.nn.compute_average_loss) and strategy.reduce(SUM);
  * codelab save helpers (_is_chief / _get_temp_dir / write_filepath): the chief
    saves into AIP_MODEL_DIR, the other workers into AIP_MODEL_DIR/workertemp_<id>/,
    which they delete afterwards.  Every replica calls save.
  * the chief also writes AIP_MODEL_DIR/done.json with final_loss / first_loss.

Keras 3's model.fit refuses MultiWorkerMirroredStrategy, hence the custom loop.
Works with one replica too (no TF_CONFIG: local strategy, acts as chief).

Args: --epochs N (default 3), --steps-per-epoch N (default 20),
      --batch-size N per replica (default 32), --model-dir DIR (default
      $AIP_MODEL_DIR, else ./mwms_model/),
      --save-format keras|savedmodel (default keras: <dir>/model.keras;
      savedmodel: model.export() to <dir>/saved_model/, ~1 s slower).
Output: "epoch E loss=L accuracy=A" per epoch, then
        "final_loss=<float> first_loss=<float>" and "saved model to <path>".
"""
import argparse
import json
import os
import sys
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
# TF 2.21 prints an "oneDNN custom operations are on" notice that
# TF_CPP_MIN_LOG_LEVEL does not silence; turning the oneDNN ops off removes it.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

T0 = time.monotonic()
NUM_CLASSES = 10
NUM_FEATURES = 32
NUM_EXAMPLES = 4096

# Filled in main() from the cluster resolver; used by _is_chief.
_CLUSTER = {}


def log(tag, msg):
    print(f"[{tag} {time.monotonic() - T0:6.2f}s] {msg}", flush=True)


def make_data(seed=0):
    """Ten well separated Gaussian blobs in NUM_FEATURES dimensions.

    Same seed on every replica, so all workers see the same underlying data
    (the DATA auto-shard policy then splits it between them)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 1.0, size=(NUM_CLASSES, NUM_FEATURES)).astype("float32")
    y = rng.integers(0, NUM_CLASSES, size=NUM_EXAMPLES).astype("int64")
    x = centers[y] + rng.normal(0.0, 0.6, size=(NUM_EXAMPLES, NUM_FEATURES)).astype("float32")
    return x, y


def create_dataset(global_batch_size):
    x, y = make_data()
    ds = (tf.data.Dataset.from_tensor_slices((x, y))
          .shuffle(NUM_EXAMPLES, seed=42)
          .repeat()
          .batch(global_batch_size, drop_remainder=True))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def build_model():
    return tf.keras.Sequential([
        tf.keras.Input(shape=(NUM_FEATURES,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(NUM_CLASSES),
    ])


# ---- codelab save helpers -------------------------------------------------
def _is_chief(task_type, task_id):
    # With a "chief" in the cluster (Vertex AI always has one for multi-replica
    # jobs) only the chief is chief; without one, worker 0 is.  task_type None
    # means a single-replica (non-distributed) run.
    if task_type is None:
        return True
    if "chief" in _CLUSTER:
        return task_type == "chief"
    return task_type == "worker" and task_id == 0


def _get_temp_dir(dirpath, task_id):
    base_dirpath = "workertemp_" + str(task_id)
    temp_dir = os.path.join(dirpath, base_dirpath)
    tf.io.gfile.makedirs(temp_dir)
    return temp_dir


def write_filepath(filepath, task_type, task_id):
    dirpath = os.path.dirname(filepath)
    base = os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)
# ---------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per replica")
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR") or "mwms_model/")
    parser.add_argument("--save-format", choices=["keras", "savedmodel"], default="keras",
                        help="keras: model.save(<dir>/model.keras) (fast); savedmodel: "
                             "model.export(<dir>/saved_model/) with a serving_default signature")
    args = parser.parse_args()

    tf.keras.utils.set_random_seed(1234)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    _CLUSTER.update(resolver.cluster_spec().as_dict())
    tag = f"{task_type}:{task_id}" if task_type else "local"
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    log(tag, f"strategy ready: num_replicas_in_sync={strategy.num_replicas_in_sync} "
             f"global_batch={global_batch} cluster={_CLUSTER}")

    dataset = create_dataset(global_batch)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)

    with strategy.scope():
        model = build_model()
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(iterator):
        def step_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                per_example = tf.keras.losses.sparse_categorical_crossentropy(
                    y, logits, from_logits=True)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            accuracy.update_state(y, logits)
            return loss

        per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    iterator = iter(dist_dataset)
    epoch_losses = []
    for epoch in range(args.epochs):
        accuracy.reset_state()
        total = 0.0
        for _ in range(args.steps_per_epoch):
            total += float(train_step(iterator))
        epoch_loss = total / args.steps_per_epoch
        epoch_losses.append(epoch_loss)
        log(tag, f"epoch {epoch + 1}/{args.epochs} loss={epoch_loss:.4f} "
                 f"accuracy={float(accuracy.result()):.4f}")

    first_loss, final_loss = epoch_losses[0], epoch_losses[-1]
    print(f"final_loss={final_loss:.6f} first_loss={first_loss:.6f}", flush=True)

    # ---- save (every replica; non-chiefs into a temp dir they then delete) --
    model_dir = args.model_dir
    tf.io.gfile.makedirs(model_dir)
    name = "model.keras" if args.save_format == "keras" else "saved_model"
    model_path = os.path.join(model_dir, name)
    write_model_path = write_filepath(model_path, task_type, task_id)
    if args.save_format == "keras":
        model.save(write_model_path)
    else:
        model.export(write_model_path, format="tf_saved_model", verbose=False)
    log(tag, f"saved model to {write_model_path}")

    if _is_chief(task_type, task_id):
        with tf.io.gfile.GFile(os.path.join(model_dir, "done.json"), "w") as f:
            f.write(json.dumps({"final_loss": final_loss, "first_loss": first_loss,
                                "epochs": args.epochs,
                                "num_replicas_in_sync": strategy.num_replicas_in_sync}))
        log(tag, f"wrote {os.path.join(model_dir, 'done.json')}")
    else:
        tf.io.gfile.rmtree(os.path.dirname(write_model_path))
        log(tag, f"removed {os.path.dirname(write_model_path)}")
    log(tag, "done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
