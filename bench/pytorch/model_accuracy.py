"""The one model on real DataLoaders, measured side by side in one run
(docs/benchmarks-pytorch.md). From the repository root:

    /usr/bin/python3 bench/pytorch/model_accuracy.py [BUILD_DIR] [--epochs N] [--quick]

1. Traced runs of one script at every setting: a map-style dataset at
   num_workers 0, 1, 2, 4 with persistent workers off and on, and an
   IterableDataset (sharded by get_worker_info) at 0 and 2. For each it prints
   predicted over measured batches/s from `pipetune report`.
2. What-if: from the num_workers=0 trace, `--what-if num_workers=N` against
   the traced run at N, for N = 1, 2, 4.
3. Tuning an IterableDataset: `pipetune tune` of its num_workers=0 trace,
   the tuned settings run applied, against the best of the num_workers grid
   measured in the same run.
Each line ends with its ratio; the last lines summarise. The workload: each
sample costs 1.5 ms of CPU and 0.5 ms of waiting (a read), two transforms
0.8 and 0.4 ms of CPU, batch 8, a 4 ms training step that waits (a GPU's).

Step 1 runs twice: with every sample costing exactly that ("fixed"), and
with each sample's CPU costs drawn from +-50% around them, seeded by the
sample's index ("varied": real samples differ in size). Identical samples
keep oversubscribed workers in phase, so their reads coincide and leave the
cores idle together; varied ones drift apart, as real ones do.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

SCRIPT = textwrap.dedent("""
    import random, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
    from torchvision import transforms

    VARY = [0.0]  # each CPU cost is drawn from (1 +- VARY) times its mean

    def spin(seconds):
        if VARY[0]:
            seconds *= 1 + VARY[0] * (2 * random.random() - 1)
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    class Crop:
        def __call__(self, x):
            spin(0.0008)
            return x[:, :16, :16]

    class Scale:
        def __call__(self, x):
            spin(0.0004)
            return x * 0.5

    def sample(i):
        random.seed(i)  # the same costs for sample i in every run and process
        spin(0.0015)
        time.sleep(0.0005)
        return torch.full((3, 32, 32), float(i))

    class Images(Dataset):
        def __init__(self, n):
            self.n = n
            self.transform = transforms.Compose([Crop(), Scale()])
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return self.transform(sample(i)), i

    class Stream(IterableDataset):
        def __init__(self, n):
            self.n = n
            self.transform = transforms.Compose([Crop(), Scale()])
        def __iter__(self):
            info = get_worker_info()
            first, step = (0, 1) if info is None else (info.id, info.num_workers)
            for i in range(first, self.n, step):
                yield self.transform(sample(i)), i

    if __name__ == "__main__":
        kind, workers, persistent, epochs, samples = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
        VARY[0] = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
        ds = Images(samples) if kind == "map" else Stream(samples)
        kwargs = dict(batch_size=8, num_workers=workers)
        if workers > 0:
            kwargs["persistent_workers"] = persistent
        loader = DataLoader(ds, **kwargs)
        for epoch in range(epochs):
            for batch, labels in loader:
                time.sleep(0.004)
""")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else "build"
    quick = "--quick" in sys.argv
    epochs = 2 if quick else 3
    samples = 160 if quick else 320
    pipetune = os.path.abspath(os.path.join(build, "cli", "pipetune"))
    python = sys.executable
    tmp = tempfile.mkdtemp(prefix="pipetune-model-accuracy-")
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT)

    def profile(name, kind, workers, persistent, apply=None, vary=0.0):
        trace = os.path.join(tmp, name + ".trace")
        cmd = [pipetune, "profile", "--trace", trace]
        if apply:
            cmd += ["--apply", apply]
        cmd += ["--", python, script, kind, str(workers), "1" if persistent else "0", str(epochs), str(samples),
                str(vary)]
        run(cmd)
        return trace

    def report(trace, *what_ifs):
        cmd = [pipetune, "report", trace, "--format", "json"]
        for w in what_ifs:
            cmd += ["--what-if", w]
        return json.loads(run(cmd))

    ratios = {"fixed": [], "varied": []}
    measured = {}
    traces = {}
    settings = [("map", w, p) for w in (0, 1, 2, 4) for p in ((False, True) if w > 0 else (False,))]
    settings += [("iterable", 0, False), ("iterable", 2, False)]
    for costs, vary in (("fixed", 0.0), ("varied", 0.5)):
        print("== predicted / measured batches/s, traced runs of %d epochs, %s sample costs" % (epochs, costs))
        for kind, workers, persistent in settings:
            name = "%s-w%d%s" % (kind, workers, "-persistent" if persistent else "")
            trace = profile(name if costs == "fixed" else name + "-varied", kind, workers, persistent, vary=vary)
            rep = report(trace)
            ratio = rep["predicted_throughput"] / rep["throughput"]
            ratios[costs].append(ratio)
            traces[costs, name] = trace
            measured[costs, name] = rep["throughput"]
            print("%-24s measured %7.2f  predicted %7.2f  bound %-11s bottleneck %-22s ratio %.3f" % (
                name, rep["throughput"], rep["predicted_throughput"], rep["bound"], rep["bottleneck"] or "-",
                ratio))

    what_if_ratios = []
    for costs in ratios:
        print("== what-if from map-w0's trace against the traced run, %s sample costs" % costs)
        for workers in (1, 2, 4):
            rep = report(traces[costs, "map-w0"], "num_workers=%d" % workers)
            predicted = rep["what_if"][0]["throughput"]
            ran = measured[costs, "map-w%d" % workers]
            what_if_ratios.append(ratio := predicted / ran)
            print("num_workers=%d: predicted %7.2f  measured %7.2f  ratio %.3f" % (workers, predicted, ran, ratio))

    print("== tune the IterableDataset from its num_workers=0 trace, against the num_workers grid")
    kwargs = os.path.join(tmp, "tuned.json")
    plan = run([pipetune, "tune", traces["fixed", "iterable-w0"], "--cores", str(os.cpu_count()), "-o", kwargs])
    tuned = json.load(open(kwargs))
    print("tuned settings: %s" % json.dumps(tuned))
    grid = {}
    for workers in (0, 1, 2, 3, 4):
        grid[workers] = report(profile("grid-w%d" % workers, "iterable", workers, False))["throughput"]
    tuned_rate = report(profile("tuned", "iterable", 0, False, apply=kwargs))["throughput"]
    best = max(grid.values())
    print("grid: " + ", ".join("w%d %.2f" % (w, x) for w, x in grid.items()))
    print("tuned %.2f over the grid's best %.2f: ratio %.3f" % (tuned_rate, best, tuned_rate / best))
    if "get_worker_info" not in plan and tuned.get("num_workers", 0) > 1:
        print("note: the plan did not mention sharding")

    print("== summary")
    for costs, values in ratios.items():
        print("model, %s costs: predicted/measured over %d runs: min %.3f max %.3f median %.3f; within 5%%: %d of %d" % (
            costs, len(values), min(values), max(values), statistics.median(values),
            sum(abs(r - 1) <= 0.05 for r in values), len(values)))
    print("what-if num_workers: predicted/measured min %.3f max %.3f; within 10%%: %d of %d" % (
        min(what_if_ratios), max(what_if_ratios), sum(abs(r - 1) <= 0.10 for r in what_if_ratios),
        len(what_if_ratios)))
    print("tuned over the grid's best: %.3f" % (tuned_rate / best))


if __name__ == "__main__":
    main()
