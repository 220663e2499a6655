"""A stream's shards bound its workers (docs/pytorch.md, "A stream's
shards"): a webdataset of 2 tar shards, and an HF `datasets`
IterableDataset of 2 shards, each with a map that waits 10 ms per sample
(latency: more workers would hide it, whatever the cores), are profiled at
num_workers=2 and tuned. Without the limit the plan would take many more
workers (the plan's own note prices them); with it the kwargs written say
at most 2, and the plan's text says the shards are why. A user who applied
such a plan to webdataset would see the extra workers fail the run ("No
samples found"), or, for HF, sit idle.
Usage: test_shards.py CASE PIPETUNE. Exit 77 when this Python lacks the
library (Debian's python3 has neither)."""
import json
import os
import re
import sys
import tempfile
import textwrap
from _common import fail, profile_and_report, run, skip_without

WAIT = 0.010  # seconds per sample in the map: off the CPU, so workers hide it

WEBDATASET = textwrap.dedent("""
    import io, sys, time
    import numpy as np
    import webdataset as wds
    from PIL import Image
    from torch.utils.data import DataLoader

    def fetch(sample):
        time.sleep({wait})
        return sample

    if __name__ == "__main__":
        urls = []
        rng = np.random.default_rng(0)
        for s in range(2):
            urls.append("%s/shard-%d.tar" % (sys.argv[1], s))
            with wds.TarWriter(urls[-1]) as out:
                for i in range(64):
                    image = Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
                    jpeg = io.BytesIO()
                    image.save(jpeg, format="JPEG")
                    out.write({{"__key__": "s%d_%04d" % (s, i), "jpg": jpeg.getvalue(), "cls": str(i % 5)}})
        dataset = (wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("jpg", "cls")
                   .map(fetch).batched(8))
        loader = DataLoader(dataset, batch_size=None, num_workers=2)
        for epoch in range(3):
            for images, labels in loader:
                time.sleep(0.001)
""")

HF_DATASETS = textwrap.dedent("""
    import time
    from datasets import Dataset
    from torch.utils.data import DataLoader

    def fetch(example):
        time.sleep({wait})
        return {{"ids": [example["label"]] * 4}}

    if __name__ == "__main__":
        rows = {{"label": list(range(128))}}
        dataset = Dataset.from_dict(rows).to_iterable_dataset(num_shards=2).map(fetch).with_format("torch")
        loader = DataLoader(dataset, batch_size=8, num_workers=2)
        for epoch in range(3):
            for batch in loader:
                time.sleep(0.001)
""")


def check(pipetune, tmp, source):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(source.format(wait=WAIT))
    trace = os.path.join(tmp, "run.trace")
    rep = profile_and_report(pipetune, trace, [sys.executable, script, tmp])
    settings = rep["dataloader"]["settings"]
    if settings.get("shards") != 2:
        fail("the report's settings: shards 2, got %r" % settings.get("shards"), r)
    # The 2 workers bind (the map's wait), and the report's remedy is more
    # shards, not cheaper work or more cores.
    if "no more workers get work: the stream has 2 shards" not in rep["summary"]:
        fail("the report says the shards stop more workers", r)
    kwargs = os.path.join(tmp, "kwargs.json")
    r = run([pipetune, "tune", trace, "-o", kwargs, "--cores", "2", "--memory", "64GiB"])
    if r.returncode != 0:
        fail("tune exited %d" % r.returncode, r)
    with open(kwargs) as f:
        workers = json.load(f)["num_workers"]
    if workers > 2:
        fail("num_workers=%d for a stream of 2 shards" % workers, r)
    if "the stream has 2 shards, each read whole by one worker" not in r.stdout:
        fail("the plan says the shards are why", r)
    # What the plan would want without the limit, priced by the same model:
    # well past the shards (the map's wait is hidden by each worker added).
    wanted = re.search(r"split it into (\d+) or more shards and \d+ workers would reach", r.stdout)
    if wanted is None or int(wanted.group(1)) < 4:
        fail("the plan would want 4 or more workers without the limit, and says so", r)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    source, library = {"webdataset": (WEBDATASET, "webdataset"), "hf_datasets": (HF_DATASETS, "datasets")}.get(
        case, (None, None))
    if source is None:
        fail("unknown case " + case)
    skip_without("torch", library)
    with tempfile.TemporaryDirectory() as tmp:
        check(pipetune, tmp, source)
    print("ok", case)


if __name__ == "__main__":
    main()
