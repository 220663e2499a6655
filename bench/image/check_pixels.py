#!/usr/bin/python3
"""Do pipetune's image functions compute what Pillow computes?

  check_pixels.py BENCH DIR [--count N]

For N files of DIR (spread over the listing): jpeg_decode's pixels against
PIL.Image.open().convert("RGB") (expected: identical, same libjpeg-turbo,
same IDCT and upsampling), and resize to 224x224 (antialiased triangle
filter) against Pillow's resize((224, 224), BILINEAR), which is what
torchvision's RandomResizedCrop runs on a PIL image (expected: within one
level), and the fused decode-and-crop (jpeg_decode with crop_size 224,
which decodes only the crop's window) against Pillow decoding the whole
file, cropping the same window, resizing it to 224x224 and mirroring it
when the draw says so: torchvision's RandomResizedCrop + RandomHorizontalFlip
given the same crop (expected: within one level, the resize's rounding).
BENCH is the pipetune_image_bench binary.
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
    identical, diffs, crop_diffs = 0, [], []
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "out")
        for index, path in enumerate(files):
            seed = str(index + 1)
            out = subprocess.run([args.bench, "dump", path, prefix, seed], check=True, capture_output=True,
                                 text=True).stdout
            x, y, w, h, flip = (int(v) for v in
                                next(l for l in out.splitlines() if l.startswith("crop ")).split()[1:])
            image = Image.open(path).convert("RGB")
            width, height = image.size
            ours = np.fromfile(prefix + ".decoded.rgb", dtype=np.uint8).reshape(height, width, 3)
            identical += np.array_equal(ours, np.asarray(image))
            resized = np.fromfile(prefix + ".224.rgb", dtype=np.uint8).reshape(224, 224, 3).astype(int)
            reference = np.asarray(image.resize((224, 224), Image.BILINEAR)).astype(int)
            diffs.append(np.abs(resized - reference))
            cropped = np.fromfile(prefix + ".crop.rgb", dtype=np.uint8).reshape(224, 224, 3).astype(int)
            window = image.crop((x, y, x + w, y + h)).resize((224, 224), Image.BILINEAR)
            if flip:
                window = window.transpose(Image.FLIP_LEFT_RIGHT)
            crop_diffs.append(np.abs(cropped - np.asarray(window).astype(int)))
    diffs, crop_diffs = np.stack(diffs), np.stack(crop_diffs)
    print(f"decode: {identical}/{len(files)} files bit-identical to Pillow")
    print(f"resize 224x224 vs Pillow: mean |difference| {diffs.mean():.3f} levels, max {diffs.max()}")
    print(f"fused decode+crop 224x224 vs Pillow crop+resize: mean |difference| {crop_diffs.mean():.3f} levels, "
          f"max {crop_diffs.max()}")
    ok = identical == len(files) and diffs.max() <= 2 and crop_diffs.max() <= 2
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
