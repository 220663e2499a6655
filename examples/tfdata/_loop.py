"""The training loop of the tf.data example scripts (train_tf.py,
train_tf_zip.py, train_tf_concat.py): a plain Python `for` over the
dataset, a new iterator each epoch, as first versions are written.

`arguments()` reads the scripts' command line, DIR [EPOCHS] [SEEN_JSON].
`train(ds, epochs, seen_path, step)` calls `step(batch)` on each batch; the
step trains and returns the batch's file paths (by default `image_step`: a
batch of (images, paths) and a step on the images). At the end it prints one
JSON line (batches, seconds, batches per second, the process's CPU
seconds over the loop, each epoch's rate: a cache
fills in the first epoch and serves the rest) and, when `seen_path` is
given, writes there the files each epoch delivered, in order: the tests
check that a tuned plan neither loses nor repeats a sample."""
import json
import sys
import time


def arguments():
    """DIR [EPOCHS] [SEEN_JSON]: the image folder, epochs (3), where to write
    the files each epoch delivered (none)."""
    data_dir = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    seen_path = sys.argv[3] if len(sys.argv) > 3 else None
    return data_dir, epochs, seen_path


_image_train_step = None


def image_step(batch):
    """A batch of (images, paths): a small step on the images (compiled
    once, as a tf.function); returns the paths."""
    global _image_train_step
    if _image_train_step is None:
        import tensorflow as tf

        _image_train_step = tf.function(lambda images: tf.reduce_mean(tf.square(images - 127.0)))
    images, paths = batch
    _image_train_step(images)
    return paths


def train(ds, epochs, seen_path=None, step=image_step):
    seen = []
    start, cpu_start = time.monotonic(), time.process_time()
    batches = 0
    epoch_rates = []
    for _ in range(epochs):
        paths = []
        epoch_start, epoch_batches = time.monotonic(), 0
        for batch in ds:
            paths.extend(p.decode() for p in step(batch).numpy())
            batches += 1
            epoch_batches += 1
        epoch_rates.append(epoch_batches / (time.monotonic() - epoch_start))
        seen.append(paths)
    seconds, cpu_seconds = time.monotonic() - start, time.process_time() - cpu_start
    print(json.dumps({"batches": batches, "seconds": seconds, "batches_per_second": batches / seconds,
                      "cpu_seconds": cpu_seconds, "epoch_batches_per_second": epoch_rates}))
    if seen_path:
        with open(seen_path, "w") as f:
            json.dump(seen, f)
