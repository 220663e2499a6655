"""pipetune.Loader(autotune=True) on an under-provisioned config: a stage
that waits 6 ms per image left at one worker. Usage: test_loader_autotune.py
CASE PIPETUNE. Exit 77 when this Python has no torch (the test is skipped).

Cases:
  retunes  the training script's loop is unchanged; its stderr shows the
           decisions (knob old -> new, predicted, measured); the waiting
           stage's workers are raised while it runs (later epochs are faster,
           also one started after an epoch left half-read); every epoch sees
           every image exactly once; close() writes the settled config beside
           the config, which `pipetune run` accepts; the temporary trace is gone
  errors   bad autotune options are ValueErrors naming the option
"""
import glob
import importlib.util
import json
import os
import sys
import tempfile
import textwrap

from _common import fail, run

if importlib.util.find_spec("torch") is None:
    print("skipped: %s has no torch" % sys.executable)
    sys.exit(77)

IMAGES = 64
# At one worker an epoch takes 0.4 s, tuned 0.1 s (the training step's
# 5 ms a batch): the change comes in the first epochs, is judged about a
# second later, and the last epochs run settled.
EPOCHS = 20
HALF_READ = 14


def make_images(root):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(3)
    for i in range(IMAGES):
        folder = os.path.join(root, "c%02d" % i)  # its label is i
        os.makedirs(folder, exist_ok=True)
        pixels = rng.integers(0, 256, size=(20, 20, 3)).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, "%d.jpg" % i))


def config(root):
    # `slow` sleeps 6 ms an image: at one worker an epoch takes at least
    # 64 x 6 ms = 0.38 s, where a dozen workers take a few tens of ms.
    return {"name": "slow_remote", "stages": [
        {"name": "files", "op": "list_files", "args": {"image_folder": root, "shuffle_seed": 1}},
        {"name": "read", "op": "read_file"},
        {"name": "decode", "op": "map", "fn": "jpeg_decode"},
        {"name": "slow", "op": "map", "fn": "io_wait", "args": {"ms": 6}, "parallelism": 1},
        {"name": "normalize", "op": "map", "fn": "normalize", "args": {"mean": [0.5] * 3, "std": [0.25] * 3}},
        {"name": "batch", "op": "batch", "args": {"size": 4}},
        {"name": "again", "op": "repeat", "args": {"count": 3}},
        {"name": "prefetch", "op": "prefetch", "buffer": 1}]}


TRAIN = textwrap.dedent("""\
    import json, sys, time
    import torch  # as a training script does, before its loop
    import pipetune
    loader = pipetune.Loader(sys.argv[1], autotune=True, autotune_refit_seconds=0.5, autotune_max_threads=24)
    epochs = []
    for epoch in range(EPOCHS):
        start, ids = time.monotonic(), []
        for images, labels in loader:
            ids += labels.tolist()  # one image per class folder: a label is the image
            time.sleep(0.005)  # the training step
        epochs.append({"seconds": time.monotonic() - start, "ids": ids})
        if epoch == HALF_READ:  # an epoch left half-read: the next one is built again
            for i, _ in enumerate(loader):
                if i == 3:
                    break
    live = loader.autotuned_config()
    loader.close()
    json.dump({"epochs": epochs, "live": live, "settled": loader.autotuned_config(),
               "path": loader.autotuned_path, "decisions": loader.decisions}, open(sys.argv[2], "w"))
""").replace("EPOCHS", str(EPOCHS)).replace("HALF_READ", str(HALF_READ))


def case_retunes(tmp, pipetune):
    root = os.path.join(tmp, "data")
    make_images(root)
    path = os.path.join(tmp, "slow.json")
    with open(path, "w") as f:
        json.dump(config(root), f, indent=2)
    script, out = os.path.join(tmp, "train.py"), os.path.join(tmp, "out.json")
    with open(script, "w") as f:
        f.write(TRAIN)
    env = dict(os.environ, PYTHONPATH=python_dir(pipetune), TMPDIR=tmp)
    done = run([sys.executable, script, path, out], env=env)
    if done.returncode != 0:
        fail("the training script failed", done)
    result = json.load(open(out))
    epochs = result["epochs"]
    for number, epoch in enumerate(epochs):
        if sorted(epoch["ids"]) != list(range(IMAGES)):
            fail("epoch %d did not see every image exactly once: %s" % (number, sorted(epoch["ids"])), done)
    changes = [d for d in result["decisions"] if d["kind"] == "change"]
    raised = [m for d in changes for m in d["moves"] if m["stage"] == "slow" and m["new"] > m["old"]]
    if not raised:
        fail("no change raised the slow stage's workers: %s" % result["decisions"], done)
    if "slow parallelism 1 -> " not in done.stderr or "predicted" not in done.stderr:
        fail("the decisions are not printed as `pipetune autotune` prints them", done)
    first, last, rebuilt = epochs[0]["seconds"], epochs[-1]["seconds"], epochs[HALF_READ + 1]["seconds"]
    if not (last < 0.5 * first and rebuilt < 0.5 * first):
        fail("epochs did not speed up live: first %.3f s, after the half-read epoch %.3f s, last %.3f s" %
             (first, rebuilt, last), done)
    settled = result["settled"]
    # A thread a stage (the Loader drops `repeat`), the parallel stages' workers.
    workers = {s["name"]: s.get("parallelism", 1) for s in settled["stages"] if s["op"] != "repeat"}
    if workers["slow"] <= 1 or sum(workers.values()) > 24:
        fail("settled workers %s: slow not raised, or over the 24-thread budget" % workers, done)
    if [s["name"] for s in settled["stages"]] != [s["name"] for s in config(root)["stages"]]:
        fail("the settled config is not the given one's stages (repeat kept): %s" % settled["stages"], done)
    expected = os.path.join(tmp, "slow.autotuned.json")
    if result["path"] != expected or json.load(open(expected)) != settled:
        fail("the settled config was not written to %s (got %r)" % (expected, result["path"]), done)
    if "settled config: " + expected not in done.stderr:
        fail("close() did not say where the settled config went", done)
    ran = run([pipetune, "run", expected, "--seconds", "1"])
    if ran.returncode != 0:
        fail("`pipetune run` rejects the settled config", ran)
    if glob.glob(os.path.join(tmp, "pipetune-loader-autotune-*")):
        fail("the temporary trace was left behind: %s" % glob.glob(os.path.join(tmp, "pipetune-loader-*")))
    print("ok: slow workers %s; epochs %.3f s -> %.3f s (after a half-read epoch %.3f s); %d decisions" %
          (workers["slow"], first, last, rebuilt, len(result["decisions"])))


def case_errors(tmp, pipetune):
    sys.path.insert(0, python_dir(pipetune))
    import pipetune as pt

    root = os.path.join(tmp, "data")
    make_images(root)
    path = os.path.join(tmp, "slow.json")
    with open(path, "w") as f:
        json.dump(config(root), f)
    for kwargs, words in (
            ({"autotune_refit_seconds": 0}, "autotune_refit_seconds must be a positive number, got 0"),
            ({"autotune_cores": -1}, "autotune_cores must be a positive number"),
            ({"autotune_max_threads": 2.5}, "autotune_max_threads must be a positive integer"),
            ({"autotune_memory": "4GiB"}, "autotune_memory must be a positive integer"),
            ({"autotune_output": os.path.join(tmp, "missing", "x.json")}, "autotune_output: "),
    ):
        try:
            pt.Loader(path, autotune=True, **kwargs)
        except ValueError as e:
            if words not in str(e):
                fail("%s: the error %r does not say %r" % (kwargs, str(e), words))
        else:
            fail("%s was accepted" % kwargs)
    try:
        pt.Loader(path, autotune_cores=2)
    except ValueError as e:
        if "need autotune=True" not in str(e):
            fail("autotune_cores without autotune: %r" % str(e))
    else:
        fail("autotune_cores without autotune=True was accepted")
    print("ok: bad autotune options name the option")


def python_dir(pipetune):
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(pipetune))), "python")


def main():
    case, pipetune = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        globals()["case_" + case](tmp, pipetune)


if __name__ == "__main__":
    main()
