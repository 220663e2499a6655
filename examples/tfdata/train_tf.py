"""A tf.data training script as first versions are written: maps
sequential, no prefetch, no cache. `pipetune profile -- python3 train_tf.py
DIR` records it unchanged (docs/tfdata.md).

    python3 train_tf.py DIR [EPOCHS] [SEEN_JSON]

SEEN_JSON, when given, gets the files each epoch delivered, in order: the
tests check that a tuned plan neither loses nor repeats a sample."""
import os
import sys

from _loop import train  # the loop beside this script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

data_dir = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
seen_path = sys.argv[3] if len(sys.argv) > 3 else None


def process_path(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    return tf.image.resize(image, [96, 96]), path


def augment(image, path):
    return tf.image.random_flip_left_right(image), path


ds = tf.data.Dataset.list_files(data_dir + "/*.jpg", shuffle=False)
ds = ds.map(process_path)
ds = ds.map(augment)
ds = ds.batch(32)

train(ds, epochs, seen_path)  # a step on each batch's images, a new iterator each epoch
