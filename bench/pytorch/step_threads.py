"""A training step on the CPU with torch's intra-op threads at their default
(one per core), as torchvision's classification reference trains on a
CPU: the report's cores used against /usr/bin/time's, and the plan against
a num_workers grid of whole runs (docs/benchmarks-pytorch.md, "A step on
the CPU with threads of its own"). From the repository root:

    PY=~/.local/share/pipetune/torch2/bin/python3
    $PY bench/pytorch/step_threads.py [BUILD_DIR] [--grid 0,1,2] [--rounds 3] [--batches 30]

The script: a small CNN (three 3x3 convolutions, 64x64 inputs, batch 32)
trained with SGD; each sample costs --load-ms of CPU (a decode and its
augmentation) and the script says num_workers=0.

1. The script's own run under `/usr/bin/time` and `pipetune profile`: the
   report's cores used against the whole process's CPU over its wall time
   (/usr/bin/time's %P) and against the loop's own (getrusage in the
   script, every thread).
2. `pipetune tune` of that trace.
3. Untraced whole runs (the bootstrap applies the kwargs, no trace) of the
   tuned kwargs and every grid setting, R rounds interleaved; each
   setting's figure is its median wall time of the whole process.
The last line: the grid's best time over the tuned one's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid import grid_settings  # noqa: E402

HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python")

# The step is the step-threads test's (tests/python/_cnn_step.py), larger.
TRAIN = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, %r)
    import torch
    from torch.utils.data import DataLoader, Dataset
    from _cnn_step import small_cnn, train

    class Decoded(Dataset):
        def __init__(self, n, load_seconds):
            self.n, self.load_seconds = n, load_seconds

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            end = time.thread_time() + self.load_seconds
            while time.thread_time() < end:
                pass
            return torch.full((3, 64, 64), float(i %% 7)), i %% 10

    def main(batches, load_seconds, out):
        torch.manual_seed(0)
        model = small_cnn((32, 64, 64), 64)
        loader = DataLoader(Decoded(batches * 32, load_seconds), batch_size=32, num_workers=0)
        wall, process, _ = train(model, loader)
        with open(out, "w") as f:
            json.dump({"loop_seconds": wall, "threads": torch.get_num_threads(), "loop_cores": process / wall}, f)

    main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3])
""" % os.path.abspath(HELPERS))


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900, env=env)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--grid", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--load-ms", type=float, default=1.0, help="CPU per sample in the dataset")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pipetune = os.path.join(os.path.abspath(args.build), "cli", "pipetune")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        out = os.path.join(tmp, "loop.json")
        command = [sys.executable, script, str(args.batches), str(args.load_ms / 1e3), out]

        trace = os.path.join(tmp, "run.trace")
        timed = run(["/usr/bin/time", "-f", "PIPETUNE_TIME %e %U %S", pipetune, "profile", "--trace", trace, "--"]
                    + command)
        wall, user, system = [float(x) for x in timed.stderr.split("PIPETUNE_TIME")[-1].split()[:3]]
        with open(out) as f:
            loop = json.load(f)
        rep = json.loads(run([pipetune, "report", trace, "--format", "json"]).stdout)
        print("== the script's own run (num_workers=0, %d intra-op threads), traced" % loop["threads"])
        print("/usr/bin/time: %.2f cores (%.1f s of CPU over %.1f s, the whole process with its start)" % (
            (user + system) / wall, user + system, wall))
        print("the loop alone (getrusage in the script): %.2f cores over %.1f s" % (
            loop["loop_cores"], loop["loop_seconds"]))
        print("report: cpu %.2f of %g cores used; over the loop's: %.3f" % (
            rep["cores_used"], rep["cores"], rep["cores_used"] / loop["loop_cores"]))

        tuned = os.path.join(tmp, "tuned.json")
        plan = run([pipetune, "tune", trace, "-o", tuned]).stdout
        with open(tuned) as f:
            tuned_kwargs = json.load(f)
        predicted = [line.strip() for line in plan.splitlines() if line.startswith("throughput:")]
        print("tuned: %s (%s)" % (json.dumps(tuned_kwargs), predicted[0] if predicted else "?"))

        settings = grid_settings(tmp, tuned, args.grid)
        times = {name: [] for name, _ in settings}
        for _ in range(args.rounds):
            for name, path in settings:
                env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"), PIPETUNE_DATALOADER_APPLY=path)
                env.pop("PIPETUNE_TRACE", None)
                start = time.monotonic()
                run(command, env)
                times[name].append(time.monotonic() - start)
        medians = {name: statistics.median(t) for name, t in times.items()}
        print("== untraced whole runs, %d rounds interleaved: seconds per run" % args.rounds)
        for name, _ in settings:
            print("%-14s median %6.2f  (%s)" % (name, medians[name], ", ".join("%.2f" % t for t in times[name])))
        best = min((m, name) for name, m in medians.items() if name != "tuned")
        print("tuned over the grid's best (%s), as throughput: %.3f" % (best[1], best[0] / medians["tuned"]))


if __name__ == "__main__":
    main()
