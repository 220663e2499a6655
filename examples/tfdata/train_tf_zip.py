"""Images zipped with labels made by a second pipeline, written as first
versions are: maps sequential, no prefetch, no cache. The labels' map (an
edge measure of each full-size image) is the slow one, in zip's SECOND
input. `pipetune profile -- python3 train_tf_zip.py DIR` records both
inputs' ops (docs/tfdata.md, "zip and concatenate").

    python3 train_tf_zip.py DIR [EPOCHS] [SEEN_JSON]

SEEN_JSON, when given, gets the files each epoch delivered, in order."""
import glob
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

data_dir = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
seen_path = sys.argv[3] if len(sys.argv) > 3 else None
files = sorted(glob.glob(data_dir + "/*.jpg"))


def thumbnail(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3, ratio=2)
    return tf.image.resize(image, [48, 48]), path


def edge_label(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    image = tf.image.resize(image, [96, 96]) / 255.0
    edges = tf.image.sobel_edges(tf.image.rgb_to_grayscale(image[None]))
    return tf.cast(tf.reduce_mean(tf.abs(edges)) > 0.05, tf.int32)


images = tf.data.Dataset.from_tensor_slices(files)
images = images.map(thumbnail)
labels = tf.data.Dataset.from_tensor_slices(files)
labels = labels.map(edge_label)
ds = tf.data.Dataset.zip((images, labels))
ds = ds.batch(32)


@tf.function
def train_step(images, labels):
    return tf.reduce_mean(tf.square(images - 127.0)) + tf.reduce_mean(tf.cast(labels, tf.float32))


seen = []
start = time.monotonic()
batches = 0
epoch_rates = []
for epoch in range(epochs):
    paths = []
    epoch_start, epoch_batches = time.monotonic(), 0
    for (batch_images, batch_paths), batch_labels in ds:
        train_step(batch_images, batch_labels)
        paths.extend(p.decode() for p in batch_paths.numpy())
        batches += 1
        epoch_batches += 1
    epoch_rates.append(epoch_batches / (time.monotonic() - epoch_start))
    seen.append(paths)
seconds = time.monotonic() - start
print(json.dumps({"batches": batches, "seconds": seconds, "batches_per_second": batches / seconds,
                  "epoch_batches_per_second": epoch_rates}))
if seen_path:
    with open(seen_path, "w") as f:
        json.dump(seen, f)
