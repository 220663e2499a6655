"""An HF `datasets` map-style dataset with an Image feature and a format
transform, under `pipetune profile`, as HF's image-classification examples
write it: `dataset.set_transform(fn)` (a global Compose) or
`with_transform(fn)` (a Compose in fn's closure), fn converting each
decoded image and applying the Compose. The report must show the Arrow
read (`load`), the Image feature's decode, fn's own time and each
transform of the Compose as its own row, counted once per sample; name
the transform made costly as the bottleneck; and predict the measured
throughput within 10% (num_workers=0, where the model is the sum of the
rows). Usage: test_hf_transform.py CASE PIPETUNE. Exit 77 when this
Python lacks `datasets` (Debian's python3; the torch 2.x venv has it)."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from _common import fail, profile_and_report, run, skip_without

SAMPLES, BATCH, EPOCHS = 64, 8, 2
# The costly transform's CPU per sample, in seconds: several times any other row's.
SLOW = 0.004

SCRIPT = textwrap.dedent("""
    import io, sys, time
    import numpy as np
    import torch
    from datasets import ClassLabel, Dataset, Features, Image as ImageFeature
    from PIL import Image
    from torch.utils.data import DataLoader
    from torchvision import transforms

    class Sharpen:
        # A transform of known cost: {slow} s of this thread's CPU.
        def __call__(self, image):
            end = time.thread_time() + {slow}
            while time.thread_time() < end:
                pass
            return image

    def make_dataset(n):
        rng = np.random.default_rng(0)
        images = []
        for i in range(n):
            jpeg = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (64, 80, 3), dtype=np.uint8)).save(jpeg, format="JPEG")
            images.append({{"bytes": jpeg.getvalue(), "path": None}})
        features = Features({{"image": ImageFeature(), "label": ClassLabel(num_classes=3)}})
        return Dataset.from_dict({{"image": images, "label": [i % 3 for i in range(n)]}}, features=features)

    TRAIN = transforms.Compose([transforms.RandomResizedCrop(48), transforms.RandomHorizontalFlip(), Sharpen(),
                                transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.25] * 3)])

    def preprocess(batch):
        batch["pixel_values"] = [TRAIN(image.convert("RGB")) for image in batch["image"]]
        del batch["image"]
        return batch

    def closure_transform():
        compose = transforms.Compose(TRAIN.transforms)

        def preprocess(batch):
            batch["pixel_values"] = [compose(image.convert("RGB")) for image in batch["image"]]
            del batch["image"]
            return batch

        return preprocess

    def collate(examples):
        return {{"pixel_values": torch.stack([e["pixel_values"] for e in examples]),
                "labels": torch.tensor([e["label"] for e in examples])}}

    if __name__ == "__main__":
        how, workers = sys.argv[1], int(sys.argv[2])
        dataset = make_dataset({samples})
        if how == "set_transform":
            dataset.set_transform(preprocess)
        else:
            dataset = dataset.with_transform(closure_transform())
        loader = DataLoader(dataset, batch_size={batch}, shuffle=True, num_workers=workers, collate_fn=collate)
        for epoch in range({epochs}):
            for batch in loader:
                assert batch["pixel_values"].shape == ({batch}, 3, 48, 48)
                time.sleep(0.001)
""")

TRANSFORMS = ["RandomResizedCrop", "RandomHorizontalFlip", "Sharpen", "ToTensor", "Normalize"]


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    how, workers = case.rsplit("_w", 1)
    if how not in ("set_transform", "with_transform"):
        fail("unknown case " + case)
    skip_without("torch", "torchvision", "datasets")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT.format(slow=SLOW, samples=SAMPLES, batch=BATCH, epochs=EPOCHS))
        trace = os.path.join(tmp, "run.trace")
        rep = profile_and_report(pipetune, trace, [sys.executable, script, how, workers])
        if os.environ.get("PIPETUNE_TEST_SHOW_REPORT"):  # the text report too, for a reader of the log
            print(run([pipetune, "report", trace]).stdout)

    def expect(condition, message):
        if not condition:
            print(json.dumps(rep, indent=1))
            fail(message)

    fn = "preprocess"
    rows = ["load", "transform[1]:decode:image", "transform[2]:set_transform:" + fn] + [
        "transform[%d]:%s" % (k, name) for k, name in enumerate(TRANSFORMS, start=3)]
    names = [s["name"] for s in rep["stages"] if s["name"] not in ("transfer", "pin_memory")]
    expect(names == rows + ["collate"], "a row for the Arrow read, the decode, %s and each transform: %s" % (fn, rows))
    elements = {s["name"]: s["elements"] for s in rep["stages"]}
    samples = SAMPLES * EPOCHS
    for name in rows:
        # Once per sample, whether torch fetched each sample (dataset[i]) or
        # the batch at once (__getitems__, as HF datasets' is).
        expect(elements.get(name) == samples, "%s: expected %d elements" % (name, samples))
    expect(elements.get("collate") == samples // BATCH, "collate: one per batch")
    costly = "transform[5]:Sharpen"
    named = rep["bottleneck"] or (rep["next_limit"] or {}).get("stage")
    expect(named == costly, "the costly transform is named (%s, not %s)" % (costly, named))
    if workers == "0":
        ratio = rep["prediction_ratio"]
        expect(0.9 <= ratio <= 1.1, "predicted over measured %.3f, not within 10%%" % ratio)
    print("ok", case)


if __name__ == "__main__":
    main()
