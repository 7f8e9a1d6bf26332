"""The multi-worker codelab's trainer, offline: image classification with
MultiWorkerMirroredStrategy and a custom training loop.

Kept from the codelab: `create_dataset` with auto-shard policy DATA, a global
batch of per-replica batch x replicas, the model built inside
`strategy.scope()`, and the `_is_chief` / `write_filepath` helpers so the chief
saves to the model folder and every other worker to a temporary folder it then
removes. Changed for offline use: the images are small synthetic ones made here
(no download), and the loop is a custom one because Keras 3's `model.fit`
refuses MultiWorkerMirroredStrategy.
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

IMAGE_SIZE = 16
NUM_CLASSES = 4
NUM_IMAGES = 2048
PER_REPLICA_BATCH_SIZE = 32


def make_images(seed=0):
    """Four classes of noisy 16x16 images: a bright bar at the top, bottom, left or right."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, NUM_IMAGES)
    images = rng.normal(0.0, 1.0, (NUM_IMAGES, IMAGE_SIZE, IMAGE_SIZE, 1)).astype("float32")
    bar = slice(2, 6)
    for n, label in enumerate(labels):
        region = [(bar, slice(None)), (slice(-6, -2), slice(None)), (slice(None), bar), (slice(None), slice(-6, -2))]
        images[n][region[label]] += 0.4
    return images, labels.astype("int64")


def create_dataset(global_batch_size):
    images, labels = make_images()
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(NUM_IMAGES, seed=1)
    dataset = dataset.repeat().batch(global_batch_size, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def create_model():
    return tf.keras.Sequential([
        tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 1)),
        tf.keras.layers.Conv2D(8, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(NUM_CLASSES),
    ])


def _is_chief(task_type, task_id):
    # Vertex AI names the primary "chief"; a single-replica job has no task type.
    return task_type == "chief" or task_type is None


def _get_temp_dir(dirpath, task_id):
    temp_dir = os.path.join(dirpath, "workertemp_" + str(task_id))
    tf.io.gfile.makedirs(temp_dir)
    return temp_dir


def write_filepath(filepath, task_type, task_id):
    dirpath = os.path.dirname(filepath)
    base = os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    args = parser.parse_args()

    tf.keras.utils.set_random_seed(1234)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
    global_batch_size = PER_REPLICA_BATCH_SIZE * strategy.num_replicas_in_sync
    print(f"{task_type}:{task_id} of {strategy.num_replicas_in_sync} replicas; global batch {global_batch_size}")

    dataset = strategy.experimental_distribute_dataset(create_dataset(global_batch_size))
    with strategy.scope():
        model = create_model()
        optimizer = tf.keras.optimizers.Adam(0.003)
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(iterator):
        def step(inputs):
            images, labels = inputs
            with tf.GradientTape() as tape:
                logits = model(images, training=True)
                losses = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
                loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch_size)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            accuracy.update_state(labels, logits)
            return loss

        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=(next(iterator),)), axis=None)

    iterator = iter(dataset)
    for epoch in range(1, args.epochs + 1):
        accuracy.reset_state()
        loss = sum(float(train_step(iterator)) for _ in range(args.steps)) / args.steps
        acc = float(accuracy.result())  # a collective op: every replica reads it
        print(f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, accuracy {acc:.3f}")

    model_dir = os.environ.get("AIP_MODEL_DIR", "model/")
    tf.io.gfile.makedirs(model_dir)
    model_path = write_filepath(os.path.join(model_dir, "model.keras"), task_type, task_id)
    model.save(model_path)  # every replica saves: saving takes part in collective ops
    if _is_chief(task_type, task_id):
        with tf.io.gfile.GFile(os.path.join(model_dir, "metrics.json"), "w") as f:
            json.dump({"loss": loss, "accuracy": acc}, f)
        print(f"saved the model to {model_path}")
    else:
        tf.io.gfile.rmtree(os.path.dirname(model_path))


if __name__ == "__main__":
    main()
