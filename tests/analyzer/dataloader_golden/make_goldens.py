"""Records the golden DataLoader traces of tests/analyzer/dataloader_trace_test.cc:
real DataLoaders over a synthetic dataset of known costs, under `pipetune
profile`. README.md says what each case is.

    python3 make_goldens.py PIPETUNE [CASE...] # re-records every case here (or those named)
    python3 make_goldens.py --case NAME        # one case's program (what profile runs)

`webdataset_workers0` needs webdataset (the torch 2.x venv of
`scripts/setup.sh` has it): its 16 samples are read from a tar
shard made here, each spun (Spin) in a `.map`, batched by 4 in the pipeline
and loaded with batch_size=None.

Costs, per sample: `load` sleeps 2 ms and spins 1 ms of thread CPU; the
Compose runs transform[0]:Spin (0.5 ms of CPU) and transform[1]:Nap (a 1 ms
sleep). Per batch (4 samples) the loop's step sleeps 3 ms and spins 1 ms.
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 16
BATCH = 4
INTERVAL_MS = 50
KILL_AFTER = 6  # batches, in the second epoch

# case: (iterable, num_workers, epochs, shard with get_worker_info)
CASES = {
    "map_workers0": (False, 0, 3, False),
    "map_workers2_fork": (False, 2, 2, False),
    "iterable_workers0": (True, 0, 2, False),
    "iterable_workers2": (True, 2, 1, True),
    "iterable_workers2_unsharded": (True, 2, 1, False),
    "killed": (False, 0, 3, False),
    "no_batch": (False, 0, 0, False),
    "no_dataloader": None,
    "image_folder_preset": "image_folder",
    "webdataset_workers0": "webdataset",
}


def spin(ns):
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass


class Spin:
    def __call__(self, x):
        spin(500_000)
        return x * 2.0


class Nap:
    def __call__(self, x):
        time.sleep(0.001)
        return x + 1.0


def sample(i):
    import torch

    time.sleep(0.002)
    spin(1_000_000)
    return torch.full((3, 8, 8), float(i))


class TrainPreset:
    """Holds its transforms the way torchvision's reference recipe
    (references/classification/presets.py) does: a Compose in an attribute,
    the object itself called as a plain callable."""

    def __init__(self, crop_size, mean, std, flip_probability):
        from torchvision import transforms

        self.transforms = transforms.Compose([
            transforms.RandomResizedCrop(crop_size, scale=(0.25, 1.0)),
            transforms.RandomHorizontalFlip(flip_probability),
            transforms.ToTensor(),
            transforms.Normalize(mean=mean, std=std),
        ])

    def __call__(self, image):
        return self.transforms(image)


def run_image_folder():
    """An ImageFolder of 2 classes x 4 small JPEGs, the TrainPreset's
    transforms, shuffled batches of 3 with drop_last, 2 epochs."""
    from PIL import Image
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    with tempfile.TemporaryDirectory() as root:
        for label, name in enumerate(("cat", "dog")):
            os.makedirs(os.path.join(root, name))
            for i in range(4):
                color = (60 * i, 100 + 50 * label, 30)
                Image.new("RGB", (48 + 8 * i, 40), color).save(os.path.join(root, name, "%d.jpg" % i))
        dataset = ImageFolder(root, transform=TrainPreset(32, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 0.5))
        loader = DataLoader(dataset, batch_size=3, shuffle=True, drop_last=True, num_workers=0)
        for _ in range(2):
            for _batch in loader:
                time.sleep(0.003)
                spin(1_000_000)


def run_case(name):
    import torch
    from torch.utils.data import DataLoader, Dataset, IterableDataset
    from torchvision import transforms

    if CASES[name] is None:  # imports the DataLoader, builds none
        return
    if CASES[name] == "webdataset":
        run_webdataset()
        return
    if CASES[name] == "image_folder":
        run_image_folder()
        return
    iterable, workers, epochs, shard = CASES[name]
    compose = transforms.Compose([Spin(), Nap()])

    class Samples(Dataset):
        def __init__(self):
            self.transform = compose

        def __len__(self):
            return SAMPLES

        def __getitem__(self, i):
            return self.transform(sample(i)), i

    class Stream(IterableDataset):
        def __init__(self):
            self.transform = compose

        def __iter__(self):
            first, step = 0, 1
            info = torch.utils.data.get_worker_info() if shard else None
            if info is not None:
                first, step = info.id, info.num_workers
            for i in range(first, SAMPLES, step):
                yield self.transform(sample(i)), i

    kwargs = dict(batch_size=BATCH, num_workers=workers)
    if workers > 0:
        kwargs.update(multiprocessing_context="fork", persistent_workers=not iterable)
    loader = DataLoader(Stream() if iterable else Samples(), **kwargs)
    seen = 0
    for _ in range(epochs):
        for _batch in loader:
            time.sleep(0.003)
            spin(1_000_000)
            seen += 1
            if name == "killed" and seen == KILL_AFTER:
                time.sleep(4 * INTERVAL_MS / 1000)  # a snapshot holds every batch so far
                os.kill(os.getpid(), signal.SIGKILL)


def run_webdataset():
    import io

    import torch
    import webdataset as wds
    from torch.utils.data import DataLoader

    with tempfile.TemporaryDirectory() as tmp:
        shard = os.path.join(tmp, "shard-0.tar")
        with wds.TarWriter(shard) as out:
            for i in range(SAMPLES):
                data = io.BytesIO()
                torch.save(torch.full((3, 8, 8), float(i)), data)
                out.write({"__key__": "%04d" % i, "pth": data.getvalue(), "cls": i % 3})
        spin_map = Spin()

        def spin_sample(sample):
            return spin_map(sample[0]), sample[1]

        dataset = wds.WebDataset([shard], shardshuffle=False).decode().to_tuple("pth", "cls") \
            .map(spin_sample).batched(BATCH)
        for _batch in DataLoader(dataset, batch_size=None, num_workers=0):
            time.sleep(0.003)
            spin(1_000_000)


def record_all(pipetune, names):
    import importlib.util

    for name in names:
        if CASES[name] == "webdataset" and importlib.util.find_spec("webdataset") is None:
            print("%s: kept (%s has no webdataset)" % (name, sys.executable))
            continue
        out = os.path.join(HERE, name)
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace")
            env = dict(os.environ)
            for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
                env.pop(key, None)
            if name == "iterable_workers0":  # as torchrun would start rank 1 of 2
                env.update(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2")
            r = subprocess.run([pipetune, "profile", "--trace", trace, "--interval-ms", str(INTERVAL_MS), "--",
                                sys.executable, os.path.abspath(__file__), "--case", name], env=env)
            expected = 128 + signal.SIGKILL if name == "killed" else 0
            if r.returncode != expected:
                sys.exit("%s: profile exited %d, expected %d" % (name, r.returncode, expected))
            time.sleep(1)  # leftover workers end their traces
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            for path in glob.glob(trace + "*"):
                shutil.copy(path, out)
        print(name, sorted(os.listdir(out)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        run_case(sys.argv[2])
    elif len(sys.argv) >= 2 and all(name in CASES for name in sys.argv[2:]):
        record_all(os.path.abspath(sys.argv[1]), sys.argv[2:] or list(CASES))
    else:
        sys.exit(__doc__)
