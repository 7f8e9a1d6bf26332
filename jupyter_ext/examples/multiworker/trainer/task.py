"""The multi-worker codelab's trainer ("Vertex AI: Multi-Worker Training and Transfer Learning with
TensorFlow"): image classification with `model.fit` under MultiWorkerMirroredStrategy.

As the codelab wrote it: `create_dataset` with auto-shard policy DATA, a global batch of per-replica
batch x replicas, the model built and compiled inside `strategy.scope()`, `model.fit`, and the
`_is_chief` / `_get_temp_dir` / `write_filepath` helpers, so the chief saves to the model folder and
each worker under its own `workertemp_<task id>` folder (every replica must save: saving takes part
in collective ops). Keras 2 (tf-keras): the job sets TF_USE_LEGACY_KERAS=1, because Keras 3's
`model.fit` refuses MultiWorkerMirroredStrategy.

Changed because this runs offline: synthetic Cassava-shaped images (5 classes, made with a fixed
seed, so every replica has the same data) instead of the `tfds` download; a small convolutional
base trained from scratch instead of ResNet50 with ImageNet weights, hence a larger learning rate;
the model folder from AIP_MODEL_DIR (what Vertex AI gives) instead of a hard-coded bucket. Added:
the chief writes the last epoch's metrics to metrics.json next to the model.
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quieter replica logs

import numpy as np
import tensorflow as tf

PER_REPLICA_BATCH_SIZE = 64
EPOCHS = 2
IMAGE_SIZE = 64  # the codelab resizes Cassava's photos to 300x300
NUMBER_OF_CLASSES = 5  # as Cassava: four leaf diseases and healthy
NUMBER_OF_IMAGES = 1280


def make_images(seed=0):
    """Cassava-shaped stand-ins: RGB uint8 images whose class sets their mean colour."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUMBER_OF_CLASSES, NUMBER_OF_IMAGES)
    colours = rng.uniform(60, 200, (NUMBER_OF_CLASSES, 3))
    images = rng.normal(0, 25, (NUMBER_OF_IMAGES, IMAGE_SIZE, IMAGE_SIZE, 3)) + colours[labels][:, None, None, :]
    return np.clip(images, 0, 255).astype("uint8"), labels


def preprocess_data(image, label):
    """Resizes and scales images."""
    image = tf.image.resize(image, (IMAGE_SIZE, IMAGE_SIZE))
    return tf.cast(image, tf.float32) / 255.0, label


def create_dataset(batch_size):
    """Loads the images and preprocesses them."""
    train_data = tf.data.Dataset.from_tensor_slices(make_images())
    train_data = train_data.map(preprocess_data, num_parallel_calls=tf.data.AUTOTUNE)
    train_data = train_data.shuffle(1000, seed=1)  # one order on every replica: their DATA shards do not overlap
    train_data = train_data.batch(batch_size)
    train_data = train_data.prefetch(tf.data.AUTOTUNE)

    # each replica takes its share of every global batch
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_data = train_data.with_options(options)
    return train_data, NUMBER_OF_CLASSES


def create_model(number_of_classes):
    """A small convolutional base with the codelab's classification head, compiled."""
    base_model = tf.keras.Sequential([
        tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
    ])
    x = tf.keras.layers.GlobalAveragePooling2D()(base_model.output)
    x = tf.keras.layers.Dense(1016, activation="relu")(x)
    predictions = tf.keras.layers.Dense(number_of_classes, activation="softmax")(x)
    model = tf.keras.Model(inputs=base_model.input, outputs=predictions)

    model.compile(loss="sparse_categorical_crossentropy",
                  optimizer=tf.keras.optimizers.Adam(0.003),  # the codelab's 0.0001 fine-tunes pretrained weights
                  metrics=["accuracy"])
    return model


def _is_chief(task_type, task_id):
    """Vertex AI names the primary replica "chief"."""
    return task_type == "chief"


def _get_temp_dir(dirpath, task_id):
    temp_dir = os.path.join(dirpath, "workertemp_" + str(task_id))
    tf.io.gfile.makedirs(temp_dir)
    return temp_dir


def write_filepath(filepath, task_type, task_id):
    """Where this replica saves: the chief at `filepath`, a worker under its own temporary folder."""
    dirpath = os.path.dirname(filepath)
    base = os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = _get_temp_dir(dirpath, task_id)
    return os.path.join(dirpath, base)


def main():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    global_batch_size = PER_REPLICA_BATCH_SIZE * strategy.num_replicas_in_sync
    train_data, number_of_classes = create_dataset(global_batch_size)

    with strategy.scope():  # variables are mirrored on every replica
        model = create_model(number_of_classes)

    history = model.fit(train_data, epochs=EPOCHS)

    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
    model_dir = os.environ["AIP_MODEL_DIR"]  # ends with "/": the chief saves at its top
    model.save(write_filepath(model_dir, task_type, task_id))
    if _is_chief(task_type, task_id):
        with tf.io.gfile.GFile(os.path.join(model_dir, "metrics.json"), "w") as f:
            json.dump({name: values[-1] for name, values in history.history.items()}, f)


if __name__ == "__main__":
    main()
