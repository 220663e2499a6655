"""torchdata's StatefulDataLoader under `pipetune profile`, profiled and
tuned as a DataLoader is (docs/pytorch.md, "torchdata's
StatefulDataLoader"). Without its own hook a script built on it recorded
nothing: `report` and `tune` said "the program built no DataLoader".

Cases: workers0, workers2 and workers2_spawn check the report's rows and
counts (a spawned worker finds the hooked worker loop by name); tune checks
the plan and the keyword arguments written; apply_grid checks that the
tuned kwargs, applied with --apply, reach 0.95 of the best of a
num_workers grid run side by side in this test, each setting applied the
same way; resume checks that after --apply a loader's state_dict() taken
mid-epoch, loaded into a new loader, yields exactly the remaining batches.
Usage: test_stateful.py CASE PIPETUNE. Exit 77 where torchdata is missing
(Debian's python3)."""
import json
import os
import sys
import tempfile
import textwrap
from _common import SPIN_SOURCE, fail, json_report, run, skip_without

SAMPLES = 96
BATCH = 8

# A sample waits `wait` seconds (storage: off the CPU, so workers hide it
# whatever the load on the host) and spins 0.2 ms in its transform; the
# loop's step sleeps 5 ms.
SCRIPT = textwrap.dedent("""
    import json, sys, time
    import torch
    from torch.utils.data import Dataset
    from torchdata.stateful_dataloader import StatefulDataLoader
    from torchvision import transforms

    {spin}

    class Scale:
        def __call__(self, x):
            spin(0.0002)
            return x * 2.0

    class Stored(Dataset):
        def __init__(self, n, wait):
            self.n = n
            self.wait = wait
            self.transform = transforms.Compose([Scale()])
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            time.sleep(self.wait)
            return self.transform(torch.full((16,), float(i))), i

    def make_loader(workers, context=None):
        return StatefulDataLoader(Stored({samples}, {wait}), batch_size={batch}, shuffle=True,
                                  num_workers=workers, multiprocessing_context=context,
                                  generator=torch.Generator().manual_seed(7))

    def train(workers, context, epochs, out):
        loader = make_loader(workers, context)
        begin = time.perf_counter()
        batches = 0
        for epoch in range(epochs):
            for x, index in loader:
                time.sleep(0.005)
                batches += 1
        with open(out, "w") as f:
            json.dump({{"batches_per_second": batches / (time.perf_counter() - begin),
                       "num_workers": loader.num_workers}}, f)

    def resume(stop_after, out):
        # The order one uninterrupted epoch gives, then the same epoch cut
        # after `stop_after` batches and resumed in a new loader.
        whole = [index.tolist() for x, index in make_loader(0)]
        first = make_loader(0)
        seen = []
        for x, index in first:
            seen.append(index.tolist())
            if len(seen) == stop_after:
                break
        state = first.state_dict()
        del first
        second = make_loader(0)
        second.load_state_dict(state)
        rest = [index.tolist() for x, index in second]
        with open(out, "w") as f:
            json.dump({{"whole": whole, "seen": seen, "rest": rest, "num_workers": second.num_workers}}, f)

    if __name__ == "__main__":
        if sys.argv[1] == "resume":
            resume(int(sys.argv[2]), sys.argv[3])
        else:
            train(int(sys.argv[2]), sys.argv[3] if sys.argv[3] != "-" else None, int(sys.argv[4]), sys.argv[5])
""")


def write_script(tmp, wait):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT.format(spin=SPIN_SOURCE, samples=SAMPLES, batch=BATCH, wait=wait))
    return script


def profile(pipetune, tmp, name, args, apply=None):
    """Runs the script under `pipetune profile` (with --apply FILE); returns
    the trace and what the script wrote."""
    trace = os.path.join(tmp, name + ".trace")
    out = os.path.join(tmp, name + ".json")
    cmd = [pipetune, "profile", "--trace", trace]
    if apply:
        cmd += ["--apply", apply]
    r = run(cmd + ["--", sys.executable, os.path.join(tmp, "train.py")] + args + [out])
    if r.returncode != 0:
        fail("profile %s exited %d" % (name, r.returncode), r)
    with open(out) as f:
        return trace, json.load(f)


def expect(condition, message, doc=None):
    if not condition:
        if doc is not None:
            print(json.dumps(doc, indent=1))
        fail(message)


def check_rows(pipetune, tmp, workers, context):
    # A spawned worker imports torch again (seconds of CPU): one epoch's pair.
    epochs = 1 if context == "spawn" else 2
    trace, _ = profile(pipetune, tmp, "rows", ["train", str(workers), context, str(epochs)])
    rep = json_report(pipetune, trace)
    counts = {s["name"]: s["elements"] for s in rep["stages"] if s["elements"]}
    n_samples, n_batches = SAMPLES * epochs, SAMPLES // BATCH * epochs
    for name in ("load", "transform[0]:Scale"):
        expect(counts.get(name) == n_samples, "%s: %d samples" % (name, n_samples), rep)
    expect(counts.get("collate") == n_batches, "collate: %d batches" % n_batches, rep)
    dl = rep["dataloader"]
    expect(dl["batches"] == n_batches and dl["steps"] == n_batches, "the loop's batches and steps", rep)
    expect(dl["settings"]["num_workers"] == workers, "settings.num_workers", rep)
    if workers:
        expect(counts.get("transfer") == n_batches, "transfer: once per batch, not per acknowledgment", rep)
        expect(dl["worker_traces"] == workers * epochs, "each epoch's workers recorded", rep)
    expect(rep["predicted_throughput"] > 0, "the model predicts the run", rep)


def tune(pipetune, tmp, trace):
    kwargs = os.path.join(tmp, "tuned.json")
    r = run([pipetune, "tune", trace, "-o", kwargs, "--cores", "2", "--memory", "64GiB"])
    if r.returncode != 0 or "code change: DataLoader(" not in r.stdout:
        fail("tune", r)
    with open(kwargs) as f:
        return kwargs, json.load(f), r


def case_tune(pipetune, tmp):
    write_script(tmp, 0.004)
    trace, _ = profile(pipetune, tmp, "traced", ["train", "0", "-", "2"])
    _, kwargs, r = tune(pipetune, tmp, trace)
    # 32 ms of waiting per batch against a 5 ms step: workers, or fetch
    # threads in them (docs/pytorch.md), hide it.
    in_flight = max(1, kwargs["num_workers"]) * kwargs.get("fetch_threads", 1)
    expect(in_flight >= 3, "the plan adds workers or fetch threads: %s\n%s" % (kwargs, r.stdout))


def case_apply_grid(pipetune, tmp):
    write_script(tmp, 0.004)
    trace, _ = profile(pipetune, tmp, "traced", ["train", "0", "-", "2"])
    tuned, kwargs, _ = tune(pipetune, tmp, trace)
    grid = {}
    for workers in (0, 1, 2, 3, 4, 6):
        path = os.path.join(tmp, "grid%d.json" % workers)
        with open(path, "w") as f:
            json.dump({"num_workers": workers}, f)
        grid[workers] = path
    # Side by side: the tuned kwargs before and after the grid, each applied
    # with --apply to the same script (2 epochs, 24 batches).
    rates = {"tuned": []}
    for k, (name, path) in enumerate([("tuned", tuned)] + sorted(grid.items()) + [("tuned", tuned)]):
        _, out = profile(pipetune, tmp, "run%d" % k, ["train", "0", "-", "2"], apply=path)
        want = kwargs["num_workers"] if name == "tuned" else name
        expect(out["num_workers"] == want, "--apply %s set num_workers %d" % (name, want), out)
        rates.setdefault(name, []).append(out["batches_per_second"])
    best_grid = max(max(v) for k, v in rates.items() if k != "tuned")
    ratio = max(rates["tuned"]) / best_grid
    print("batches/s by num_workers: %s" % ", ".join("%s %s" % (k, "/".join("%.1f" % x for x in v))
                                                      for k, v in rates.items()))
    print("tuned %s: %.1f batches/s; grid best %.1f; ratio %.3f" % (kwargs, max(rates["tuned"]), best_grid, ratio))
    expect(ratio >= 0.95, "tuned over the grid's best: %.3f" % ratio, rates)


def case_resume(pipetune, tmp):
    write_script(tmp, 0.0)
    applied = os.path.join(tmp, "applied.json")
    with open(applied, "w") as f:
        json.dump({"num_workers": 2, "prefetch_factor": 3, "persistent_workers": True, "pin_memory": False}, f)
    trace, out = profile(pipetune, tmp, "resume", ["resume", "5"], apply=applied)
    expect(out["num_workers"] == 2, "--apply reached the resumed loader", out)
    whole, seen, rest = out["whole"], out["seen"], out["rest"]
    expect(len(whole) == SAMPLES // BATCH and seen == whole[:5], "the first 5 batches as an uninterrupted epoch", out)
    expect(rest == whole[5:], "the resumed loader yields exactly the remaining batches", out)
    rep = json_report(pipetune, trace)
    expect(rep["dataloader"]["settings"]["num_workers"] == 2, "the trace records the applied settings", rep)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    skip_without("torch", "torchvision", "torchdata")
    with tempfile.TemporaryDirectory() as tmp:
        if case in ("workers0", "workers2", "workers2_spawn"):
            write_script(tmp, 0.001)
            check_rows(pipetune, tmp, int(case[7]), "spawn" if case.endswith("spawn") else "-")
        elif case == "tune":
            case_tune(pipetune, tmp)
        elif case == "apply_grid":
            case_apply_grid(pipetune, tmp)
        elif case == "resume":
            case_resume(pipetune, tmp)
        else:
            fail("unknown case " + case)
    print("ok", case)


if __name__ == "__main__":
    main()
