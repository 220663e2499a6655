#!/usr/bin/python3
"""The one-line swap, measured: a torchvision ImageFolder training loader
(RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize; batches
of 64, shuffled) as PyTorch's DataLoader at each num_workers of a grid, and
as pipetune.Loader over the equivalent engine config, side by side in one
run on the same files and cores.

  bench/pytorch/loader_swap.py [--build BUILD] [--count 2000] [--workers 0,1,2,3]
                               [--rounds 2] [--epochs 1]

Each measurement is a fresh process (pinned to the same cores as this one)
that iterates --epochs epochs and drains the batches; it reports images/s in
the steady state (first batch to last, start-up excluded) and over the whole
run, and images per CPU-second of the process and all its workers (from
wait4's rusage, which other load on the machine disturbs less). Rounds
alternate the sides; the best of each counts. Prints the ratio last:
"loader_over_best_dataloader X".

The images are pipetune_make_images' photo-like JPEGs (examples/image),
hard-linked into 10 class folders under out/loader_swap/. The engine config
is written by hand (what `pipetune tune TRACE --engine` writes from a trace of
the DataLoader): the decode fused with the crop (jpeg_decode with crop_size,
whose pixels equal jpeg_decode + random_crop_flip), two decode workers, a
prefetch of 4 batches.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
BATCH = 64


def engine_config(root):
    return {
        "name": "imagefolder_train_engine",
        "stages": [
            {"name": "files", "op": "list_files", "args": {"image_folder": root, "shuffle_seed": 1}},
            {"name": "read", "op": "read_file", "parallelism": 1},
            {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 2, "random": True,
             "args": {"crop_size": 224, "flip_probability": 0.5}},
            {"name": "normalize", "op": "map", "fn": "normalize", "parallelism": 1,
             "args": {"mean": MEAN, "std": STD, "layout": "chw"}},
            {"name": "batch", "op": "batch", "args": {"size": BATCH, "drop_last": False}},
            {"name": "prefetch", "op": "prefetch", "buffer": 4},
        ],
    }


def iterate(epochs, make_epoch):
    """images, first-batch time, last-batch time over `epochs` epochs."""
    images, first, last, first_images = 0, None, None, 0
    for epoch in range(epochs):
        for x, y in make_epoch(epoch):
            now = time.perf_counter()
            if first is None:
                first = now
                first_images = x.shape[0]
            images += x.shape[0]
            last = now
    return images, first, last, first_images


def child(args):
    start = time.perf_counter()
    if args.side == "loader":
        import pipetune

        loader = pipetune.Loader(args.config)

        def make_epoch(epoch):
            loader.set_epoch(epoch)
            return loader
    else:
        import torch
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision import datasets

        dataset = datasets.ImageFolder(args.data, transform=T.Compose([
            T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
        loader = DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=args.workers)
        torch.manual_seed(0)

        def make_epoch(epoch):
            return loader
    images, first, last, first_images = iterate(args.epochs, make_epoch)
    end = time.perf_counter()
    steady = (images - first_images) / (last - first) if last > first else 0.0
    print(json.dumps({"images": images, "steady_images_per_second": steady,
                      "images_per_second": images / (end - start)}))


def measure(side, args, workers=None, config=None):
    command = [sys.executable, os.path.abspath(__file__), "--child", side, "--data", args.data,
               "--epochs", str(args.epochs)]
    if workers is not None:
        command += ["--child-workers", str(workers)]
    if config is not None:
        command += ["--config", config]
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=env, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit("%s failed (status %d)" % (" ".join(command), status))
    result = json.loads(output.strip().splitlines()[-1])
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    result["images_per_cpu_second"] = result["images"] / result["cpu_seconds"]
    return result


def prepare(args):
    flat = os.path.join(args.out, "flat")
    subprocess.run([os.path.join(args.build, "examples/image/pipetune_make_images"), "--out", flat, "--count",
                    str(args.count), "--quiet"], check=True)
    files = sorted(f for f in os.listdir(flat) if f.endswith(".jpg"))
    for i, name in enumerate(files):
        folder = os.path.join(args.data, "class%d" % (i % 10))
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, name)
        if not os.path.exists(target):
            os.link(os.path.join(flat, name), target)
    config = os.path.join(args.out, "engine.json")
    with open(config, "w") as f:
        json.dump(engine_config(args.data), f, indent=2)
    return config


def line(label, r):
    return "%-28s %8.1f images/s steady  %8.1f whole run  %7.1f images/CPU-s  (%d images, %.1f CPU-s)" % (
        label, r["steady_images_per_second"], r["images_per_second"], r["images_per_cpu_second"], r["images"],
        r["cpu_seconds"])


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--workers", default="0,1,2,3")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--child")
    parser.add_argument("--child-workers", type=int, default=0)
    parser.add_argument("--data")
    parser.add_argument("--config")
    args = parser.parse_args()
    if args.child:
        args.side, args.workers = args.child, args.child_workers
        return child(args)
    args.build = os.path.abspath(args.build)
    args.out = os.path.join(root, "out", "loader_swap")
    args.data = os.path.join(args.out, "imagefolder")
    config = prepare(args)
    cores = sorted(os.sched_getaffinity(0))
    print("== %d images in 10 class folders, %d epoch(s) per run, cores %s" % (args.count, args.epochs, cores))
    best_loader, best_torch = None, None
    for round_ in range(args.rounds):
        r = measure("loader", args, config=config)
        print(line("round %d pipetune.Loader" % round_, r))
        if best_loader is None or r["steady_images_per_second"] > best_loader["steady_images_per_second"]:
            best_loader = r
        for w in [int(v) for v in args.workers.split(",")]:
            r = measure("dataloader", args, workers=w)
            r["workers"] = w
            print(line("round %d DataLoader w=%d" % (round_, w), r))
            if best_torch is None or r["steady_images_per_second"] > best_torch["steady_images_per_second"]:
                best_torch = r
    print(line("best pipetune.Loader", best_loader))
    print(line("best DataLoader (w=%d)" % best_torch["workers"], best_torch))
    print("loader_images_per_cpu_second_over_dataloader %.2f" %
          (best_loader["images_per_cpu_second"] / best_torch["images_per_cpu_second"]))
    print("loader_over_best_dataloader %.2f" %
          (best_loader["steady_images_per_second"] / best_torch["steady_images_per_second"]))


if __name__ == "__main__":
    main()
