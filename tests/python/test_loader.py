"""pipetune.Loader against torchvision on a small generated ImageFolder.
Usage: test_loader.py CASE PIPETUNE. Exit 77 when this Python has no
torch/torchvision (the test is skipped). The package is imported from
<build>/python, beside the pipetune binary's folder.

Cases:
  pixels   the eval recipe (Resize, CenterCrop with and without padding,
           ToTensor, Normalize) gives torchvision's tensors, shapes, dtypes
           and labels; every image exactly once per epoch; drop_last; len()
  augment  the train recipe (RandomResizedCrop + flip): per-channel mean and
           std of two epochs beside the DataLoader's; epochs differ, and the
           same seed and epoch repeat
  ddp      2 ranks (torch.multiprocessing.spawn, gloo on 127.0.0.1), a Loader
           each: disjoint shards covering the dataset, two epochs
  partial  100 partial epochs: resident memory flat, no thread left behind
  traced   `pipetune profile -- python3 train.py` with a Loader: the trace has
           the engine's stages and the loop's steps; report, tune, baseline
           and check work on it; tune predicts no more than the loop's step
           can take
  errors   a bad config is a ValueError naming file, stage and key
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
    print("skipped: %s has no torch/torchvision" % sys.executable)
    sys.exit(77)

CLASSES = {"bee": 9, "cat": 7, "dog": 8}  # 24 images, class folders out of order on disk
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def make_images(root):
    """Small distinct JPEGs, with a nested folder and an upper-case suffix
    (torchvision lists both) and a text file it skips."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    for label, (name, count) in enumerate(sorted(CLASSES.items())):
        for i in range(count):
            folder = os.path.join(root, name, "sub" if i == 0 else "")
            os.makedirs(folder, exist_ok=True)
            height, width = 36 + 3 * i, 50 + label
            base = rng.integers(0, 256, size=(1, 1, 3))
            noise = rng.integers(-60, 60, size=(height, width, 3))
            pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, "%d.%s" % (i, "JPG" if i == 1 else "jpg")), quality=92)
    with open(os.path.join(root, "bee", "notes.txt"), "w") as f:
        f.write("not an image")


def config(root, stages, batch=5, **batch_args):
    head = [{"name": "files", "op": "list_files", "args": {"image_folder": root, "shuffle_seed": 11}},
            {"name": "read", "op": "read_file"},
            # deterministic: two workers hand decoded images on in the files' order,
            # so that the same seed and epoch give the same batches
            {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 2, "args": {"deterministic": True}}]
    tail = [{"name": "normalize", "op": "map", "fn": "normalize", "args": {"mean": MEAN, "std": STD}},
            {"name": "batch", "op": "batch", "args": dict(size=batch, **batch_args)},
            {"name": "again", "op": "repeat", "args": {"count": 5}},
            {"name": "prefetch", "op": "prefetch", "buffer": 2}]
    return {"name": "loader_test", "stages": head + stages + tail}


EVAL = [{"name": "resize", "op": "map", "fn": "resize", "args": {"size": 24}},
        {"name": "crop", "op": "map", "fn": "center_crop", "args": {"size": 20}}]
PADDED = [{"name": "resize", "op": "map", "fn": "resize", "args": {"size": 24}},
          {"name": "crop", "op": "map", "fn": "center_crop", "args": {"height": 27, "width": 22}}]


def reference(root, transform):
    """torchvision's ImageFolder through `transform`: (tensors, labels)."""
    from torchvision import datasets

    dataset = datasets.ImageFolder(root, transform=transform)
    return [dataset[i][0] for i in range(len(dataset))], [dataset[i][1] for i in range(len(dataset))]


def match(images, labels, expected, expected_labels, tolerance):
    """The index of the reference image each batch image is (nearest, within
    `tolerance` per pixel), checking its label; fails on anything else."""
    import torch

    stack = torch.stack(expected)
    found = []
    for image, label in zip(images, labels.tolist()):
        distance = (stack - image).abs().flatten(1).max(dim=1).values
        best = int(distance.argmin())
        if float(distance[best]) > tolerance:
            fail("an image matches no torchvision image (nearest differs by %.3f)" % float(distance[best]))
        if label != expected_labels[best]:
            fail("image %d has label %d, its folder's is %d" % (best, label, expected_labels[best]))
        found.append(best)
    return found


def epoch_indices(loader, expected, expected_labels, tolerance, shape=None):
    import torch

    indices = []
    for images, labels in loader:
        if images.dtype != torch.float32 or labels.dtype != torch.int64:
            fail("dtypes %s, %s; expected float32 images and int64 labels" % (images.dtype, labels.dtype))
        if shape is not None and tuple(images.shape[1:]) != shape:
            fail("image shape %s, torchvision's %s" % (tuple(images.shape[1:]), shape))
        indices += match(images, labels, expected, expected_labels, tolerance)
    return indices


# Two levels of 255 after Normalize: the resize's rounding against PIL's.
TOLERANCE = 2.5 / 255 / min(STD)


def case_pixels(tmp, pipetune):
    import pipetune as pt
    from torchvision import transforms

    root = os.path.join(tmp, "data")
    make_images(root)
    total = sum(CLASSES.values())
    for stages, crop in ((EVAL, transforms.CenterCrop(20)), (PADDED, transforms.CenterCrop((27, 22)))):
        expected, labels = reference(root, transforms.Compose(
            [transforms.Resize(24), crop, transforms.ToTensor(), transforms.Normalize(MEAN, STD)]))
        loader = pt.Loader(config(root, stages))
        if len(loader) != (total + 4) // 5:
            fail("len() %d, expected %d batches of 5 for %d images" % (len(loader), (total + 4) // 5, total))
        for epoch in range(2):
            seen = epoch_indices(loader, expected, labels, TOLERANCE, tuple(expected[0].shape))
            if sorted(seen) != list(range(total)):
                fail("epoch %d: not every image exactly once: %s" % (epoch, sorted(seen)))
        loader.close()
    dropped = pt.Loader(config(root, EVAL), drop_last=True)
    sizes = [len(labels) for _, labels in dropped]
    if len(dropped) != total // 5 or sizes != [5] * (total // 5):
        fail("drop_last=True: len() %d, batches %s" % (len(dropped), sizes))
    print("ok: torchvision's pixels, shapes, dtypes and labels; every image once per epoch; drop_last")


def channel_stats(batches):
    import torch

    pixels = torch.cat([images.permute(1, 0, 2, 3).flatten(1) for images in batches], dim=1)
    return pixels.mean(dim=1), pixels.std(dim=1)


def case_augment(tmp, pipetune):
    import torch
    import pipetune as pt
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    root = os.path.join(tmp, "data")
    make_images(root)
    crop = [{"name": "augment", "op": "map", "fn": "random_crop_flip", "args": {"size": 24}, "random": True}]
    loader = pt.Loader(config(root, crop, batch=8))
    ours = [[images.clone() for images, _ in loader] for _ in range(2)]
    theirs_set = datasets.ImageFolder(root, transform=transforms.Compose([
        transforms.RandomResizedCrop(24), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(MEAN, STD)]))
    torch.manual_seed(0)
    theirs = [images for _ in range(2) for images, _ in DataLoader(theirs_set, batch_size=8, shuffle=True)]
    (mean, std), (their_mean, their_std) = channel_stats(ours[0] + ours[1]), channel_stats(theirs)
    if (mean - their_mean).abs().max() > 0.1 or ((std - their_std).abs() / their_std).max() > 0.05:
        fail("two epochs' channel mean %s std %s; the DataLoader's %s %s" %
             (mean.tolist(), std.tolist(), their_mean.tolist(), their_std.tolist()))
    if torch.equal(ours[0][0], ours[1][0]):
        fail("epochs 0 and 1 gave the same first batch: no reshuffle or new crops")
    again = pt.Loader(config(root, crop, batch=8))
    again.set_epoch(1)
    if not torch.equal(next(iter(again))[0], ours[1][0]):
        fail("the same seed and epoch gave another batch")
    print("ok: channel mean %s std %s beside the DataLoader's %s %s" %
          ([round(v, 3) for v in mean.tolist()], [round(v, 3) for v in std.tolist()],
           [round(v, 3) for v in their_mean.tolist()], [round(v, 3) for v in their_std.tolist()]))


def ddp_rank(rank, world, root, out, port):
    import torch
    import torch.distributed as dist
    import pipetune as pt

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    loader = pt.Loader(config(root, EVAL))  # the shard from torch.distributed
    epochs = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        epochs.append([(images.clone(), labels.clone()) for images, labels in loader])
    torch.save({"rank": loader.rank, "world": loader.world_size, "epochs": epochs}, out % rank)
    dist.barrier()
    dist.destroy_process_group()


def case_ddp(tmp, pipetune):
    import socket
    import torch
    import torch.multiprocessing as mp
    from torchvision import transforms

    root = os.path.join(tmp, "data")
    make_images(root)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = os.path.join(tmp, "rank%d.pt")
    mp.spawn(ddp_rank, args=(2, root, out, port), nprocs=2, join=True)
    expected, labels = reference(root, transforms.Compose(
        [transforms.Resize(24), transforms.CenterCrop(20), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]))
    ranks = [torch.load(out % r) for r in range(2)]
    if [(r["rank"], r["world"]) for r in ranks] != [(0, 2), (1, 2)]:
        fail("ranks saw %s, expected (0, 2) and (1, 2) from torch.distributed" %
             [(r["rank"], r["world"]) for r in ranks])
    for epoch in range(2):
        shards = [[i for images, batch_labels in r["epochs"][epoch]
                   for i in match(images, batch_labels, expected, labels, TOLERANCE)] for r in ranks]
        if set(shards[0]) & set(shards[1]):
            fail("epoch %d: both ranks got images %s" % (epoch, sorted(set(shards[0]) & set(shards[1]))))
        if sorted(shards[0] + shards[1]) != list(range(len(expected))):
            fail("epoch %d: the shards do not cover the dataset once: %s" % (epoch, sorted(shards[0] + shards[1])))
    print("ok: 2 ranks, disjoint shards of %d and %d images covering all %d, two epochs" %
          (len(shards[0]), len(shards[1]), len(expected)))


def resident_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def threads():
    return len(os.listdir("/proc/self/task"))


def case_partial(tmp, pipetune):
    import pipetune as pt

    root = os.path.join(tmp, "data")
    make_images(root)
    before = threads()
    loader = pt.Loader(config(root, EVAL, batch=2))
    rss = []
    for epoch in range(100):
        for step, (images, labels) in enumerate(loader):
            if step == 2:
                break
        if threads() != before:
            fail("after the break of epoch %d, %d threads run; %d before the Loader" % (epoch, threads(), before))
        rss.append(resident_kib())
    growth = rss[-1] - rss[9]
    if growth > 8 * 1024:
        fail("resident memory grew %d KiB from partial epoch 10 to 100 (%s)" % (growth, rss[::10]))
    loader.close()
    del loader
    if threads() != before:
        fail("%d threads after close(), %d before" % (threads(), before))
    print("ok: 100 partial epochs, resident %d -> %d KiB, no thread left" % (rss[9], rss[-1]))


TRAIN = textwrap.dedent("""
    import sys, time
    import pipetune
    loader = pipetune.Loader(sys.argv[1])
    for epoch in range(3):
        for images, labels in loader:
            time.sleep(0.004)  # the training step
""")


def case_traced(tmp, pipetune):
    root = os.path.join(tmp, "data")
    make_images(root)
    path = os.path.join(tmp, "loader.json")
    with open(path, "w") as f:
        json.dump(config("data", EVAL, batch=2), f)
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    traces = []
    for run in range(3):
        trace = os.path.join(tmp, "run%d.trace" % run)
        r = subprocess.run([pipetune, "profile", "--trace", trace, "--", sys.executable, script, path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail("profile exited %d: %s" % (r.returncode, r.stdout + r.stderr))
        traces.append(trace)
    r = subprocess.run([pipetune, "report", "--format", "json", traces[0]], capture_output=True, text=True)
    if r.returncode != 0:
        fail("report exited %d: %s" % (r.returncode, r.stderr))
    report = json.loads(r.stdout)
    names = {stage["name"] for stage in report.get("stages", [])}
    if not {"files", "read", "decode", "resize", "crop", "normalize", "batch", "prefetch"} <= names:
        fail("the trace's stages are %s, not the engine's" % sorted(names))
    if "again" in names:
        fail("the Loader ran the config's repeat stage")
    if "dataloader" in report:
        fail("a Loader's trace read as a DataLoader's")
    # The loop sleeps 4 ms per batch and the engine keeps ahead of it: the
    # consumer's recorded waits are a small share of the window.
    stall = report.get("stall_fraction")
    if stall is None or stall > 0.5:
        fail("the consumer's stall fraction is %r: its waits and steps were not recorded" % stall)
    tuned = os.path.join(tmp, "tuned.json")
    r = subprocess.run([pipetune, "tune", traces[0], "-o", tuned, "--format", "json"], capture_output=True,
                       text=True)
    if r.returncode != 0 or not os.path.exists(tuned):
        fail("tune exited %d: %s" % (r.returncode, r.stdout + r.stderr))
    # The loop's step (a 4 ms sleep, and the loop's own Python) is the
    # demand: the plan promises no more batches/s than the loop can take,
    # however many workers could decode more (the config states no step).
    plan = json.loads(r.stdout)
    most = 1 / 0.004
    if report.get("demand_throughput") is None or not report["demand_throughput"] <= most:
        fail("report's demand is %r, not the loop's measured rate (under %.0f/s)" %
             (report.get("demand_throughput"), most))
    if not plan["predicted_throughput"] <= min(most, report["demand_throughput"] * 1.001):
        fail("tune predicts %.1f batches/s, more than the loop's step can take (%.1f/s measured, at most %.0f/s)"
             % (plan["predicted_throughput"], report["demand_throughput"], most))
    base = os.path.join(tmp, "base.json")
    for command in (["baseline", "-o", base, traces[0], traces[1]], ["check", "--baseline", base, traces[2]]):
        r = subprocess.run([pipetune] + command, capture_output=True, text=True)
        if r.returncode not in (0, 1):
            fail("%s exited %d: %s" % (command[0], r.returncode, r.stdout + r.stderr))
    print("ok: a Loader's run traced; report, tune, baseline and check read it")


def case_errors(tmp, pipetune):
    import pipetune as pt

    root = os.path.join(tmp, "data")
    make_images(root)
    bad = config(root, [{"name": "crop", "op": "map", "fn": "center_crop", "args": {"size": 0}}])
    path = os.path.join(tmp, "bad.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    for given, what in ((path, "bad.json"), (bad, "crop")):
        try:
            pt.Loader(given)
        except ValueError as error:
            if what not in str(error) or "args.size" not in str(error):
                fail("the error does not name %s and args.size: %s" % (what, error))
        else:
            fail("a center_crop of size 0 was accepted")
    empty = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(empty, "nothing"))
    try:
        pt.Loader(config(empty, EVAL))
    except ValueError as error:
        if "nothing" not in str(error) or "image_folder" not in str(error):
            fail("an empty class folder's error does not name it: %s" % error)
    else:
        fail("a class folder without images was accepted")
    print("ok: bad configs are ValueErrors naming the file, stage and key")


def main():
    case, pipetune = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(pipetune))), "python"))
    with tempfile.TemporaryDirectory() as tmp:
        globals()["case_" + case](tmp, pipetune)


if __name__ == "__main__":
    main()
