"""The comparison tf.data users care about (docs/benchmarks-tfdata.md): on the
same files and cores, in one run, rounds alternating every variant:

  as written   examples/tfdata/train_tf.py: maps sequential, no prefetch, no cache
  AUTOTUNE     the same with num_parallel_calls=tf.data.AUTOTUNE on both maps
               and .prefetch(tf.data.AUTOTUNE) after the batch (TensorFlow's guide)
  npc=K        num_parallel_calls=K on both maps, prefetch AUTOTUNE: the grid
  pipetune     `pipetune tune` on a trace of the script as written, applied
               with `pipetune profile --apply PLAN --no-trace` (the script
               unchanged, run as the plan's code change would run it: untraced,
               as every other variant is)
  pipetune, memory short
               the same with --memory too small for the decoded images: no
               memory cache may be placed
  pipetune, memory short, on disk
               the same --memory with --cache-dir: a cache on disk
               (cache(filename)) in a directory made for each run and removed
               after it, so each round's first epoch fills it
  pipetune, memory short, traced
               the memory-short plan applied under tracing: the sampler keeps
               TensorFlow's autotuner on (it reads its model), so over
               "pipetune, memory short" this is what tracing a plan that turns
               the autotuner off costs
  as written, traced
               the script as written under `pipetune profile`: over "as
               written", tracing's cost (the issue's 3%)

Each figure is the script's own batches per second over all its epochs,
the first (filling a cache) included; the median over the rounds.

    python3 bench/tfdata/compare.py PIPETUNE [--files N] [--epochs E] [--rounds R]

Prints the Markdown table, then the ratios last."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "tfdata")
SCRIPT = os.path.abspath(os.path.join(EXAMPLES, "train_tf.py"))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
MAPS = ("ds = ds.map(process_path)", "ds = ds.map(augment)")
BATCH = "ds = ds.batch(32)"


def variant(folder, name, npc):
    """train_tf.py with both maps given num_parallel_calls=npc and a prefetch
    after the batch, as a user would write it."""
    with open(SCRIPT) as f:
        text = f.read()
    for line in MAPS:
        assert line in text, line
        text = text.replace(line, line[:-1] + ", num_parallel_calls=%s)" % npc)
    text = text.replace(BATCH, BATCH + ".prefetch(tf.data.AUTOTUNE)")
    path = os.path.join(folder, "train_tf_%s.py" % name)
    with open(path, "w") as f:
        f.write(text)
    shutil.copy(os.path.join(EXAMPLES, "_loop.py"), folder)  # the loop it imports from beside it
    return path


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-2000:]))
    return r


def figures(result):
    """The script's own figures: its JSON line (`pipetune profile` prints the
    trace's name after it)."""
    line = [l for l in result.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def prediction(pipetune, trace):
    report = json.loads(run([pipetune, "report", trace, "--format", "json"]).stdout)
    judged = "" if report.get("prediction_judged", True) else " (not judged: %s)" % report["window"]["reason"]
    return report["predicted_throughput"], report["throughput"], judged


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pipetune")
    parser.add_argument("--files", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--grid", default="1,2,4")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="pipetune-tfdata-bench-") as tmp:
        data = os.path.join(tmp, "images")
        run([py, os.path.join(EXAMPLES, "make_images.py"), data, str(args.files), "120", "160"])
        decoded_mib = args.files * 96 * 96 * 3 * 4 / 2**20
        trace = os.path.join(tmp, "as_written.ptrace")
        run([args.pipetune, "profile", "--trace", trace, "--", py, SCRIPT, data, str(args.epochs)])
        print("as written: predicted %.1f, measured %.1f batches/s in the report's window%s" % prediction(
            args.pipetune, trace))
        plans = {}
        short = "%dMiB" % (decoded_mib / 2)
        cache_dir = os.path.join(tmp, "disk_cache")  # made by the applied plan, removed after each run
        for label, memory, flags in (("pipetune", "4GiB", []), ("pipetune, memory short", short, []),
                                     ("pipetune, memory short, on disk", short, ["--cache-dir", cache_dir])):
            plans[label] = os.path.join(tmp, "plan_%d.json" % len(plans))
            out = run([args.pipetune, "tune", trace, "--memory", memory, "-o", plans[label]] + flags).stdout
            with open(plans[label]) as f:
                predicted = json.load(f)["predicted_throughput"]
            print("## %s (--memory %s%s): predicted %.1f batches/s (a cache's steady state: after its first "
                  "epoch)\n%s" % (label, memory, " ".join([""] + flags), predicted, out[out.find("code change"):]))
            hint = [l for l in out.splitlines() if "a cache on disk" in l]
            if hint:
                print("  the plan's hint: %s" % hint[0].strip())
        variants = [("as written", [py, SCRIPT, data, str(args.epochs)]),
                    ("AUTOTUNE", [py, variant(tmp, "autotune", "tf.data.AUTOTUNE"), data, str(args.epochs)])]
        for k in args.grid.split(","):
            variants.append(("npc=%s" % k, [py, variant(tmp, "npc%s" % k, k), data, str(args.epochs)]))
        for label, plan in plans.items():
            variants.append((label, [args.pipetune, "profile", "--apply", plan, "--no-trace", "--", py, SCRIPT,
                                     data, str(args.epochs)]))
        variants.append(("pipetune, memory short, traced",
                         [args.pipetune, "profile", "--trace", os.path.join(tmp, "applied.ptrace"), "--apply",
                          plans["pipetune, memory short"], "--", py, SCRIPT, data, str(args.epochs)]))
        variants.append(("as written, traced", [args.pipetune, "profile", "--trace",
                                                os.path.join(tmp, "traced.ptrace"), "--", py, SCRIPT, data,
                                                str(args.epochs)]))
        rates = {label: [] for label, _ in variants}
        later = {label: [] for label, _ in variants}  # epochs after the first: a cache's steady state
        for r in range(args.rounds):
            for label, cmd in variants:
                got = figures(run(cmd))
                shutil.rmtree(cache_dir, ignore_errors=True)  # the next run's first epoch fills it again
                rates[label].append(got["batches_per_second"])
                epochs = got.get("epoch_batches_per_second", [])[1:]
                later[label].append(statistics.mean(epochs) if epochs else float("nan"))
                print("round %d %-24s %.1f batches/s (epochs after the first %.1f)"
                      % (r + 1, label, rates[label][-1], later[label][-1]), flush=True)
    median = {label: statistics.median(v) for label, v in rates.items()}
    autotune = median["AUTOTUNE"]
    grid_best = max(v for k, v in median.items() if k.startswith("npc="))
    print("\n| pipeline | batches/s (median of %d) | over AUTOTUNE | over the grid's best |" % args.rounds)
    print("|---|---|---|---|")
    for label, _ in variants:
        print("| %s | %.1f | %.2f | %.2f |" % (label, median[label], median[label] / autotune,
                                              median[label] / grid_best))
    print("\nepochs after the first (a cache's steady state), median: pipetune %.1f, AUTOTUNE %.1f batches/s"
          % (statistics.median(later["pipetune"]), statistics.median(later["AUTOTUNE"])))
    disk = "pipetune, memory short, on disk"
    print("epochs after the first, median: memory short %.1f, memory short on disk %.1f batches/s (the disk "
          "cache's replay, against the plan's prediction above)"
          % (statistics.median(later["pipetune, memory short"]), statistics.median(later[disk])))
    # Every element the disk cache replays is a decoded image (float32,
    # 96x96x3) and its path: at most this many seconds per byte read back,
    # the whole step's time charged to the replay (the tuner's constant is
    # kDiskReplaySecondsPerByte, tuner/include/pipetune/tuner/candidate.h).
    element_bytes = 96 * 96 * 3 * 4 + 100
    disk_later, memory_later = statistics.median(later[disk]), statistics.median(later["pipetune"])
    print("the disk cache's replay measured: at most %.2g s per byte (every element's time in the epochs after "
          "the first, over its %d bytes); %.2g s per byte more than the memory cache's replay"
          % (1 / (disk_later * 32 * element_bytes), element_bytes,
             (1 / disk_later - 1 / memory_later) / (32 * element_bytes)))
    print("\npipetune / AUTOTUNE %.3f; pipetune / grid best %.3f; pipetune (memory short) / AUTOTUNE %.3f; "
          "pipetune (memory short, on disk) / AUTOTUNE %.3f; traced / untraced %.3f; the memory-short plan "
          "traced / untraced %.3f"
          % (median["pipetune"] / autotune, median["pipetune"] / grid_best,
             median["pipetune, memory short"] / autotune, median[disk] / autotune,
             median["as written, traced"] / median["as written"],
             median["pipetune, memory short, traced"] / median["pipetune, memory short"]))


if __name__ == "__main__":
    main()
