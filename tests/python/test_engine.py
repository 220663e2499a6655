"""What a DataLoader's trace records of its dataset and transforms, and
`pipetune tune TRACE --engine` on real runs (docs/pytorch.md, "The engine in
place of the DataLoader"). Usage: test_engine.py CASE PIPETUNE.
Exit 77 when this Python has no torch/torchvision (the test is skipped), and
for `swap` while the engine does not yet list an ImageFolder (issue 30's
engine half: list_files image_folder)."""
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from _common import fail, run

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
    print("skipped: %s has no torch/torchvision" % sys.executable)
    sys.exit(77)

CLASSES = ("ant", "bee", "cat")
PER_CLASS = 4
BATCH = 4

# A training script as torchvision's reference recipe writes it: the
# transforms held by a preset object (references/classification/presets.py
# keeps `self.transforms = T.Compose([...])` and is called as a function;
# it makes tensors with PILToTensor + ConvertImageDtype), here our own small
# one. EXTRA is put into the Compose's list.
SCRIPT = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms as T
    from torchvision.datasets import ImageFolder

    class Jitter:
        def __call__(self, image):
            return image

    class Preset:
        def __init__(self, size, extra):
            steps = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()] + extra
            steps += [T.PILToTensor(), T.ConvertImageDtype(torch.float),
                      T.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))]
            self.transforms = T.Compose(steps)

        def __call__(self, image):
            return self.transforms(image)

    class Squares(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            return torch.zeros(3, 4, 4), i

    if __name__ == "__main__":
        dataset = ImageFolder({root!r}, transform=Preset(32, {extra}))
        if {custom_dataset}:
            dataset = Squares()
        loader = DataLoader(dataset, batch_size={batch}, shuffle=True, num_workers=0)
        for epoch in range(2):
            for images, labels in loader:
                time.sleep(0.002)
""")




def make_folder(tmp):
    """CLASSES x PER_CLASS small JPEGs of different sizes in root/<class>/."""
    from PIL import Image

    root = os.path.join(tmp, "images")
    for label, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root, name))
        for i in range(PER_CLASS):
            image = Image.new("RGB", (56 + 8 * i, 48), (40 * i, 80 * label, 120))
            image.save(os.path.join(root, name, "%02d.jpg" % i), quality=90)
    return root


def profile(pipetune, tmp, extra="[]", custom_dataset=False):
    root = make_folder(tmp)
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT.format(root=root, extra=extra, custom_dataset=custom_dataset, batch=BATCH))
    trace = os.path.join(tmp, "train.trace")
    r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, script])
    if r.returncode != 0:
        fail("profile exited %d" % r.returncode, r)
    return trace, root


def bootstrap_dir(pipetune):
    return os.path.join(os.path.dirname(pipetune), "..", "python")


def case_record(pipetune, tmp):
    """What the record holds, from the recorder's own description of datasets
    built here (no run needed): a wrapper's Compose found through its
    attribute, nested Composes flattened, DatasetFolder's extensions and
    loader, and what is not a folder."""
    sys.path.insert(0, bootstrap_dir(pipetune))
    import torch
    from pipetune import _dataset
    from torch.utils.data import DataLoader, Dataset, DistributedSampler
    from torchvision import transforms as T
    from torchvision.datasets import DatasetFolder, ImageFolder
    from torchvision.datasets.folder import pil_loader

    root = make_folder(tmp)

    class Preset:
        def __init__(self):
            self.crop_size = 32
            self.transforms = T.Compose([T.Resize(40), T.Compose([T.CenterCrop((32, 24)), T.PILToTensor(),
                                                                  T.ConvertImageDtype(torch.float)]),
                                         T.Normalize((0.5,), (0.25,))])

        def __call__(self, image):
            return self.transforms(image)

    record = _dataset.describe_dataset(ImageFolder(root, transform=Preset()))
    expected = {"class": "ImageFolder", "module": "torchvision.datasets.folder", "base": "ImageFolder",
                "root": os.path.abspath(root), "loader": "torchvision.datasets.folder.default_loader",
                "classes": len(CLASSES), "samples": len(CLASSES) * PER_CLASS, "target_transform": None,
                "transform_holder": "Preset.transforms"}
    for key, value in expected.items():
        if record.get(key) != value:
            fail("record[%r] = %r, expected %r" % (key, record.get(key), value))
    if ".jpg" not in record["extensions"]:
        fail("ImageFolder's extensions: %r" % record["extensions"])
    got = [(t["name"], t["params"]) for t in record["transforms"]]
    # Resize's antialias is recorded as the object holds it, here its
    # default: None in torchvision 0.14 (Debian's), True from 0.17 on.
    antialias = inspect.signature(T.Resize).parameters["antialias"].default
    want = [("Resize", {"size": 40, "max_size": None, "interpolation": "bilinear", "antialias": antialias}),
            ("CenterCrop", {"size": [32, 24]}), ("PILToTensor", {}), ("ConvertImageDtype", {"dtype": "torch.float32"}),
            ("Normalize", {"mean": [0.5], "std": [0.25], "inplace": False})]
    if got != want:
        fail("transforms: %r\nexpected %r" % (got, want))
    json.dumps(record, allow_nan=False)  # what the trace holds must be JSON

    folder = DatasetFolder(root, loader=pil_loader, extensions=".jpg", transform=[T.ToTensor()],
                           target_transform=lambda y: y + 1)
    record = _dataset.describe_dataset(folder)
    if (record["base"], record["extensions"], record["loader"], record["target_transform"]) != \
            ("DatasetFolder", [".jpg"], "torchvision.datasets.folder.pil_loader", "case_record.<locals>.<lambda>"):
        fail("DatasetFolder: %r" % record)
    if [t["name"] for t in record["transforms"]] != ["ToTensor"]:
        fail("a list of transforms: %r" % record["transforms"])

    # A wrapper holding two Composes: which it calls cannot be told, so it is one opaque transform.
    class Two:
        def __init__(self):
            self.a = T.Compose([T.ToTensor()])
            self.b = T.Compose([T.ToTensor()])

        def __call__(self, image):
            return self.b(self.a(image))

    record = _dataset.describe_dataset(ImageFolder(root, transform=Two()))
    if record["transform_holder"] is not None or [t["name"] for t in record["transforms"]] != ["Two"]:
        fail("an ambiguous wrapper: %r" % record)

    class Plain(Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return i

    record = _dataset.describe_dataset(Plain())
    if record["base"] is not None or record["class"] != "Plain" or record["transforms"] != []:
        fail("a dataset of the program's own: %r" % record)
    folder = ImageFolder(root)
    checks = [(DataLoader(folder, shuffle=True), True), (DataLoader(folder), False),
              (DataLoader(folder, sampler=DistributedSampler(folder, num_replicas=2, rank=0, shuffle=False)), False)]
    for loader, shuffles in checks:
        if _dataset.shuffles(loader) is not shuffles:
            fail("shuffle of %s: expected %s" % (type(loader.sampler).__name__, shuffles))


def case_missing_op(pipetune, tmp):
    """A recipe with AutoAugment and a class of the script's own, inside the
    preset: exit 2 naming both, nothing written."""
    trace, _ = profile(pipetune, tmp, extra="[T.AutoAugment(), Jitter()]")
    out = os.path.join(tmp, "engine.json")
    r = run([pipetune, "tune", trace, "--engine", "-o", out])
    for text in ("the engine has no op for 2 of the DataLoader's transforms (Preset.transforms)",
                 "transform[2] AutoAugment (torchvision.transforms.autoaugment): the engine has no op for it",
                 "transform[3] Jitter (__main__): the engine has no op for it"):
        if r.returncode != 2 or text not in r.stderr:
            fail("tune --engine: exit 2 with %r" % text, r)
    if os.path.exists(out):
        fail("a refused translation writes no config")
    # The preset's transforms are timed one by one, not folded into load.
    r = run([pipetune, "report", trace, "--format", "json"])
    names = [s["name"] for s in json.loads(r.stdout)["stages"]]
    if "transform[2]:AutoAugment" not in names or "transform[0]:RandomResizedCrop" not in names:
        fail("the preset's transforms as stages: %s" % names, r)


def case_not_a_folder(pipetune, tmp):
    trace, _ = profile(pipetune, tmp, custom_dataset=True)
    r = run([pipetune, "tune", trace, "--engine"])
    if r.returncode != 2 or "the DataLoader reads Squares (__main__), not a torchvision ImageFolder" not in r.stderr:
        fail("a dataset of the script's own: exit 2 saying so", r)


def case_swap(pipetune, tmp):
    """Profile, tune --engine, and (with pipetune.Loader) one epoch of the
    swapped loader: the same shapes, dtypes and every image once with its
    folder's label."""
    trace, root = profile(pipetune, tmp)
    out = os.path.join(tmp, "engine.json")
    r = run([pipetune, "tune", trace, "--engine", "-o", out, "--seconds", "1", "--cores", "2", "--memory", "2GiB"])
    if r.returncode != 0:
        fail("tune --engine exited %d" % r.returncode, r)
    for text in ("DataLoader, measured", "DataLoader, tuned kwargs (predicted)", "engine, tuned config (predicted)",
                 'code change: loader = pipetune.Loader("%s")' % os.path.abspath(out)):
        if text not in r.stdout:
            fail("tune --engine prints %r" % text, r)
    with open(out) as f:
        config = json.load(f)
    # A chain's steps count as ops: tune folds normalize into the resampling
    # before it (one stage, the same floats).
    ops = []
    for s in config["stages"]:
        steps = s["args"]["steps"] if s.get("fn") == "chain" else [s]
        ops += [step.get("fn", step.get("op")) for step in steps]
    if ops[0] != "list_files" or ops[-2:] != ["batch", "prefetch"] or "normalize" not in ops:
        fail("the tuned engine config's ops: %s" % ops)
    sys.path.insert(0, bootstrap_dir(pipetune))
    try:
        import pipetune as engine
        loader = engine.Loader(out)
    except (ImportError, AttributeError) as error:
        print("the tuned config is written; pipetune.Loader is not here to run it: %r" % (error,))
        return
    import torch

    seen = []
    for images, labels in loader:
        if images.dtype != torch.float32 or labels.dtype != torch.int64 or tuple(images.shape[1:]) != (3, 32, 32):
            fail("images: %s %s" % (images.dtype, tuple(images.shape)))
        seen += labels.tolist()
    if sorted(seen) != sorted(label for label in range(len(CLASSES)) for _ in range(PER_CLASS)):
        fail("one epoch's labels: %s" % sorted(seen))


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        {"record": case_record, "missing_op": case_missing_op, "not_a_folder": case_not_a_folder,
         "swap": case_swap}[case](pipetune, tmp)
    print("ok")


if __name__ == "__main__":
    main()
