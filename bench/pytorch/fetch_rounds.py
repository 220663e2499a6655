"""The model's price for fetch threads, setting by setting, on the store
25 ms away (docs/model.md, "Fetch threads"; docs/benchmarks-pytorch.md,
"Fetch threads: the model against each setting"). From the repository
root, as root (it makes a network namespace):

    /usr/bin/python3 bench/pytorch/fetch_rounds.py [BUILD_DIR]
        [--settings W:K,W:K,...] [--base W:K] [--files N] [--json FILE]

1. One traced run at the base setting (2 workers x 1 thread unless
   --base): the trace the model prices every setting from.
2. For each W:K setting (W workers x K fetch threads, prefetch 2): the
   model's images/s for it (`pipetune report BASE --what-if
   num_workers=W,fetch_threads=K`), one untraced run (images/s from its
   first batch, as fetch_threads.py measures), and one traced run whose
   GIL probe says how much of each sample held the GIL at that K and how
   long the fetch windows lasted per batch.

Prints, per setting: predicted, measured, their ratio, the probe's held
milliseconds per sample, and at 0 workers the round (the fetch windows'
seconds per round of K reads) beside one GET's latency plus K - 1 times
a sample's CPU (what the model prices for a fetch that waits), and plus
K - 1 times the probe's held time."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))
sys.path.insert(0, HERE)
import fetch_threads  # noqa: E402

PYTHON = sys.executable
BATCH = 32


def kwargs_file(folder, workers, threads):
    path = os.path.join(folder, "kwargs-%d-%d.json" % (workers, threads))
    with open(path, "w") as f:
        json.dump({"num_workers": workers, "fetch_threads": threads, "prefetch_factor": 2}, f)
    return path


def traced(pipetune, script, url, files, folder, workers, threads):
    """A traced run at W x K: its trace, and its report's dataloader section."""
    trace = os.path.join(folder, "t-%d-%d.trace" % (workers, threads))
    fetch_threads.run([pipetune, "profile", "--apply", kwargs_file(folder, workers, threads), "--trace", trace,
                       "--", PYTHON, script, url, str(files), str(BATCH), "0", "1", "2"])
    report = json.loads(fetch_threads.run([pipetune, "report", trace, "--format", "json"]))
    return trace, report


def predictions(pipetune, trace, settings):
    """The model's images/s for each W:K, from one trace."""
    cmd = [pipetune, "report", trace, "--format", "json"]
    for w, k in settings:
        cmd += ["--what-if", "num_workers=%d,fetch_threads=%d" % (w, k)]
    answers = json.loads(fetch_threads.run(cmd))["what_if"]
    return [a["throughput"] * BATCH for a in answers]


def main():
    args = sys.argv[1:]
    build, files, json_path = "build", 1920, None
    settings = [(0, 8), (0, 16), (0, 32), (1, 16), (2, 16)]
    base = (2, 1)
    while args:
        a = args.pop(0)
        if a == "--settings":
            settings = [tuple(int(x) for x in wk.split(":")) for wk in args.pop(0).split(",")]
        elif a == "--base":
            base = tuple(int(x) for x in args.pop(0).split(":"))
        elif a == "--files":
            files = int(args.pop(0))
        elif a == "--json":
            json_path = args.pop(0)
        else:
            build = a
    pipetune = os.path.abspath(os.path.join(build, "cli", "pipetune"))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        store, script = fetch_threads.store_and_script(folder, files)
        with store:
            latency = fetch_threads.read_latency(store.url)
            base_trace, _ = traced(pipetune, script, store.url, files, folder, *base)
            predicted = predictions(pipetune, base_trace, settings)
            for (w, k), guess in zip(settings, predicted):
                measured = fetch_threads.measure(script, store.url, files, BATCH, 0, 1, 2,
                                                 apply=kwargs_file(folder, w, k))
                _, report = traced(pipetune, script, store.url, files, folder, w, k)
                gil = report["dataloader"].get("gil") or {}
                row = {"workers": w, "fetch_threads": k, "predicted": guess,
                       "measured": measured["images_per_second"], "gil_ms": gil.get("gil_seconds_per_sample", 0) * 1e3}
                if w == 0 and gil:
                    rounds = report["dataloader"]["batches"] * -(-BATCH // k)
                    row["round_ms"] = gil["window_seconds"] / rounds * 1e3
                    others = min(k, BATCH) - 1
                    row["round_cpu_ms"] = (latency + others * gil["cpu_seconds_per_sample"]) * 1e3
                    row["round_held_ms"] = (latency + others * gil["gil_seconds_per_sample"]) * 1e3
                rows.append(row)
                print("%d workers x %2d threads: predicted %5.0f images/s, measured %5.0f (%.2f); the probe's GIL "
                      "%.2f ms a sample%s" % (
                          w, k, guess, row["measured"], guess / row["measured"], row["gil_ms"],
                          "; a round %.1f ms: one GET + (K - 1) x its CPU %.1f, x the probe's hold %.1f" % (
                              row["round_ms"], row["round_cpu_ms"], row["round_held_ms"]) if "round_ms" in row else ""))
                sys.stdout.flush()
    print("one GET alone %.1f ms; priced from a trace at %d workers x %d thread(s)" % (latency * 1e3, *base))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"read_latency_s": latency, "base": base, "settings": rows}, f, indent=1)


if __name__ == "__main__":
    main()
