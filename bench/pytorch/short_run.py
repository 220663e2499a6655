"""A short profiling run with many workers (docs/benchmarks-pytorch.md, "A
short run pays its workers' start-up"). From the repository root:

    /usr/bin/python3 bench/pytorch/short_run.py [BUILD_DIR] [--old BUILD_DIR] [--runs N]

The loader's epoch is 1000 batches, but the script stops after 60, as a
profiling run of a real training script does. Each sample waits 40 ms on a
GET (slow storage) after 1 ms of CPU; batch 4; a 20 ms step that waits (a
GPU's). Two workers deliver about 12 batches/s; 25 would feed the step.

1. One traced run at num_workers=2; each build's `report --what-if
   num_workers=25` of it, and its plan (`tune --cores 16`).
2. N traced runs at num_workers=25, 60 batches each, and N at the plan's
   num_workers: the measured rates.
Prints each build's predicted over measured for num_workers=25 and for its
plan, side by side. --old: a build of an earlier commit, for the
before-and-after.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

SCRIPT = textwrap.dedent("""
    import sys, time, torch
    from torch.utils.data import DataLoader, Dataset

    class Remote(Dataset):
        def __len__(self):
            return 4000  # 1000 batches of 4
        def __getitem__(self, i):
            end = time.thread_time() + 0.001
            while time.thread_time() < end:
                pass
            time.sleep(0.04)  # a GET from slow storage
            return torch.zeros(3, 16, 16)

    if __name__ == "__main__":
        loader = DataLoader(Remote(), batch_size=4, num_workers=int(sys.argv[1]))
        for i, batch in enumerate(loader):
            time.sleep(0.02)  # the step
            if i + 1 == 60:
                break
""")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit("%s: exit %d\n%s" % (" ".join(cmd), r.returncode, r.stderr))
    return r.stdout


def main():
    args = sys.argv[1:]
    builds = {}
    runs = 3
    while args:
        a = args.pop(0)
        if a == "--old":
            builds["before"] = args.pop(0)
        elif a == "--runs":
            runs = int(args.pop(0))
        else:
            builds["after"] = a
    builds.setdefault("after", "build")
    binaries = {name: os.path.abspath(os.path.join(b, "cli", "pipetune")) for name, b in builds.items()}
    new = binaries["after"]
    tmp = tempfile.mkdtemp(prefix="pipetune-short-run-")
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT)

    def profile(name, workers):
        trace = os.path.join(tmp, name + ".trace")
        run([new, "profile", "--trace", trace, "--", sys.executable, script, str(workers)])
        return trace

    two = profile("w2", 2)
    predicted = {}
    plans = {}
    print("== from the num_workers=2 trace (60 of 1000 batches)")
    for name, binary in binaries.items():
        rep = json.loads(run([binary, "report", two, "--format", "json", "--what-if", "num_workers=25"]))
        predicted[name] = rep["what_if"][0]["throughput"]
        plan = json.loads(run([binary, "tune", two, "--cores", "16", "--memory", "64GiB", "--format", "json",
                               "-o", os.path.join(tmp, name + ".kwargs.json")]))
        plans[name] = (plan["dataloader_kwargs"]["num_workers"], plan["predicted_throughput"])
        print("%-6s traced: measured %6.2f predicted %6.2f; what-if num_workers=25: %6.2f; plan: %s workers, %6.2f"
              % (name, rep["throughput"], rep["predicted_throughput"], predicted[name],
                 plan["dataloader_kwargs"]["num_workers"], plan["predicted_throughput"]))
        for note in plan.get("notes", []):
            if "predicted for epochs" in note:
                print("       plan note: " + note)
    measured = []
    for i in range(runs):
        rep = json.loads(run([new, "report", profile("w25_%d" % i, 25), "--format", "json"]))
        measured.append(rep["throughput"])
        line = rep["dataloader"]
        print("num_workers=25 run %d: measured %6.2f batches/s; start-up %.3f s, steady %.2f from epochs of %s"
              % (i + 1, rep["throughput"], line["startup_seconds_per_epoch"], line.get("steady_throughput", 0),
                 line.get("steady_from_batches", "-")))
    m = statistics.median(measured)
    at_plan = {}
    for workers in sorted({w for w, _ in plans.values()}):
        rates = [json.loads(run([new, "report", profile("plan%d_%d" % (workers, i), workers), "--format", "json"]))
                 ["throughput"] for i in range(runs)]
        at_plan[workers] = statistics.median(rates)
        print("num_workers=%d (a plan's): measured %s" % (workers, " ".join("%.2f" % r for r in rates)))
    print("== predicted / measured at num_workers=25 (median of %d runs, %.2f batches/s)" % (runs, m))
    for name in binaries:
        print("%-6s predicted %6.2f  ratio measured/predicted %.2f" % (name, predicted[name], m / predicted[name]))
    print("== each build's plan: predicted / measured (median of %d runs)" % runs)
    for name, (workers, rate) in plans.items():
        print("%-6s num_workers=%d predicted %6.2f measured %6.2f  ratio %.2f"
              % (name, workers, rate, at_plan[workers], at_plan[workers] / rate))


if __name__ == "__main__":
    main()
