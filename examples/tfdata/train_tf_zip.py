"""Images zipped with labels made by a second pipeline, written as first
versions are: maps sequential, no prefetch, no cache. The labels' map (an
edge measure of each full-size image) is the slow one, in zip's SECOND
input. `pipetune profile -- python3 train_tf_zip.py DIR` records both
inputs' ops (docs/tfdata.md, "zip and concatenate").

    python3 train_tf_zip.py DIR [EPOCHS] [SEEN_JSON]

SEEN_JSON, when given, gets the files each epoch delivered, in order."""
import glob
import os

from _loop import arguments, train  # the loop beside this script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

data_dir, epochs, seen_path = arguments()
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


def step(batch):
    (images, paths), labels = batch
    train_step(images, labels)
    return paths


train(ds, epochs, seen_path, step)
