#!/usr/bin/python3
"""Do pipetune's image functions compute what Pillow computes?

  check_pixels.py BENCH DIR [--count N]

For N files of DIR (spread over the listing): jpeg_decode's pixels against
PIL.Image.open().convert("RGB") (expected: identical, same libjpeg-turbo,
same IDCT and upsampling), and resize to 224x224 (antialiased triangle
filter) against Pillow's resize((224, 224), BILINEAR), which is what
torchvision's RandomResizedCrop runs on a PIL image (expected: within one
level). BENCH is the pipetune_image_bench binary.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bench")
    parser.add_argument("dir")
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.jpg")))
    files = files[::max(1, len(files) // args.count)][:args.count]
    identical, diffs = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "out")
        for path in files:
            subprocess.run([args.bench, "dump", path, prefix], check=True, stdout=subprocess.DEVNULL)
            image = Image.open(path).convert("RGB")
            width, height = image.size
            ours = np.fromfile(prefix + ".decoded.rgb", dtype=np.uint8).reshape(height, width, 3)
            identical += np.array_equal(ours, np.asarray(image))
            resized = np.fromfile(prefix + ".224.rgb", dtype=np.uint8).reshape(224, 224, 3).astype(int)
            reference = np.asarray(image.resize((224, 224), Image.BILINEAR)).astype(int)
            diffs.append(np.abs(resized - reference))
    diffs = np.stack(diffs)
    print(f"decode: {identical}/{len(files)} files bit-identical to Pillow")
    print(f"resize 224x224 vs Pillow: mean |difference| {diffs.mean():.3f} levels, max {diffs.max()}")
    sys.exit(0 if identical == len(files) and diffs.max() <= 2 else 1)


if __name__ == "__main__":
    main()
