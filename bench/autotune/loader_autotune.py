"""pipetune.Loader(autotune=True) on an untuned config against pipetune.Loader
on the offline `pipetune tune` config (issue 29: "the same applies inside
pipetune.Loader"; the engine's target, >= 0.95, docs/benchmarks-tuner.md).
From the repository root:

    /usr/bin/python3 bench/autotune/loader_autotune.py [BUILD_DIR] [--rounds 3] [--after 40]

The config: an ImageFolder of 256 JPEGs (96x96) read, fetched (2 ms of
waiting an image, a remote store), decoded, resized, cropped, normalized and
batched by 16, every parallel stage at one worker and a prefetch buffer of
1. The training loop sleeps 3 ms a batch (its step).

- offline: the untuned config's Loader run 6 epochs under `pipetune profile`,
  then `pipetune tune` on that trace (TUNE_FLAGS, default --no-cache: a
  running pipeline gets no cache inserted, so the like-for-like plan is the
  knobs; without it the plan may cache the decoded images);
- each round, one fresh process: Loader(untuned, autotune=True) runs epochs
  until its `settled` decision, then it and Loader(tuned) run AFTER epochs
  each, alternating epoch by epoch (autotuned first, then tuned first, ...),
  so that a burst of other load hits both alike.
A round's ratio is the median over its epoch pairs of autotune's images/s
against the tuned Loader's; the figure is the median over rounds. Printed
with each round: both rates over all pairs, the time to settle, the
refits' cost and the decisions; then both configs' knobs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGES = 256

TRAIN = textwrap.dedent("""\
    import json, sys, time
    import torch
    import pipetune


    def epoch(loader):
        began, images = time.monotonic(), 0
        for x, y in loader:
            images += len(y)
            time.sleep(0.003)  # the training step
        return {"seconds": time.monotonic() - began, "images": images}


    mode, config, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "profile":  # 6 epochs of the untuned config, traced by `pipetune profile`
        loader = pipetune.Loader(config)
        for _ in range(6):
            epoch(loader)
        sys.exit(0)
    tuned, after = sys.argv[4], int(sys.argv[5])
    start = time.monotonic()
    auto = pipetune.Loader(config, autotune=True, autotune_output=out + ".autotuned.json")
    explored = []
    while not any(d["kind"] == "settled" for d in auto.decisions) and time.monotonic() - start < 90:
        explored.append(epoch(auto))
    settled = any(d["kind"] == "settled" for d in auto.decisions)
    base = pipetune.Loader(tuned)
    epoch(base)  # its first pass starts its threads
    pairs = []
    for i in range(after if settled else 0):
        first, second = (auto, base) if i % 2 == 0 else (base, auto)
        a, b = epoch(first), epoch(second)
        pairs.append({"auto": a if first is auto else b, "tuned": b if first is auto else a})
    auto.close()
    base.close()
    json.dump({"explored": explored, "settled": settled, "pairs": pairs, "decisions": auto.decisions},
              open(out, "w"))
""")


def make_images(root):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(5)
    for i in range(IMAGES):
        folder = os.path.join(root, "c%d" % (i % 4))
        os.makedirs(folder, exist_ok=True)
        base = rng.integers(0, 256, size=(1, 1, 3))
        pixels = np.clip(base + rng.integers(-40, 40, size=(96, 96, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, "%d.jpg" % i), quality=90)


def untuned_config(root):
    return {"name": "loader_autotune", "stages": [
        {"name": "files", "op": "list_files", "args": {"image_folder": root, "shuffle_seed": 3}},
        {"name": "read", "op": "read_file", "parallelism": 1},
        {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 2, "jitter": 0.5}, "parallelism": 1},
        {"name": "decode", "op": "map", "fn": "jpeg_decode", "parallelism": 1},
        {"name": "resize", "op": "map", "fn": "resize", "args": {"size": 64}, "parallelism": 1},
        {"name": "crop", "op": "map", "fn": "center_crop", "args": {"size": 56}, "parallelism": 1},
        {"name": "normalize", "op": "map", "fn": "normalize",
         "args": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}, "parallelism": 1},
        {"name": "batch", "op": "batch", "args": {"size": 16}},
        {"name": "prefetch", "op": "prefetch", "buffer": 1}]}


def knobs(config):
    return ", ".join("%s %s" % (s["name"], s.get("parallelism", s.get("buffer"))) for s in config["stages"]
                     if "parallelism" in s or "buffer" in s)


def rate(epochs):
    return sum(e["images"] for e in epochs) / sum(e["seconds"] for e in epochs)


def run(cmd, env, log):
    with open(log, "w") as f:
        done = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit("failed (%d): %s; see %s" % (done.returncode, " ".join(cmd), log))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--after", type=int, default=40, help="epochs measured after settling")
    args = parser.parse_args()
    pipetune = os.path.join(os.path.abspath(args.build), "cli", "pipetune")
    out = os.path.join(ROOT, "out", "loader_autotune")
    os.makedirs(out, exist_ok=True)
    data = os.path.join(out, "data")
    if not os.path.isdir(data):
        make_images(data)
    untuned, tuned = os.path.join(out, "untuned.json"), os.path.join(out, "tuned.json")
    with open(untuned, "w") as f:
        json.dump(untuned_config(data), f, indent=2)
    script = os.path.join(out, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
    python = sys.executable

    trace = os.path.join(out, "untuned.trace")
    run([pipetune, "profile", "--trace", trace, "--", python, script, "profile", untuned, "-"], env,
        os.path.join(out, "profile.log"))
    tune_flags = os.environ.get("TUNE_FLAGS", "--no-cache").split()
    run([pipetune, "tune", trace, "-o", tuned] + tune_flags, env, os.path.join(out, "tune.log"))

    ratios = []
    for r in range(args.rounds):
        result = os.path.join(out, "round%d.json" % r)
        run([python, script, "compare", untuned, result, tuned, str(args.after)], env, result + ".log")
        got = json.load(open(result))
        if not got["settled"]:
            print("round %d: autotune did not settle in 90 s; decisions in %s.log" % (r, result))
            continue
        pair_ratios = [rate([p["auto"]]) / rate([p["tuned"]]) for p in got["pairs"]]
        ratio = statistics.median(pair_ratios)
        ratios.append(ratio)
        settled_at = next(d["seconds"] for d in got["decisions"] if d["kind"] == "settled")
        refits = [d["refit_ms"] for d in got["decisions"] if d["refit_ms"] > 0]
        print("round %d: %.3f (median of %d epoch pairs; over all of them %.0f against %.0f images/s); settled at "
              "%.1f s after %d epochs, refit %.1f ms mean, %.1f max; untuned epoch 0 %.0f images/s" % (
                  r, ratio, len(pair_ratios), rate([p["auto"] for p in got["pairs"]]),
                  rate([p["tuned"] for p in got["pairs"]]), settled_at, len(got["explored"]),
                  statistics.mean(refits) if refits else 0, max(refits) if refits else 0,
                  rate(got["explored"][:1])))
        for d in got["decisions"]:
            print("    " + d["line"])
    last = os.path.join(out, "round%d.json.autotuned.json" % (args.rounds - 1))
    print("knobs: autotuned %s; tuned (tune %s) %s" % (
        knobs(json.load(open(last))) if os.path.exists(last) else "?", " ".join(tune_flags),
        knobs(json.load(open(tuned)))))
    if ratios:
        print("autotuned/tuned: %.3f (median of %d rounds: %s)" % (
            statistics.median(ratios), len(ratios), ", ".join("%.3f" % x for x in ratios)))


if __name__ == "__main__":
    main()
