"""Two sources concatenated, written as first versions are: maps
sequential, no prefetch, no cache. The first half of the files are clean
photos; the second half are scans that need their edges found as well
(the slow map, in concatenate's SECOND input). `pipetune profile -- python3
train_tf_concat.py DIR` records both inputs' ops, each priced for its share
of the batches (docs/tfdata.md, "zip and concatenate").

    python3 train_tf_concat.py DIR [EPOCHS] [SEEN_JSON]

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
photos, scans = files[:len(files) // 2], files[len(files) // 2:]


def load_photo(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3, ratio=2)
    return tf.image.resize(image, [48, 48]), path


def load_scan(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    image = tf.image.resize(image, [192, 192])
    edges = tf.image.sobel_edges(image[None])[0]
    image = image + tf.reduce_mean(tf.abs(edges), axis=-1)
    return tf.image.resize(image, [48, 48]), path


ds = tf.data.Dataset.from_tensor_slices(photos)
ds = ds.map(load_photo)
more = tf.data.Dataset.from_tensor_slices(scans)
more = more.map(load_scan)
ds = ds.concatenate(more)
ds = ds.batch(32)


@tf.function
def train_step(images):
    return tf.reduce_mean(tf.square(images - 127.0))


seen = []
start = time.monotonic()
batches = 0
epoch_rates = []
for epoch in range(epochs):
    paths = []
    epoch_start, epoch_batches = time.monotonic(), 0
    for images, batch_paths in ds:
        train_step(images)
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
