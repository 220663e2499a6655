"""Fetch threads against the num_workers grid, on a store 25 ms away
(docs/benchmarks-pytorch.md, "Fetch threads on slow storage"). From the
repository root, as root (it makes a network namespace):

    /usr/bin/python3 bench/pytorch/fetch_threads.py [BUILD_DIR] [--grid 0,1,2,4,8,16,24,32]
        [--files N] [--batch B] [--cores C] [--json FILE]
        [--before PACKAGE] [--bound W:K,W:K,...] [--trace-at W:K]

The store (tests/python/_slow_store.py) serves N files of 4 KiB from a
network namespace of its own, over a veth pair, each GET waiting 25 ms
(netem on the link, or the server where the kernel has no netem); each
sample is one GET on a kept-alive connection and 0.4 ms of CPU.

1. One traced run at num_workers=2 (`pipetune profile`; --trace-at W:K
   traces W workers x K fetch threads instead), and its plan
   (`pipetune tune`, with --cores C when given: the free share of a
   machine others share): workers x fetch threads x prefetch, and the
   predicted images/s.
2. Untraced, one run each, the plan alternated with the grid's points: the
   plan before each point, applied with no code change
   (PIPETUNE_DATALOADER_APPLY, the bootstrap on PYTHONPATH). Each run prints its images/s (from its first
   batch) and the peak of its processes, threads and resident memory.

Prints a table, then the ratios the issue asks for: the plan over the
grid's best (images/s from each run's first batch), its memory over that
point's, predicted over measured (over the whole epoch, the workers'
start-up included, as the model predicts an epoch as long as the traced
one), and the
plan's rate over its latency bound (reads in flight / one read's latency).
--before PACKAGE: the plan is also run with another pipetune package
(another checkout's python/ folder, e.g. main's, for its fetch threads),
alternated with this one's. --bound W:K,...: each setting (W workers x K
fetch threads, prefetch 2) run with this package, and --before's where
given, alternated, and its rate (from the first batch) over its latency
bound (W x min(K, B) reads in flight / one GET's latency).
--json writes the same figures for tests/python/test_fetch.py (tune_store).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))
import _slow_store  # noqa: E402

PYTHON = sys.executable
PACKAGE = os.path.abspath(os.path.join(HERE, "..", "..", "python"))


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit("%s: exit %d\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def read_latency(url, reads=40):
    """One GET's mean wall time, alone on a kept-alive connection."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    seconds = []
    for k in range(reads):
        began = time.monotonic()
        c.request("GET", "/%05d.bin" % k)
        c.getresponse().read()
        seconds.append(time.monotonic() - began)
    c.close()
    return statistics.median(seconds[1:])


def store_and_script(folder, files):
    """`files` files in `folder` served by the slow store, and the training
    script beside them: (the store, not yet entered; the script's path).
    Exits 77 (skipped) where no network namespace can be made."""
    root = os.path.join(folder, "files")
    _slow_store.make_files(root, files)
    try:
        store = _slow_store.open_store(root)
    except _slow_store.Unavailable as error:
        print("skipped: %s" % error)
        sys.exit(77)
    script = os.path.join(folder, "train.py")
    with open(script, "w") as f:
        f.write(_slow_store.train_source())
    return store, script


def measure(script, url, files, batch, workers, threads, prefetch, apply=None, package=PACKAGE):
    """One untraced run of the script; its figures. `apply`: a kwargs file
    applied with no code change (the bootstrap on PYTHONPATH reads it), over
    the script's own settings; `package`: the pipetune package that applies it."""
    env = dict(os.environ, PYTHONPATH=package)
    if apply:
        env["PIPETUNE_DATALOADER_APPLY"] = apply
    out = _slow_store.parse_train_output(
        run([PYTHON, script, url, str(files), str(batch), str(workers), str(threads), str(prefetch)], env))
    out.update(workers=workers, fetch_threads=threads, prefetch=prefetch)
    return out


def plan(pipetune, script, url, files, batch, folder, cores, traced=(2, 1)):
    """The traced run (`traced`: workers, fetch threads) and `tune`'s plan
    of it: (kwargs, predicted images/s)."""
    trace = os.path.join(folder, "traced.trace")
    run([pipetune, "profile", "--trace", trace, "--", PYTHON, script, url, str(files), str(batch),
         str(traced[0]), str(traced[1]), "2"])
    kwargs_path = os.path.join(folder, "plan.json")
    text = run([pipetune, "tune", trace, "-o", kwargs_path, "--format", "json"] +
               (["--cores", str(cores)] if cores else []))
    with open(kwargs_path) as f:
        kwargs = json.load(f)
    kwargs = kwargs.get("dataloader_kwargs", kwargs)
    return kwargs_path, kwargs, json.loads(text)["predicted_throughput"] * batch


def measure_bounds(script, url, files, batch, folder, latency, settings, before):
    """Each W:K setting's rate against its latency bound, this package's
    runs alternated with --before's: the median of two runs of each."""
    out = []
    for workers, threads in settings:
        path = os.path.join(folder, "bound-%d-%d.json" % (workers, threads))
        with open(path, "w") as f:
            json.dump({"num_workers": workers, "fetch_threads": threads, "prefetch_factor": 2}, f)
        runs = {"after": [], "before": []}
        for _ in range(2):
            for name, package in (("after", PACKAGE), ("before", before)):
                if package:
                    runs[name].append(measure(script, url, files, batch, 0, 1, 2, apply=path, package=package))
        entry = {"workers": workers, "fetch_threads": threads, "bound": max(1, workers) * min(threads, batch) / latency}
        for name, got in runs.items():
            median = statistics.median if got else (lambda _: None)
            entry[name] = median([r["images_per_second"] for r in got])
            # Reads in flight over the W x K threads, and one read's wall time in the run: where the
            # threads are kept busy, what the rate lacks of the bound is reads slower than alone.
            entry[name + "_busy"] = median([r["reads_in_flight"] / (max(1, workers) * threads) for r in got])
            entry[name + "_read_s"] = median([r["read_seconds"] for r in got])
        out.append(entry)
    return out


def _said(b, name):
    if b[name] is None:
        return "-"
    return "%.0f images/s (%.2f), threads busy %.2f, a read %.1f ms" % (
        b[name], b[name] / b["bound"], b[name + "_busy"], b[name + "_read_s"] * 1e3)


def main():
    args = sys.argv[1:]
    build = "build"
    grid = [0, 1, 2, 4, 8, 16, 24, 32]
    files, batch, json_path, cores, before, bound, traced = 1920, 32, None, None, None, [], (2, 1)
    while args:
        a = args.pop(0)
        if a == "--grid":
            grid = [int(w) for w in args.pop(0).split(",")]
        elif a == "--files":
            files = int(args.pop(0))
        elif a == "--batch":
            batch = int(args.pop(0))
        elif a == "--cores":
            cores = float(args.pop(0))
        elif a == "--before":
            before = os.path.abspath(args.pop(0))
        elif a == "--bound":
            bound = [tuple(int(x) for x in wk.split(":")) for wk in args.pop(0).split(",")]
        elif a == "--trace-at":
            traced = tuple(int(x) for x in args.pop(0).split(":"))
        elif a == "--json":
            json_path = args.pop(0)
        else:
            build = a
    pipetune = os.path.abspath(os.path.join(build, "cli", "pipetune"))
    with tempfile.TemporaryDirectory() as folder:
        store, script = store_and_script(folder, files)
        with store:
            latency = read_latency(store.url)
            # Traced over the same epoch as the runs measured: the plan's
            # prediction is for an epoch as long as the traced one.
            kwargs_path, kwargs, predicted = plan(pipetune, script, store.url, files, batch, folder, cores,
                                                     traced)
            tuned_setting = (kwargs.get("num_workers", 0), kwargs.get("fetch_threads", 1),
                             kwargs.get("prefetch_factor") or 2)
            tuned, points, tuned_before = [], [], []
            for w in grid:  # the plan, then a point: alternated, one run each
                tuned.append(measure(script, store.url, files, batch, 0, 1, 2, apply=kwargs_path))
                tuned[-1].update(workers=tuned_setting[0], fetch_threads=tuned_setting[1], prefetch=tuned_setting[2])
                if before:
                    tuned_before.append(measure(script, store.url, files, batch, 0, 1, 2, apply=kwargs_path,
                                                package=before))
                points.append(measure(script, store.url, files, batch, w, 1, 2))
            bounds = measure_bounds(script, store.url, files, batch, folder, latency, bound, before)
    # Judged over whole epochs, the iterator's start-up included: a point
    # with many workers has every batch in flight before the first arrives
    # (32 workers x prefetch 2 over 30 batches), so its rate from the first
    # batch on counts reads made during the start-up (4958 images/s measured
    # where 32 reads in flight of 26 ms allow 1230).
    best = max(points, key=lambda p: p["epoch_images_per_second"])
    tuned_rate = statistics.median(t["images_per_second"] for t in tuned)
    tuned_memory = statistics.median(t["rss_bytes"] for t in tuned)
    tuned_epoch_rate = statistics.median(t["epoch_images_per_second"] for t in tuned)
    in_flight = max(1, tuned_setting[0]) * min(tuned_setting[1], batch)
    result = {
        "store": store.kind, "read_latency_s": latency, "traced": list(traced), "free_cores": cores,
        "plan": kwargs, "predicted_images_per_second": predicted,
        "tuned": tuned, "grid": points, "tuned_images_per_second": tuned_rate,
        "grid_best": best, "tuned_over_grid_best": statistics.median(
            t["epoch_images_per_second"] for t in tuned) / best["epoch_images_per_second"],
        "tuned_memory_over_grid_best": tuned_memory / best["rss_bytes"],
        "tuned_epoch_images_per_second": tuned_epoch_rate,
        "predicted_over_measured": predicted / tuned_epoch_rate,
        "latency_bound_images_per_second": in_flight / latency,
        "tuned_over_latency_bound": tuned_rate / (in_flight / latency),
        "bounds": bounds,
    }
    if tuned_before:
        result["tuned_before_images_per_second"] = statistics.median(t["images_per_second"] for t in tuned_before)
        result["tuned_before_over_latency_bound"] = result["tuned_before_images_per_second"] / (in_flight / latency)
    print("store: %s, one GET alone %.1f ms; traced at %d workers x %d fetch threads; tune --cores %s" % (
        store.kind, latency * 1e3, traced[0], traced[1], cores or "(the host's)"))
    print("plan: %s (predicted %.0f images/s)" % (json.dumps(kwargs, sort_keys=True), predicted))
    print("%-30s %9s %8s %9s %10s %16s" % ("setting", "processes", "threads", "memory", "epoch images/s",
                                            "from 1st batch"))
    for name, p in [("plan: %d workers x %d threads" % tuned_setting[:2], tuned[0])] + \
            [("num_workers=%d" % p["workers"], p) for p in points]:
        print("%-30s %9d %8d %8.0fM %10.0f %16.0f" % (name, p["processes"], p["threads"], p["rss_bytes"] / 2**20,
                                                     p["epoch_images_per_second"], p["images_per_second"]))
    print("plan, median of %d runs: %.0f images/s over the epoch (%.0f from the first batch), %.0f MiB" % (
        len(tuned), tuned_epoch_rate, tuned_rate, tuned_memory / 2**20))
    print("plan over the grid's best (num_workers=%d), whole epochs: %.2f; its memory over that point's: %.2f" % (
        best["workers"], result["tuned_over_grid_best"], result["tuned_memory_over_grid_best"]))
    print("latency bound: %d reads in flight / %.1f ms = %.0f images/s; the plan reached %.2f of it" % (
        in_flight, latency * 1e3, result["latency_bound_images_per_second"], result["tuned_over_latency_bound"]))
    print("predicted over measured (the epoch, start-up included, %.0f images/s): %.2f" % (
        tuned_epoch_rate, result["predicted_over_measured"]))
    if tuned_before:
        print("the plan with --before's package: %.0f images/s from the first batch, %.2f of the latency bound" % (
            result["tuned_before_images_per_second"], result["tuned_before_over_latency_bound"]))
    for b in bounds:
        print("%d workers x %d threads: bound %.0f images/s; this package %s; --before's %s" % (
            b["workers"], b["fetch_threads"], b["bound"], _said(b, "after"), _said(b, "before")))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
