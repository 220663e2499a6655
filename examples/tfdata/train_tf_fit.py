"""The same pipeline as train_tf.py, trained with Keras' model.fit: maps
sequential, no prefetch, no cache (docs/tfdata.md).

    python3 train_tf_fit.py DIR [EPOCHS]"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

data_dir = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def process_path(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    label = tf.strings.to_number(tf.strings.substr(path, -5, 1), tf.int32) % 2
    return tf.image.resize(image, [96, 96]) / 255.0, label


def augment(image, label):
    return tf.image.random_flip_left_right(image), label


ds = tf.data.Dataset.list_files(data_dir + "/*.jpg", shuffle=False)
ds = ds.map(process_path)
ds = ds.map(augment)
ds = ds.batch(32)

model = keras.Sequential([keras.Input((96, 96, 3)), keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
start = time.monotonic()
history = model.fit(ds, epochs=epochs, verbose=0)
seconds = time.monotonic() - start
batches = epochs * int(tf.data.experimental.cardinality(ds))
print(json.dumps({"batches": batches, "seconds": seconds, "batches_per_second": batches / seconds}))
