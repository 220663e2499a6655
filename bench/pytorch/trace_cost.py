"""What `pipetune profile` costs a training loop, per kind of input
pipeline, as traced over untraced images/s measured side by side
(docs/benchmarks-pytorch.md, "What tracing costs, per kind of pipeline").
From the repository root, with the torch 2.x venv:

    ~/.local/share/pipetune/torch2/bin/python3 bench/pytorch/trace_cost.py [BUILD_DIR] [--pairs N] [--kinds a,b]
        [--images N] [--epochs E] [--instructions]

The data are made once (JPEGs of 320x240, natural-looking gradients with
noise, in 4 class folders; the same images as 8 webdataset tar shards and
as an HF `datasets` dataset saved to disk). Then five scripts, each the
way its library's users write it, all decoding with PIL and cropping,
flipping and normalizing to 3x224x224 in batches of 32 with 2 workers:

- map: torchvision's ImageFolder with a Compose, DataLoader(shuffle=True);
- iterable: an IterableDataset over the file list, sharded by
  get_worker_info(), with the same Compose as its `transform`;
- webdataset: wds.WebDataset(8 shards, shardshuffle).shuffle(256)
  .decode("pil").to_tuple("jpg", "cls").map_tuple(Compose, int)
  .batched(32), batched inside the workers (batch_size=None);
- hf: load_from_disk, an Image feature, set_transform(fn) where fn
  converts each image and applies the Compose (HF's image-classification
  example), the example's collate_fn;
- loader: pipetune.Loader on the same folder (jpeg_decode with 2 threads,
  random_crop_flip 224, normalize, batch 32).

Each pair runs one script untraced (python3) and traced (`pipetune
profile`), the order flipped every pair so that a drift of the machine's
load falls on both sides. The script times its own loop (images over
seconds from iter() to the last batch, two epochs), so Python's and
torch's start-up are left out of both; it also counts the CPU its loop
took (its own and its ended workers', getrusage), per image. Printed per
kind: every pair's figures, and the medians over the pairs of traced /
untraced images/s and of untraced / traced CPU per image. On a machine
whose cores other programs share, images/s moves by tens of percent from
run to run whatever is traced; CPU per image moves far less, and where
the loop keeps every core busy it is what throughput follows.

With --instructions, each kind whose samples are read in worker processes
(map, iterable, webdataset, hf) runs once untraced and once traced under
valgrind's callgrind (Debian's `valgrind`), --images 128 and one epoch by
default, and the instructions of the workers' sample-reading threads are
counted from their fork on (callgrind zeroes its counts in
PyOS_AfterFork_Child): a count that does not move with the host's load,
unlike seconds. The tracer's sampler thread is not in it: its work is per
second, not per sample, and valgrind stretches the seconds. It leaves out the
kernel's time (page faults, system calls) and what cache misses cost, so
it bounds the recording's own work, not the whole of what tracing costs.
A pair takes several minutes.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMMON = textwrap.dedent("""
    import os, random, resource, sys, time
    import torch
    from torchvision import transforms

    # The same shuffle and the same random crops in both runs of a pair:
    # traced and untraced do the same work, so that what differs is tracing.
    torch.manual_seed(0)
    random.seed(0)

    MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    TRAIN = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                transforms.ToTensor(), transforms.Normalize(MEAN, STD)])

    def cpu_seconds():
        # This process and its ended children: the workers, joined at each epoch's end.
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def timed_epochs(loader, epochs):
        images = 0
        begin, cpu = time.perf_counter(), cpu_seconds()
        for epoch in range(epochs):
            for batch in loader:
                images += len(batch[1] if isinstance(batch, (list, tuple)) else batch["labels"])
        seconds, cpu = time.perf_counter() - begin, cpu_seconds() - cpu
        print("images_per_second %.3f cpu_ms_per_image %.4f" % (images / seconds, cpu * 1e3 / images))
""")

SCRIPTS = {
    "map": """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        if __name__ == "__main__":
            data, epochs = sys.argv[1], int(sys.argv[2])
            dataset = ImageFolder(os.path.join(data, "images"), transform=TRAIN)
            timed_epochs(DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2), epochs)
    """,
    "iterable": """
        import glob, random
        from PIL import Image
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Files(IterableDataset):
            def __init__(self, root, transform):
                self.files = sorted(glob.glob(os.path.join(root, "*", "*.jpg")))
                self.transform = transform
                self.epoch = 0
            def __iter__(self):
                info = get_worker_info()
                files = list(self.files)
                random.Random(self.epoch).shuffle(files)
                self.epoch += 1
                if info is not None:
                    files = files[info.id::info.num_workers]
                for path in files:
                    with Image.open(path) as image:
                        image = image.convert("RGB")
                    yield self.transform(image), int(os.path.basename(os.path.dirname(path))[1:])

        if __name__ == "__main__":
            data, epochs = sys.argv[1], int(sys.argv[2])
            dataset = Files(os.path.join(data, "images"), TRAIN)
            timed_epochs(DataLoader(dataset, batch_size=32, num_workers=2), epochs)
    """,
    "webdataset": """
        import glob
        import webdataset as wds
        from torch.utils.data import DataLoader
        if __name__ == "__main__":
            data, epochs = sys.argv[1], int(sys.argv[2])
            urls = sorted(glob.glob(os.path.join(data, "shards", "*.tar")))
            dataset = (wds.WebDataset(urls, shardshuffle=len(urls)).shuffle(256).decode("pil")
                       .to_tuple("jpg", "cls").map_tuple(TRAIN, int).batched(32))
            timed_epochs(DataLoader(dataset, batch_size=None, num_workers=2), epochs)
    """,
    "hf": """
        from datasets import load_from_disk
        from torch.utils.data import DataLoader

        def preprocess(batch):
            batch["pixel_values"] = [TRAIN(image.convert("RGB")) for image in batch["image"]]
            del batch["image"]
            return batch

        def collate(examples):
            return {"pixel_values": torch.stack([e["pixel_values"] for e in examples]),
                    "labels": torch.tensor([e["label"] for e in examples])}

        if __name__ == "__main__":
            data, epochs = sys.argv[1], int(sys.argv[2])
            dataset = load_from_disk(os.path.join(data, "hf"))
            dataset.set_transform(preprocess)
            loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2, collate_fn=collate)
            timed_epochs(loader, epochs)
    """,
    "loader": """
        import pipetune
        if __name__ == "__main__":
            data, epochs = sys.argv[1], int(sys.argv[2])
            loader = pipetune.Loader(os.path.join(data, "loader.json"))
            timed_epochs(loader, epochs)
            loader.close()
    """,
}


def make_data(data, count):
    """`count` JPEGs in 4 class folders, the same as 8 tar shards, as an HF
    dataset, and the Loader's config."""
    import io
    import numpy as np
    import webdataset as wds
    from datasets import Dataset, Features, ClassLabel, Image as HfImage
    from PIL import Image

    rng = np.random.default_rng(3)
    paths, labels = [], []
    y, x = np.mgrid[0:240, 0:320]
    for i in range(count):
        label = i % 4
        folder = os.path.join(data, "images", "c%d" % label)
        os.makedirs(folder, exist_ok=True)
        phase = rng.uniform(0, 6.28, 3)
        base = np.stack([np.sin(x / (20 + 7 * c) + y / (31 + 5 * c) + phase[c]) for c in range(3)], -1)
        pixels = np.clip(127 + 90 * base + rng.normal(0, 12, (240, 320, 3)), 0, 255).astype(np.uint8)
        paths.append(os.path.join(folder, "%05d.jpg" % i))
        labels.append(label)
        Image.fromarray(pixels).save(paths[-1], quality=90)
    os.makedirs(os.path.join(data, "shards"))
    for s in range(8):
        with wds.TarWriter(os.path.join(data, "shards", "shard-%d.tar" % s)) as out:
            for i in range(s, count, 8):
                with open(paths[i], "rb") as f:
                    out.write({"__key__": "%05d" % i, "jpg": f.read(), "cls": str(labels[i])})
    features = Features({"image": HfImage(), "label": ClassLabel(num_classes=4)})
    images = []
    for path in paths:  # the bytes in the Arrow table, as a dataset from the Hub has them
        with open(path, "rb") as f:
            images.append({"bytes": f.read(), "path": None})
    Dataset.from_dict({"image": images, "label": labels}, features=features).save_to_disk(os.path.join(data, "hf"))
    config = {"name": "trace_cost", "stages": [
        {"name": "files", "op": "list_files", "args": {"image_folder": os.path.join(data, "images"),
                                                       "shuffle_seed": 5}},
        {"name": "read", "op": "read_file"},
        {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 2},
        {"name": "augment", "op": "map", "fn": "random_crop_flip", "args": {"size": 224}, "random": True},
        {"name": "normalize", "op": "map", "fn": "normalize",
         "args": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}},
        {"name": "batch", "op": "batch", "args": {"size": 32}},
        {"name": "prefetch", "op": "prefetch", "buffer": 2}]}
    with open(os.path.join(data, "loader.json"), "w") as f:
        json.dump(config, f)


def measure(cmd, env):
    """(images/s, CPU ms per image) as the script measured its loop."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    for line in r.stdout.splitlines():
        if line.startswith("images_per_second "):
            fields = line.split()
            return float(fields[1]), float(fields[3])
    sys.exit("no images_per_second line from: %s\n%s" % (" ".join(cmd), r.stdout))


def main_thread_count(path):
    """The instructions of a process's first thread (the one that fetches
    the samples in a worker) in its callgrind output file."""
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    return 0


def worker_instructions(cmd, env, log):
    """The user-space instructions of `cmd`'s forked children (the
    DataLoader's workers), each counted from its fork, under callgrind: of
    their first thread only, which reads and transforms the samples. The
    tracer's sampler thread is left out: under valgrind a run takes tens
    of times its seconds, and the sampler's work is per second (its CPU a
    second is measured natively, see the docs)."""
    valgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--zero-before=PyOS_AfterFork_Child",
                "--separate-threads=yes", "--callgrind-out-file=" + log + ".%p", "--log-file=" + log + ".log.%p"]
    subprocess.run(valgrind + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                   check=True)
    folder, stem = os.path.split(log)
    logs = {}  # pid -> (its Command line, its parent's pid, its count)
    for name in os.listdir(folder):
        if name.startswith(stem + ".log."):
            fields = {}
            with open(os.path.join(folder, name)) as f:
                for line in f:
                    key, _, value = line.partition("== ")[2].partition(":")
                    fields.setdefault(key.strip(), value.strip())
            pid = name.rsplit(".", 1)[1]
            logs[pid] = (fields.get("Command"), fields.get("Parent PID"), main_thread_count(log + "." + pid + "-01"))
    # A fork runs its parent's command; a program valgrind started has its own.
    counts = [n for command, parent, n in logs.values() if parent in logs and logs[parent][0] == command]
    total, workers = sum(counts), len(counts)
    if workers == 0:
        sys.exit("no forked worker counted for: %s (is valgrind installed?)" % " ".join(cmd))
    return total, workers


def instructions(pipetune, tmp, env, kinds):
    data = os.path.join(tmp, "data")
    make_data(data, int(option("--images", "128")))
    epochs = option("--epochs", "1")
    print("== workers' instructions, untraced / traced, one run each under callgrind")
    for kind in kinds:
        if kind == "loader":
            print("loader     (no worker processes: its threads run in the script's process; not counted)")
            continue
        script = os.path.join(tmp, "train_%s.py" % kind)
        with open(script, "w") as f:
            f.write(COMMON + textwrap.dedent(SCRIPTS[kind]))
        plain = [sys.executable, script, data, epochs]
        untraced, n = worker_instructions(plain, env, os.path.join(tmp, kind + "-untraced"))
        traced, m = worker_instructions([pipetune, "profile", "--trace", os.path.join(tmp, kind + ".trace"), "--"]
                                        + plain, env, os.path.join(tmp, kind + "-traced"))
        print("%-10s untraced %.4g instructions (%d workers), traced %.4g (%d): %.4f" %
              (kind, untraced, n, traced, m, untraced / traced), flush=True)


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    args = [a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and not (sys.argv[i - 1].startswith("--") and sys.argv[i - 1] != "--instructions")]
    build = os.path.abspath(args[0] if args else os.path.join(ROOT, "build"))
    pairs = int(option("--pairs", "4"))
    kinds = option("--kinds", ",".join(SCRIPTS)).split(",")
    epochs = int(option("--epochs", "2"))
    pipetune = os.path.join(build, "cli", "pipetune")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "python")  # `import pipetune` for the Loader's script, both sides
    with tempfile.TemporaryDirectory(prefix="pipetune-trace-cost-") as tmp:
        if "--instructions" in sys.argv:
            instructions(pipetune, tmp, env, kinds)
            return
        data = os.path.join(tmp, "data")
        make_data(data, int(option("--images", "640")))
        summary = []
        for kind in kinds:
            script = os.path.join(tmp, "train_%s.py" % kind)
            with open(script, "w") as f:
                f.write(COMMON + textwrap.dedent(SCRIPTS[kind]))
            plain = [sys.executable, script, data, str(epochs)]
            rows = []
            for pair in range(pairs):
                trace = os.path.join(tmp, "%s%d.trace" % (kind, pair))
                traced_cmd = [pipetune, "profile", "--trace", trace, "--"] + plain
                if pair % 2 == 0:
                    untraced = measure(plain, env)
                    traced = measure(traced_cmd, env)
                else:
                    traced = measure(traced_cmd, env)
                    untraced = measure(plain, env)
                rows.append((untraced, traced))
                print("%-10s pair %d: untraced %7.1f images/s %6.2f ms CPU each; traced %7.1f images/s %6.2f ms"
                      " (%.3f, %.3f)" % (kind, pair, untraced[0], untraced[1], traced[0], traced[1],
                                         traced[0] / untraced[0], untraced[1] / traced[1]), flush=True)
            throughput = [t[0] / u[0] for u, t in rows]
            cpu = [u[1] / t[1] for u, t in rows]
            summary.append((kind, statistics.median(throughput), min(throughput), max(throughput),
                            statistics.median(cpu), min(cpu), max(cpu)))
        print("== traced / untraced, median of %d pairs (min, max): images/s, and untraced / traced CPU per image"
              % pairs)
        for row in summary:
            print("%-10s images/s %.3f (%.3f, %.3f)   CPU %.3f (%.3f, %.3f)" % row)

if __name__ == "__main__":
    main()
