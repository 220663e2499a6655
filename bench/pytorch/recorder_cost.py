"""What the Python recorder costs a DataLoader loop, per sample and as a
ratio, measured side by side in one run (docs/benchmarks-pytorch.md). From
the repository root:

    /usr/bin/python3 bench/pytorch/recorder_cost.py [BUILD_DIR] [--pairs N] [--samples N]

One script, run alternately untraced (plain python3) and traced (`pipetune
profile`), N pairs. Its loop times itself and prints the seconds, so both
sides are timed the same way and start-up (Python, torch, the tracer's
session) is left out. Two workloads:

- empty: samples that cost nothing (a small tensor), two transforms that do
  nothing, batch 8, num_workers=0: the loop is nearly all recorder, and
  (traced - untraced) / samples is its cost per sample (load, each
  transform, and its share of the per-batch records);
- 1 ms: the same with each sample spinning 1 ms of CPU, a light real
  sample, where traced / untraced is what a user would notice.

The medians of the pairs are printed; the per-sample cost and the ratio last.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

SCRIPT = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    class Nothing:
        def __call__(self, x):
            return x

    class Samples(Dataset):
        def __init__(self, n, cost):
            self.n, self.cost = n, cost
            self.transform = transforms.Compose([Nothing(), Nothing()])
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            if self.cost:
                spin(self.cost)
            return self.transform(torch.zeros(4)), i

    if __name__ == "__main__":
        samples, cost = int(sys.argv[1]), float(sys.argv[2])
        loader = DataLoader(Samples(samples, cost), batch_size=8, num_workers=0)
        begin = time.perf_counter()
        for batch, labels in loader:
            pass
        print("loop_seconds %.6f" % (time.perf_counter() - begin))
""")


def loop_seconds(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    for line in r.stdout.splitlines():
        if line.startswith("loop_seconds "):
            return float(line.split()[1])
    sys.exit("no loop_seconds line from: %s\n%s" % (" ".join(cmd), r.stdout))


def option(name, default):
    if name in sys.argv:
        return int(sys.argv[sys.argv.index(name) + 1])
    return default


def main():
    args = [a for i, a in enumerate(sys.argv[1:], 1)
            if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
    build = args[0] if args else "build"
    pairs = option("--pairs", 5)
    samples = option("--samples", 20000)
    pipetune = os.path.abspath(os.path.join(build, "cli", "pipetune"))
    python = sys.executable
    tmp = tempfile.mkdtemp(prefix="pipetune-recorder-cost-")
    script = os.path.join(tmp, "loop.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    results = {}
    for label, n, cost in (("empty", samples, 0.0), ("1 ms", max(1, samples // 10), 0.001)):
        untraced, traced = [], []
        for pair in range(pairs):
            untraced.append(loop_seconds([python, script, str(n), str(cost)]))
            trace = os.path.join(tmp, "t%d.trace" % pair)
            traced.append(loop_seconds([pipetune, "profile", "--trace", trace, "--", python, script, str(n),
                                        str(cost)]))
        u, t = statistics.median(untraced), statistics.median(traced)
        results[label] = (n, u, t)
        print("%-6s %6d samples: untraced %.3f s, traced %.3f s (median of %d pairs; pairs %s)" % (
            label, n, u, t, pairs, ", ".join("%.3f/%.3f" % p for p in zip(traced, untraced))))
    n, u, t = results["empty"]
    print("recorder cost per sample (empty samples, num_workers=0): %.1f us" % ((t - u) / n * 1e6))
    n, u, t = results["1 ms"]
    print("untraced / traced, 1 ms samples: %.3f" % (u / t))


if __name__ == "__main__":
    main()
