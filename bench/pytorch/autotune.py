"""`pipetune autotune` on a script with num_workers=0 in code, against a
num_workers grid measured in the same run (docs/benchmarks-pytorch.md,
"autotune: a live job retuned"). From the repository root:

    /usr/bin/python3 bench/pytorch/autotune.py [BUILD_DIR] [--grid 0,1,2,3,4] [--cores C] [--samples N] [--rounds R]

The script: 6 epochs over N samples in batches of 4, each sample 1 ms of
CPU and 4 ms of waiting (a read), a 2 ms step; fork workers. It times each
epoch itself (batches over the wall time from iter() to the loop's end) and
runs two ways: `kept` (one DataLoader for every epoch) and `new` (a new
DataLoader every epoch).

Each round, interleaved: the grid (num_workers=N applied to every
DataLoader with `pipetune profile --apply`, so that every run pays the same
tracing) and `pipetune autotune --cores C` of each way. Figures are medians
over the rounds:
- autotune, retuned: the mean rate of the epochs from the one where the
  settled settings took effect ("epoch E: settled"/"rolled back" in its
  output) to the last; the grid's are its mean over the same epochs;
- autotune, all 6 epochs: exploration included, against the grid best's;
- the decisions' cost (ms, median) and the time to settled (s);
- the settled kwargs (`-o`) run whole like a grid entry, in the same
  round (the grid's order reversed every other round), over the grid's
  best: the choice itself, apart from when it was made;
- autotune's retuned epochs over the same epochs of that run whole: what
  retuning live costs the epochs after it settled, the setting being the
  same (the decision that settles falls in the first of them), in
  batches/s and in CPU per batch (the main process's and its ended
  children's: the workers, and the settling decision's `tune`; another
  program's load on a shared machine moves it far less than the rate).
The last lines: autotune over the grid's best, for each way.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from costly import costly_dataset  # noqa: E402

EPOCHS = 6

TRAIN = textwrap.dedent("""
    import json, os, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

""") + costly_dataset(0.001, 0.004, "torch.full((8,), float(i)), i % 2") + textwrap.dedent("""

    if __name__ == "__main__":
        way, samples, epochs, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        import multiprocessing
        multiprocessing.set_start_method("fork", force=True)
        torch.set_num_threads(1)
        loader = DataLoader(Costly(samples), batch_size=4, shuffle=True, num_workers=0)
        rates, cpu_ms = [], []
        for epoch in range(epochs):
            if way == "new":
                loader = DataLoader(Costly(samples), batch_size=4, shuffle=True, num_workers=0)
            start, batches = time.monotonic(), 0
            cpu = time.process_time() + sum(os.times()[2:4])
            for x, y in loader:
                time.sleep(0.002)  # the step
                batches += 1
            rates.append(batches / (time.monotonic() - start))
            # The epoch's CPU, this process's and its ended workers' (each
            # epoch's workers are joined by its end unless persistent).
            cpu_ms.append(1000 * (time.process_time() + sum(os.times()[2:4]) - cpu) / batches)
        with open(out, "w") as f:
            json.dump(rates, f)
        with open(out + ".cpu", "w") as f:
            json.dump(cpu_ms, f)
""")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("%s exited %d\n%s" % (" ".join(cmd[:3]), r.returncode, r.stderr[-3000:]))
    return r


def grid_run(pipetune, tmp, script, way, samples, workers):
    """Per-epoch rates with num_workers=`workers`, or a kwargs file's."""
    kwargs = workers if isinstance(workers, str) else os.path.join(tmp, "grid%d.json" % workers)
    if not isinstance(workers, str):
        with open(kwargs, "w") as f:
            json.dump({"num_workers": workers}, f)
    out = os.path.join(tmp, "rates.json")
    run([pipetune, "profile", "--trace", os.path.join(tmp, "grid.trace"), "--apply", kwargs, "--",
         sys.executable, script, way, str(samples), str(EPOCHS), out])
    with open(out) as f:
        return json.load(f)


def autotune_run(pipetune, tmp, script, way, samples, cores):
    """Per-epoch rates, the first epoch at the settled settings (1-based),
    the decisions' median cost (ms) and the time to settled (s)."""
    out = os.path.join(tmp, "rates.json")
    r = run([pipetune, "autotune", "--trace", os.path.join(tmp, "auto.trace"), "--cores", cores, "--",
             sys.executable, script, way, str(samples), str(EPOCHS), out])
    with open(out) as f:
        rates = json.load(f)
    settled = re.search(r"pipetune autotune: epoch (\d+): (settled at|.*\); settled)", r.stderr)
    summary = re.search(r"settled ([\d.]+) s after the first epoch began, after \d+ decisions of (\d+) ms", r.stderr)
    if not settled or not summary:
        sys.exit("autotune did not settle in %d epochs:\n%s" % (EPOCHS, r.stderr))
    changes = [line for line in r.stderr.splitlines() if line.startswith("pipetune autotune:")]
    return rates, int(settled.group(1)), float(summary.group(2)), float(summary.group(1)), changes


def cpu_of_last_run(tmp):
    """CPU ms per batch of each epoch of the last run (the script's .cpu file)."""
    with open(os.path.join(tmp, "rates.json.cpu")) as f:
        return json.load(f)


def mean_from(rates, first_epoch):
    return statistics.mean(rates[first_epoch - 1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--grid", default="0,1,2,3,4")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--samples", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default="kept,new")
    args = parser.parse_args()
    pipetune = os.path.join(os.path.abspath(args.build), "cli", "pipetune")
    grid = [int(x) for x in args.grid.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        for way in args.ways.split(","):
            retuned, whole, costs, settle_s, settled_runs, live, live_cpu = [], [], [], [], [], [], []
            grid_rates = {n: [] for n in grid}
            for round_index in range(args.rounds):
                rates, first, cost, seconds, changes = autotune_run(pipetune, tmp, script, way, args.samples,
                                                                    args.cores)
                auto_cpu = cpu_of_last_run(tmp)
                if round_index == 0:
                    print("%s, round 1:\n  %s" % (way, "\n  ".join(changes)))
                settled_kwargs = os.path.join(tmp, "settled.json")
                os.replace(os.path.join(tmp, "auto.dataloader.json"), settled_kwargs)
                # Odd rounds run the grid in reverse: a load that drifts
                # through a round falls on either end alike.
                order = grid + ["settled"] if round_index % 2 == 0 else ["settled"] + grid[::-1]
                runs = {}
                for n in order:
                    runs[n] = grid_run(pipetune, tmp, script, way, args.samples, settled_kwargs if n == "settled" else n)
                    if n == "settled":
                        settled_cpu = cpu_of_last_run(tmp)
                settled_run = runs.pop("settled")
                settled_runs.append(mean_from(settled_run, 1) / max(mean_from(runs[n], 1) for n in grid))
                live.append(mean_from(rates, first) / mean_from(settled_run, first))
                live_cpu.append(mean_from(auto_cpu, first) / mean_from(settled_cpu, first))
                best_after = max(mean_from(runs[n], first) for n in grid)
                best_whole = max(mean_from(runs[n], 1) for n in grid)
                retuned.append(mean_from(rates, first) / best_after)
                whole.append(mean_from(rates, 1) / best_whole)
                costs.append(cost)
                settle_s.append(seconds)
                for n in grid:
                    grid_rates[n].append(mean_from(runs[n], 1))
                print("  round %d: settled from epoch %d: %s batches/s per epoch; retuned/grid best %.3f, all "
                      "epochs %.3f; the settled kwargs run whole/grid best %.3f; retuned/the same epochs run whole "
                      "%.3f (%s), its CPU per batch %.3f" % (
                          round_index + 1, first, " ".join("%.1f" % r for r in rates), retuned[-1], whole[-1],
                          settled_runs[-1], live[-1], " ".join("%.1f" % r for r in settled_run), live_cpu[-1]))
            for n in grid:
                print("  num_workers=%d: median %.1f batches/s over 6 epochs" % (n, statistics.median(grid_rates[n])))
            print("%s: decisions %.0f ms (median), settled %.1f s after the first epoch began (median)" % (
                way, statistics.median(costs), statistics.median(settle_s)))
            print("%s: autotune's retuned epochs over the grid's best: %.3f (median; rounds %s); all 6 epochs %.3f" % (
                way, statistics.median(retuned), " ".join("%.3f" % r for r in retuned), statistics.median(whole)))
            print("%s: the settled kwargs, run whole like the grid, over the grid's best: %.3f (median; rounds %s)" % (
                way, statistics.median(settled_runs), " ".join("%.3f" % r for r in settled_runs)))
            print("%s: autotune's retuned epochs over the same epochs of the settled kwargs run whole: %.3f (median; "
                  "rounds %s); their CPU per batch (this process and its workers) %.3f (median; rounds %s)" % (
                      way, statistics.median(live), " ".join("%.3f" % r for r in live), statistics.median(live_cpu),
                      " ".join("%.3f" % r for r in live_cpu)))


if __name__ == "__main__":
    main()
