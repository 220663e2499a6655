"""One plan for every rank of a DDP job, against a num_workers grid measured in
the same run (docs/benchmarks-pytorch.md, "A DDP job: tuned for the node").
From the repository root:

    /usr/bin/python3 bench/pytorch/ddp_tune.py [BUILD_DIR] [--grid 0,1,2,3,4] [--cores C] [--batches B] [--rounds R]

The job: 2 ranks under torch.multiprocessing.spawn, gloo on 127.0.0.1, a tiny
linear model; each sample costs 1 ms of CPU and 4 ms of waiting (a read), and
rank 1's samples cost twice rank 0's (the straggler); batch 4, fork workers.
Every run is under `pipetune profile`, so traced and tuned runs pay the same.

1. The script's own settings (num_workers=0), profiled.
2. `pipetune tune` of that job's traces with the node's --cores and
   --memory (each rank gets its share), and the kwargs applied to every rank
   (`profile --apply`).
3. The grid: num_workers=N applied to every rank, for each N.
The tuned setting and the grid run R rounds, interleaved; each setting's
figure is its median. Each run's rate is the job's, measured by the script
itself: the slowest rank's batches over its loop's wall time. The last
line: tuned over the grid's best.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from costly import costly_dataset  # noqa: E402
from grid import grid_settings  # noqa: E402

TRAIN = textwrap.dedent("""
    import os, sys, time
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

""") + costly_dataset(0.001, 0.004, "torch.full((8,), float(i)), i % 2") + textwrap.dedent("""

    def train(rank, world, samples, out):
        # The rank's DataLoader workers fork (mp.spawn leaves "spawn" as its
        # default: a Python start and a torch import per worker per epoch).
        import multiprocessing
        multiprocessing.set_start_method("fork", force=True)
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
        torch.set_num_threads(1)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        ds = Costly(samples, 2 if rank == 1 else 1)
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
        loader = DataLoader(ds, batch_size=4, num_workers=0, sampler=sampler)
        start, batches = time.monotonic(), 0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            batches += 1
        rate = batches / (time.monotonic() - start)
        with open("%s.%d" % (out, rank), "w") as f:
            f.write(str(rate))
        dist.destroy_process_group()

    if __name__ == "__main__":
        port, samples, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = port
        torch.multiprocessing.spawn(train, args=(2, samples, out), nprocs=2)
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(pipetune, tmp, script, name, samples, apply=None):
    """Runs the job profiled; returns the job's batches/s (its slowest rank's)."""
    trace = os.path.join(tmp, name + ".trace")
    out = os.path.join(tmp, name + ".rate")
    cmd = [pipetune, "profile", "--trace", trace]
    if apply:
        cmd += ["--apply", apply]
    cmd += ["--", sys.executable, script, str(free_port()), str(samples), out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit("%s: profile exited %d\n%s" % (name, r.returncode, r.stderr[-2000:]))
    rates = []
    for rank in (0, 1):
        with open("%s.%d" % (out, rank)) as f:
            rates.append(float(f.read()))
    return trace, min(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--grid", default="0,1,2,3,4")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--memory", default="8GiB")
    parser.add_argument("--batches", type=int, default=80, help="batches per rank")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pipetune = os.path.join(os.path.abspath(args.build), "cli", "pipetune")
    samples = args.batches * 4 * 2
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        trace, rate0 = run_job(pipetune, tmp, script, "script", samples)
        print("script's settings (num_workers=0): %.1f batches/s" % rate0)
        kwargs = os.path.join(tmp, "tuned.json")
        r = subprocess.run([pipetune, "tune", trace, "--cores", args.cores, "--memory", args.memory, "-o", kwargs],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("tune exited %d\n%s" % (r.returncode, r.stderr))
        with open(kwargs) as f:
            tuned_kwargs = json.load(f)
        predicted = [line for line in r.stdout.splitlines() if line.startswith("throughput:")]
        print("tuned: %s (%s)" % (json.dumps(tuned_kwargs), predicted[0].strip() if predicted else "?"))
        settings = grid_settings(tmp, kwargs, args.grid)
        rates = {name: [] for name, _ in settings}
        for round_index in range(args.rounds):
            for name, path in settings:
                _, rate = run_job(pipetune, tmp, script, "run", samples, path)
                rates[name].append(rate)
        medians = {name: statistics.median(r) for name, r in rates.items()}
        for name, _ in settings:
            print("%-14s median %.1f batches/s  (%s)" % (name, medians[name],
                                                         ", ".join("%.1f" % r for r in rates[name])))
        best = max((m, name) for name, m in medians.items() if name != "tuned")
        print("tuned over the grid's best (%s): %.3f" % (best[1], medians["tuned"] / best[0]))

if __name__ == "__main__":
    main()
