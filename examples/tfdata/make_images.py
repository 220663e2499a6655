"""Writes N JPEG files of random pixels for the tf.data examples:
python3 make_images.py DIR N [HEIGHT WIDTH]. The same seed gives the same
files, so runs on different days read the same bytes."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: make_images.py DIR N [HEIGHT WIDTH]\n")
        sys.exit(2)
    out, count = sys.argv[1], int(sys.argv[2])
    height, width = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (240, 320)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    for i in range(count):
        # Smooth gradients plus noise: compresses like a photo, not like static.
        y = np.linspace(0, 255, height)[:, None, None]
        x = np.linspace(0, 255, width)[None, :, None]
        pixels = (y * rng.random() + x * rng.random() + rng.normal(0, 20, (height, width, 3))) % 256
        encoded = tf.io.encode_jpeg(pixels.astype(np.uint8), quality=90)
        tf.io.write_file(os.path.join(out, "img%05d.jpg" % i), encoded)


if __name__ == "__main__":
    main()
