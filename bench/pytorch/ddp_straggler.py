"""The offline plan of a short DDP job whose ranks mostly wait at the
all-reduce, against a num_workers grid measured untraced in the same run, and
the model's error for each rank (docs/benchmarks-pytorch.md, "A DDP job
whose ranks wait at the all-reduce"). From the repository root:

    /usr/bin/python3 bench/pytorch/ddp_straggler.py [BUILD_DIR] [--grid 0,1,2,3] [--cores 2] [--rounds 3]
        [--straggler 1.5] [--script-workers 0]

The job: 2 ranks under torch.multiprocessing.spawn, gloo on 127.0.0.1, 8
batches of 8 samples per epoch, 6 epochs; the script says
num_workers=--script-workers (non-persistent, as a script would have it),
and a grid setting with workers keeps them (persistent_workers=True). Each
sample is mostly CPU (rank 0: 2 ms of CPU and 0.3 ms of waiting, a read);
rank 1's cost --straggler times that (the straggler), so rank 0's main
thread spends much of its loop waiting for rank 1 at the gradients'
all-reduce, off the CPU. The training step is a small linear model's
forward and backward. Issue 39's case: `--straggler 2 --script-workers 1`.

1. Traced runs (`pipetune profile`): the script's own settings, then every
   grid setting: for each rank, the model's predicted over measured
   batches/s from `pipetune report` (its "ranks" rows).
2. `pipetune tune` of the script's own run's traces with the node's --cores
   and --memory.
3. Untraced: the tuned kwargs and every grid setting, applied by the
   bootstrap alone (PIPETUNE_DATALOADER_APPLY without a trace), R rounds
   interleaved; each setting's figure is its median of the job's rate (the
   slowest rank's images/s over its training loop, measured by the script).
The last lines: the model's ratios, and tuned over the grid's best.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from costly import costly_dataset  # noqa: E402
from ddp_tune import free_port  # noqa: E402

BATCH = 8

TRAIN = textwrap.dedent("""
    import os, sys, time
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

""") + costly_dataset(0.002, 0.0003, "torch.full((3, 32, 32), float(i % 7)), i % 10") + textwrap.dedent("""

    def train(rank, world, samples, epochs, out):
        import multiprocessing
        multiprocessing.set_start_method("fork", force=True)
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
        torch.set_num_threads(1)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3 * 32 * 32, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        ds = Costly(samples, STRAGGLER if rank == 1 else 1.0)
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
        loader = DataLoader(ds, batch_size=BATCH_SIZE, num_workers=SCRIPT_WORKERS, sampler=sampler)
        images = 0
        start = time.monotonic()
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                images += len(y)
        rate = images / (time.monotonic() - start)
        with open("%s.%d" % (out, rank), "w") as f:
            f.write(str(rate))
        dist.destroy_process_group()

    if __name__ == "__main__":
        port, samples, epochs, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = port
        torch.multiprocessing.spawn(train, args=(2, samples, epochs, out), nprocs=2)
""")


def training_script(straggler, script_workers):
    return TRAIN.replace("BATCH_SIZE", str(BATCH)).replace("STRAGGLER", repr(straggler)).replace(
        "SCRIPT_WORKERS", str(script_workers))


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300, env=env)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r.stdout


def job_rate(out):
    """The job's images/s: its slowest rank's."""
    rates = []
    for rank in (0, 1):
        with open("%s.%d" % (out, rank)) as f:
            rates.append(float(f.read()))
    return min(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--grid", default="0,1,2,3")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--memory", default="8GiB")
    parser.add_argument("--batches", type=int, default=8, help="batches per rank per epoch")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--straggler", type=float, default=1.5, help="rank 1's cost per sample over rank 0's")
    parser.add_argument("--script-workers", type=int, default=0, help="num_workers in the script's own code")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pipetune = os.path.join(os.path.abspath(args.build), "cli", "pipetune")
    samples = args.batches * BATCH * 2
    grid = [int(x) for x in args.grid.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(training_script(args.straggler, args.script_workers))

        def kwargs_file(name, kwargs):
            path = os.path.join(tmp, name + ".json")
            with open(path, "w") as f:
                json.dump(kwargs, f)
            return path

        def job(name, apply, traced):
            out = os.path.join(tmp, name + ".rate")
            command = [sys.executable, script, str(free_port()), str(samples), str(args.epochs), out]
            if traced:
                trace = os.path.join(tmp, name + ".trace")
                applied = ["--apply", apply] if apply else []
                run([pipetune, "profile", "--trace", trace] + applied + ["--"] + command)
                return trace, job_rate(out)
            env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"), PIPETUNE_DATALOADER_APPLY=apply)
            env.pop("PIPETUNE_TRACE", None)
            run(command, env)
            return None, job_rate(out)

        settings = [("num_workers=%d" % n,
                     kwargs_file("grid%d" % n, {"num_workers": n, "persistent_workers": n > 0})) for n in grid]
        print("== the model, traced runs: predicted / measured batches/s per rank (pipetune report)")
        ratios = []
        script_trace = None
        for name, path in [("script's own", None)] + settings:
            trace, _ = job("traced-" + name.replace("=", "").replace(" ", "-").replace("'", ""), path, traced=True)
            if path is None:
                script_trace = trace
            rep = json.loads(run([pipetune, "report", trace, "--format", "json"]))
            cells = []
            for row in rep["ranks"]:
                ratio = row["predicted_throughput"] / row["throughput"]
                ratios.append(ratio)
                cells.append("rank %d: measured %6.2f predicted %6.2f ratio %.3f" % (
                    row["rank"], row["throughput"], row["predicted_throughput"], ratio))
            print("%-14s %s" % (name, "  |  ".join(cells)))
        print("model for ranks: predicted/measured min %.3f max %.3f; within 10%%: %d of %d" % (
            min(ratios), max(ratios), sum(abs(r - 1) <= 0.10 for r in ratios), len(ratios)))
        tuned = os.path.join(tmp, "tuned.json")
        out = run([pipetune, "tune", script_trace, "--cores", args.cores, "--memory", args.memory, "-o", tuned])
        with open(tuned) as f:
            tuned_kwargs = json.load(f)
        predicted = [line.strip() for line in out.splitlines() if line.startswith("throughput:")]
        print("tuned: %s (%s)" % (json.dumps(tuned_kwargs), predicted[0] if predicted else "?"))
        for line in out.splitlines():
            if "budgets:" in line or "cores" in line and "rank" in line:
                print("  " + line.strip())
        runs = [("tuned", tuned)] + settings
        rates = {name: [] for name, _ in runs}
        for _ in range(args.rounds):
            for name, path in runs:
                rates[name].append(job("run", path, traced=False)[1])
        medians = {name: statistics.median(r) for name, r in rates.items()}
        print("== untraced, %d rounds interleaved: the job's images/s per rank" % args.rounds)
        for name, _ in runs:
            print("%-14s median %6.1f  (%s)" % (name, medians[name], ", ".join("%.1f" % r for r in rates[name])))
        best = max((m, name) for name, m in medians.items() if name != "tuned")
        print("tuned over the grid's best (%s): %.3f" % (best[1], medians["tuned"] / best[0]))


if __name__ == "__main__":
    main()
