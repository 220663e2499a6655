#!/usr/bin/python3
"""The image example's pipeline in PyTorch, for bench/image/compare.sh.

Same files, same work as examples/image/image_train_tuned.json: read the JPEG,
decode it with PIL, torchvision RandomResizedCrop(224) + RandomHorizontalFlip,
ToTensor + Normalize (ImageNet mean/std), batches of 64 from a DataLoader.

  torch_dataloader.py loader DIR [--workers 0,1,2,3,4] [--seconds S]
      images/s of the DataLoader at each num_workers over one epoch, in the
      steady state (from the first batch to the last, worker start-up
      excluded), and images per CPU-second of the process and its workers;
      then the best: "torch_images_per_second X (num_workers N)".
  torch_dataloader.py stages DIR [--count N]
      single-thread CPU microseconds per image of each step, files in memory.

Run it with Debian's interpreter (/usr/bin/python3), which has python3-torch
and python3-torchvision; pin it to the cores under test with taskset.
"""
import argparse
import glob
import io
import gc
import os
import resource
import sys
import time

import torch
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import DataLoader, Dataset, default_collate

from steady_rate import steady_window

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def train_transform():
    return T.Compose([
        T.RandomResizedCrop(224),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(MEAN, STD),
    ])


class JpegFiles(Dataset):
    """torchvision.datasets.ImageFolder's loader, without the class folders."""

    def __init__(self, paths):
        self.paths = paths
        self.transform = train_transform()

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        with open(self.paths[index], "rb") as f:
            image = Image.open(f).convert("RGB")
        return self.transform(image)


def single_thread_worker(_):
    torch.set_num_threads(1)


def own_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid):
    """utime + stime of a live process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_loader(paths, workers, seconds):
    """(steady images/s, images per CPU-second of this process and its workers)."""
    cpu_start = own_cpu_seconds()
    loader = DataLoader(JpegFiles(paths), batch_size=64, shuffle=True, num_workers=workers,
                        worker_init_fn=single_thread_worker if workers > 0 else None,
                        generator=torch.Generator().manual_seed(7))
    batches = iter(loader)
    # The workers' CPU is read from /proc before they exit (a private
    # attribute, but the only handle on the worker processes).
    worker_pids = [w.pid for w in getattr(batches, "_workers", [])]
    worker_cpu = {}

    def read_worker_cpu():
        for pid in worker_pids:
            try:
                worker_cpu[pid] = process_cpu_seconds(pid)
            except OSError:  # exited at the end of the epoch: keep its last reading
                pass

    rate, total_images = steady_window(batches, seconds, read_worker_cpu)
    cpu = own_cpu_seconds() - cpu_start + sum(worker_cpu.values())
    del batches, loader  # shuts the workers down before the next setting starts
    gc.collect()
    return rate, (total_images / cpu if cpu > 0 else 0.0)


def run_loader(args):
    paths = sorted(glob.glob(os.path.join(args.dir, "*.jpg")))
    if not paths:
        sys.exit(f"torch_dataloader.py: no JPEG files in {args.dir}")
    torch.set_num_threads(1)
    best, best_workers, best_per_cpu = 0.0, None, 0.0
    for workers in [int(w) for w in args.workers.split(",")]:
        rate, per_cpu = measure_loader(paths, workers, args.seconds)
        print(f"num_workers {workers}: {rate:.1f} images/s steady, {per_cpu:.1f} images per CPU-second",
              flush=True)
        best_per_cpu = max(best_per_cpu, per_cpu)
        if rate > best:
            best, best_workers = rate, workers
    print(f"torch_images_per_cpu_second {best_per_cpu:.1f}")
    print(f"torch_images_per_second {best:.1f} (num_workers {best_workers})")


def run_stages(args):
    torch.set_num_threads(1)
    paths = sorted(glob.glob(os.path.join(args.dir, "*.jpg")))[:args.count]
    raw = [open(p, "rb").read() for p in paths]
    crop, flip = T.RandomResizedCrop(224), T.RandomHorizontalFlip()
    to_tensor, normalize = T.ToTensor(), T.Normalize(MEAN, STD)
    steps = [
        ("decode", lambda b: Image.open(io.BytesIO(b)).convert("RGB")),
        ("crop_flip", lambda im: flip(crop(im))),
        ("to_tensor", to_tensor),
        ("normalize", normalize),
    ]
    print(f"{len(raw)} files from {args.dir}, single thread, CPU us per image")
    items = raw
    total = 0.0
    for name, step in steps:
        for _ in range(2):  # the first pass warms up
            start = time.thread_time()
            out = [step(x) for x in items]
            micros = (time.thread_time() - start) / len(items) * 1e6
        print(f"torch_us {name} {micros:.1f}")
        total += micros
        items = out
    start = time.thread_time()
    for i in range(0, len(items) - 63, 64):
        default_collate(items[i:i + 64])
    collate = (time.thread_time() - start) / (len(items) // 64 * 64) * 1e6
    print(f"torch_us collate {collate:.1f}")
    print(f"torch_us total {total + collate:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    loader = sub.add_parser("loader")
    loader.add_argument("dir")
    loader.add_argument("--workers", default="0,1,2,3,4")
    loader.add_argument("--seconds", type=float, default=float("inf"),
                        help="stop a setting after this long (default: one epoch)")
    stages = sub.add_parser("stages")
    stages.add_argument("dir")
    stages.add_argument("--count", type=int, default=300)
    args = parser.parse_args()
    run_loader(args) if args.mode == "loader" else run_stages(args)


if __name__ == "__main__":
    main()
