"""Two sources concatenated, written as first versions are: maps
sequential, no prefetch, no cache. The first half of the files are clean
photos; the second half are scans that need their edges found as well
(the slow map, in concatenate's SECOND input). `pipetune profile -- python3
train_tf_concat.py DIR` records both inputs' ops, each priced for its share
of the batches (docs/tfdata.md, "zip and concatenate").

    python3 train_tf_concat.py DIR [EPOCHS] [SEEN_JSON]

SEEN_JSON, when given, gets the files each epoch delivered, in order."""
import glob
import os

from _loop import arguments, train  # the loop beside this script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

data_dir, epochs, seen_path = arguments()
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

train(ds, epochs, seen_path)  # a step on each batch's images
