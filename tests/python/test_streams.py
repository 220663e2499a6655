"""Streaming datasets under `pipetune profile`, each stage its own row:
a webdataset pipeline over tar shards (read, decode, map, batched) and an
HF `datasets` IterableDataset with two `.map`s and with_format("torch"),
their data made here (no hub). Checks what `pipetune report --format json`
says: the rows and their counts, the bottleneck (the one map made costly),
and the prediction against the measured throughput.
Usage: test_streams.py CASE PIPETUNE. Exit 77 when this Python lacks the
library (Debian's python3 has neither; `scripts/setup.sh` installs
both in the torch 2.x venv)."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from _common import fail, profile_and_report, skip_without

# The costly map's CPU per sample, in seconds: several times any other stage's.
SLOW = 0.004
EPOCHS = 2

WEBDATASET = textwrap.dedent("""
    import io, sys, time
    import numpy as np
    import torch, webdataset as wds
    from PIL import Image
    from torch.utils.data import DataLoader
    from torchvision.transforms import functional as F

    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def normalize(sample):
        image, label = sample
        spin({slow})
        return F.to_tensor(image), int(label)

    def make_shards(folder, shards, per_shard):
        rng = np.random.default_rng(0)
        urls = []
        for s in range(shards):
            urls.append("%s/shard-%d.tar" % (folder, s))
            with wds.TarWriter(urls[-1]) as out:
                for i in range(per_shard):
                    image = Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype=np.uint8))
                    jpeg = io.BytesIO()
                    image.save(jpeg, format="JPEG")
                    out.write({{"__key__": "s%d_%04d" % (s, i), "jpg": jpeg.getvalue(), "cls": str(i % 5)}})
        return urls

    if __name__ == "__main__":
        workers = int(sys.argv[1])
        urls = make_shards(sys.argv[2], {shards}, {per_shard})
        dataset = (wds.WebDataset(urls, shardshuffle=False).decode("pil")
                   .to_tuple("jpg", "cls").map(normalize).batched({batch}))
        loader = DataLoader(dataset, batch_size=None, num_workers=workers)
        for epoch in range({epochs}):
            for images, labels in loader:
                time.sleep(0.001)
""")

HF_DATASETS = textwrap.dedent("""
    import sys, time
    import torch
    from datasets import Dataset
    from torch.utils.data import DataLoader

    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def tokenize(example):
        spin({slow} / 4)
        text = (example["text"] + " " * 16)[:16]
        return {{"ids": [ord(c) % 97 for c in text]}}

    def scale(example):
        spin({slow})
        return {{"ids": [i * 2 for i in example["ids"]]}}

    if __name__ == "__main__":
        workers = int(sys.argv[1])
        n = {samples}
        rows = {{"text": ["sample %05d %s" % (i, "x" * (i % 7)) for i in range(n)], "label": [i % 3 for i in range(n)]}}
        dataset = Dataset.from_dict(rows).to_iterable_dataset(num_shards=4)
        dataset = dataset.map(tokenize, remove_columns=["text"]).map(scale).with_format("torch")
        loader = DataLoader(dataset, batch_size={batch}, num_workers=workers)
        for epoch in range({epochs}):
            for batch in loader:
                time.sleep(0.001)
""")




def profile_script(pipetune, tmp, source, workers):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(source)
    trace = os.path.join(tmp, "run%d.trace" % workers)
    return profile_and_report(pipetune, trace, [sys.executable, script, str(workers), tmp])


def expect(condition, message, rep):
    if not condition:
        print(json.dumps(rep, indent=1))
        fail(message)


def check(rep, rows, counts, slow_stage, workers):
    """rows: the stages in order; counts: {stage: elements}."""
    elements = {s["name"]: s["elements"] for s in rep["stages"] if s["elements"]}
    names = [s["name"] for s in rep["stages"] if s["name"] not in ("transfer", "pin_memory")]
    expect(names == rows + ["collate"], "the stream's own stages, in order: %s" % rows, rep)
    for name, n in counts.items():
        expect(elements.get(name) == n, "%s: expected %d elements" % (name, n), rep)
    expect(rep["bottleneck"] == slow_stage or (rep["next_limit"] or {}).get("stage") == slow_stage,
           "the costly map is named", rep)
    if workers == 0:
        # Each stage's visits per batch come from its counts: were the
        # stages before `batched` charged once per batch, the prediction
        # would be several times the measured (the 10% of issue 32 is judged
        # by bench/pytorch/streams.py on a quiet machine; here, on a shared
        # one, a looser bound that still catches that).
        ratio = rep["prediction_ratio"]
        expect(0.8 < ratio < 1.25, "predicted over measured %.3f" % ratio, rep)


def case_webdataset(pipetune, tmp, workers):
    batch, shards, per_shard = 8, 2, 24
    source = WEBDATASET.format(slow=SLOW, shards=shards, per_shard=per_shard, batch=batch, epochs=EPOCHS)
    rep = profile_script(pipetune, tmp, source, workers)
    samples = shards * per_shard * EPOCHS
    rows = ["load", "transform[1]:decode", "transform[2]:to_tuple", "transform[3]:map:normalize",
            "transform[4]:batched"]
    batches = samples // batch
    check(rep, rows, {"transform[1]:decode": samples, "transform[3]:map:normalize": samples,
                      "transform[4]:batched": batches, "load": batches, "collate": batches},
          "transform[3]:map:normalize", workers)


def case_hf_datasets(pipetune, tmp, workers):
    batch, samples = 8, 64
    source = HF_DATASETS.format(slow=SLOW, samples=samples, batch=batch, epochs=EPOCHS)
    rep = profile_script(pipetune, tmp, source, workers)
    rows = ["load", "transform[1]:map:tokenize", "transform[2]:map:scale"]
    n = samples * EPOCHS
    check(rep, rows, {"load": n, "transform[1]:map:tokenize": n, "transform[2]:map:scale": n,
                      "collate": n // batch}, "transform[2]:map:scale", workers)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    kind, workers = case.rsplit("_w", 1)
    library = {"webdataset": "webdataset", "hf_datasets": "datasets"}.get(kind)
    if library is None:
        fail("unknown case " + case)
    skip_without("torch", library)
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "webdataset":
            case_webdataset(pipetune, tmp, int(workers))
        else:
            case_hf_datasets(pipetune, tmp, int(workers))
    print("ok", case)


if __name__ == "__main__":
    main()
