"""The image example's pipeline in the peers, for bench/image/compare.sh:
SPDL (spdl 0.8: its thread pipeline, FFmpeg decoding outside the GIL) and
NVIDIA DALI's CPU pipeline (nvidia-dali-cuda130, device_id=None).

Same files, same work as torch_dataloader.py and the engine: read the JPEG,
decode it, RandomResizedCrop(224) with torchvision's defaults (area 8-100%,
aspect 3/4-4/3), a horizontal flip half the time, normalize with the
ImageNet mean and std into float32 CHW, batches of 64. Each peer in the way
its documentation recommends for speed: SPDL crops, scales and flips in
FFmpeg's filter graph during the decode (no Python per pixel), with
`concurrency` decode tasks on as many threads; DALI decodes only the crop
window (`decoders.image_random_crop`), then resizes and normalizes with
`num_threads` threads.

  peers.py spdl DIR [--threads 1,2,3,4] [--seconds S]
  peers.py dali DIR [--threads 1,2,3,4] [--seconds S]
      images/s at each thread count over one epoch (or S seconds), in the
      steady state (from the first batch to the last), and images per
      CPU-second of the process (all its threads); then the best:
      "<peer>_images_per_second X (threads N)" and
      "<peer>_images_per_cpu_second Y".

Run it with the torch 2.x venv's interpreter (scripts/setup.sh
installs spdl, nvidia-dali-cuda130 and the FFmpeg libraries SPDL loads);
exit 3 when the peer is not installed. Pin it with taskset.
"""
import argparse
import glob
import math
import os
import random
import resource
import sys

import numpy as np

from steady_rate import steady_window

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
SIZE = 224
BATCH = 64


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def crop_box(width, height, rng):
    """torchvision's RandomResizedCrop.get_params: (x, y, w, h)."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w = int(round(math.sqrt(target * ratio)))
        h = int(round(math.sqrt(target / ratio)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    # The fallback: a centre crop of the whole image at the nearest allowed ratio.
    ratio = width / height
    if ratio < 3 / 4:
        w, h = width, int(round(width / (3 / 4)))
    elif ratio > 4 / 3:
        h, w = height, int(round(height * (4 / 3)))
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def measure(batches, seconds):
    """Steady images/s from the first batch to the last, and images per CPU-second."""
    cpu_start = cpu_seconds()
    rate, total = steady_window(batches, seconds)
    cpu = cpu_seconds() - cpu_start
    return rate, (total / cpu if cpu > 0 else 0.0)


# ---- SPDL

def spdl_batches(paths, threads):
    import spdl.io
    from spdl.pipeline import PipelineBuilder

    rng = random.Random(7)

    def decode(path):
        packets = spdl.io.demux_image(path)
        x, y, w, h = crop_box(packets.width, packets.height, rng)
        flip = ",hflip" if rng.random() < 0.5 else ""
        frames = spdl.io.decode_packets(
            packets, filter_desc="crop=%d:%d:%d:%d,scale=%d:%d%s,format=rgb24" % (w, h, x, y, SIZE, SIZE, flip))
        return spdl.io.to_numpy(spdl.io.convert_frames(frames))

    def collate(images):
        batch = np.stack(images).astype(np.float32) * (1 / 255.0)
        batch = (batch - MEAN) / STD
        return np.ascontiguousarray(batch.transpose(0, 3, 1, 2))

    shuffled = list(paths)
    random.Random(7).shuffle(shuffled)
    pipeline = (PipelineBuilder().add_source(shuffled).pipe(decode, concurrency=threads).aggregate(BATCH)
                .pipe(collate).add_sink(3).build(num_threads=threads))
    with pipeline.auto_stop():
        yield from pipeline


# ---- DALI

def dali_batches(paths, threads):
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=threads, device_id=None, seed=7, prefetch_queue_depth=2)
    def pipeline():
        jpegs, _ = fn.readers.file(files=paths, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                        mean=(MEAN * 255).tolist(), std=(STD * 255).tolist(),
                                        mirror=fn.random.coin_flip(probability=0.5))

    pipe = pipeline()
    pipe.build()
    epoch = len(paths) // BATCH
    for _ in range(epoch):
        (out,) = pipe.run()
        yield out.as_array()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", choices=["spdl", "dali"])
    parser.add_argument("dir")
    parser.add_argument("--threads", default="1,2,3,4")
    parser.add_argument("--seconds", type=float, default=float("inf"),
                        help="stop a setting after this long (default: one epoch)")
    args = parser.parse_args()
    module = {"spdl": "spdl.io", "dali": "nvidia.dali"}[args.peer]
    try:
        __import__(module)
    except Exception as error:  # not installed, or its native libraries missing
        print("%s: %s unavailable: %s" % (args.peer, module, error), file=sys.stderr)
        sys.exit(3)
    paths = sorted(glob.glob(os.path.join(args.dir, "*.jpg")))
    if len(paths) < 2 * BATCH:
        sys.exit("peers.py: fewer than %d JPEG files in %s" % (2 * BATCH, args.dir))
    batches = spdl_batches if args.peer == "spdl" else dali_batches
    best, best_threads, best_per_cpu = 0.0, None, 0.0
    for threads in [int(t) for t in args.threads.split(",")]:
        rate, per_cpu = measure(batches(paths, threads), args.seconds)
        print("threads %d: %.1f images/s steady, %.1f images per CPU-second" % (threads, rate, per_cpu), flush=True)
        best_per_cpu = max(best_per_cpu, per_cpu)
        if rate > best:
            best, best_threads = rate, threads
    print("%s_images_per_cpu_second %.1f" % (args.peer, best_per_cpu))
    print("%s_images_per_second %.1f (threads %d)" % (args.peer, best, best_threads))


if __name__ == "__main__":
    main()
