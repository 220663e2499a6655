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
- each round, alternately (autotune first, then tuned first, ...): a fresh
  process with Loader(untuned, autotune=True) running epochs until the
  `settled` decision and AFTER epochs more, and a fresh process with
  Loader(tuned) running AFTER + 2 epochs (the first 2 left out).
The ratio is the median over rounds of autotune's images/s over its epochs
after settling against the tuned Loader's; printed with each round, the
time to settle, the refits' cost and both configs' knobs.
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
    config, mode, after, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    kwargs = {"autotune": True, "autotune_output": out + ".autotuned.json"} if mode == "auto" else {}
    start = time.monotonic()
    loader = pipetune.Loader(config, **kwargs)
    epochs, settled_epoch = [], None
    while True:
        began, images = time.monotonic(), 0
        for x, y in loader:
            images += len(y)
            time.sleep(0.003)  # the training step
        epochs.append({"at": began - start, "seconds": time.monotonic() - began, "images": images})
        if mode == "auto" and settled_epoch is None and any(d["kind"] == "settled" for d in loader.decisions):
            settled_epoch = len(epochs)  # the next epoch runs settled
        if mode == "profile" and len(epochs) == 6:
            break
        if mode == "tuned" and len(epochs) == after + 2:
            break
        if mode == "auto" and (settled_epoch is not None and len(epochs) >= settled_epoch + after
                               or time.monotonic() - start > 90):
            break
    loader.close()
    json.dump({"epochs": epochs, "settled_epoch": settled_epoch, "decisions": loader.decisions}, open(out, "w"))
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
    run([pipetune, "profile", "--trace", trace, "--", python, script, untuned, "profile", "0",
         os.path.join(out, "profile.json")], env, os.path.join(out, "profile.log"))
    tune_flags = os.environ.get("TUNE_FLAGS", "--no-cache").split()
    run([pipetune, "tune", trace, "-o", tuned] + tune_flags, env, os.path.join(out, "tune.log"))

    ratios = []
    for r in range(args.rounds):
        results = {}
        for mode in (("auto", "tuned") if r % 2 == 0 else ("tuned", "auto")):
            result = os.path.join(out, "%s%d.json" % (mode, r))
            run([python, script, untuned if mode == "auto" else tuned, mode, str(args.after), result], env,
                result + ".log")
            results[mode] = json.load(open(result))
        auto, base = results["auto"], results["tuned"]
        if auto["settled_epoch"] is None:
            print("round %d: autotune did not settle in 90 s; decisions in %s" % (r, os.path.join(out, "auto%d.json.log" % r)))
            continue
        after = auto["epochs"][auto["settled_epoch"]:]
        ratio = rate(after) / rate(base["epochs"][2:])
        ratios.append(ratio)
        settled_at = next(d["seconds"] for d in auto["decisions"] if d["kind"] == "settled")
        refits = [d["refit_ms"] for d in auto["decisions"] if d["refit_ms"] > 0]
        print("round %d: autotune %.0f images/s over %d epochs after settling, tuned %.0f: %.3f; settled at %.1f s "
              "(epoch %d), refit %.1f ms mean, %.1f max; untuned epoch 0 %.0f images/s" % (
                  r, rate(after), len(after), rate(base["epochs"][2:]), ratio, settled_at, auto["settled_epoch"],
                  statistics.mean(refits) if refits else 0, max(refits) if refits else 0,
                  rate(auto["epochs"][:1])))
        for d in auto["decisions"]:
            print("    " + d["line"])
    last = os.path.join(out, "auto%d.json.autotuned.json" % (args.rounds - 1))
    print("knobs: autotuned %s; tuned (tune %s) %s" % (
        knobs(json.load(open(last))) if os.path.exists(last) else "?", " ".join(tune_flags),
        knobs(json.load(open(tuned)))))
    if ratios:
        print("autotuned/tuned: %.3f (median of %d rounds: %s)" % (
            statistics.median(ratios), len(ratios), ", ".join("%.3f" % x for x in ratios)))


if __name__ == "__main__":
    main()
