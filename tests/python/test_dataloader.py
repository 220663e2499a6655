"""Runs a real DataLoader under `pipetune profile` and checks what the trace
holds, through `pipetune report --format json`. Usage: test_dataloader.py CASE PIPETUNE.
Exit 77 when this Python has no torch (the test is skipped)."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError:
    print("skipped: %s has no torch/torchvision" % sys.executable)
    sys.exit(77)

SAMPLES = 24
BATCH = 4

SCRIPT = textwrap.dedent("""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms

    class Scale:
        def __call__(self, x):
            return x * 2.0

    class Shift:
        def __call__(self, x):
            return x + 1.0

    class Squares(Dataset):
        def __init__(self, n, transform, fail_at=-1):
            self.n = n
            self.transform = transform
            self.fail_at = fail_at
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            if i == self.fail_at:
                raise ValueError("sample %d is broken" % i)
            x = torch.full((3, 8, 8), float(i))
            return self.transform(x), i

    if __name__ == "__main__":
        workers, method, epochs, persistent, fail_at, stop_after = {args}
        ds = Squares({samples}, transforms.Compose([Scale(), Shift()]), fail_at)
        kwargs = dict(batch_size={batch}, shuffle=False, num_workers=workers)
        if workers > 0:
            kwargs.update(multiprocessing_context=method, persistent_workers=persistent)
        loader = DataLoader(ds, **kwargs)
        seen = 0
        for epoch in range(epochs):
            for batch, labels in loader:
                time.sleep(0.002)
                seen += 1
                if seen == stop_after:
                    sys.exit(3)
        print("batches", seen)
""")


TWO_LOADERS = textwrap.dedent("""
    import time, torch
    from torch.utils.data import DataLoader, Dataset
    from torchvision import transforms

    class Scale:
        def __call__(self, x):
            return x * 2.0

    class Squares(Dataset):
        def __init__(self, n):
            self.n = n
            self.transform = transforms.Compose([Scale()])
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            return self.transform(torch.full((3, 8, 8), float(i))), i

    if __name__ == "__main__":
        train = DataLoader(Squares({samples}), batch_size={batch}, num_workers=2)
        val = DataLoader(Squares({samples}), batch_size={batch}, num_workers=0)
        for epoch in range(2):
            for batch, labels in train:
                time.sleep(0.005)
            for batch, labels in val:
                pass
""")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def fail(message, *results):
    print("FAIL:", message)
    for r in results:
        print("stdout:", r.stdout, "\nstderr:", r.stderr)
    sys.exit(1)


def profile(pipetune, tmp, args, apply=None, expect_exit=0):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT.format(args=repr(args), samples=SAMPLES, batch=BATCH))
    trace = os.path.join(tmp, "run.trace")
    cmd = [pipetune, "profile", "--trace", trace]
    if apply:
        cmd += ["--apply", apply]
    cmd += ["--", sys.executable, script]
    r = run(cmd)
    if r.returncode != expect_exit:
        fail("profile exited %d, expected %d" % (r.returncode, expect_exit), r)
    return trace, r


def report(pipetune, trace):
    r = run([pipetune, "report", trace, "--format", "json"])
    if r.returncode != 0:
        fail("report exited %d" % r.returncode, r)
    return json.loads(r.stdout)


def stages(rep):
    return {s["name"]: s for s in rep["stages"]}


def expect(condition, message, rep):
    if not condition:
        print(json.dumps(rep, indent=1))
        fail(message)


def check_counts(rep, workers, epochs=1):
    s = stages(rep)
    batches = SAMPLES // BATCH * epochs
    for name in ("load", "transform[0]:Scale", "transform[1]:Shift"):
        expect(name in s and s[name]["count"] == SAMPLES * epochs, "%s: expected %d samples" % (name, SAMPLES * epochs), rep)
    expect(s["collate"]["count"] == batches, "collate: expected %d batches" % batches, rep)
    expect(rep["batches"] == batches, "consumer: expected %d batches" % batches, rep)
    expect(s["training step"]["count"] == batches, "training step: expected %d" % batches, rep)
    expect(rep["settings"]["num_workers"] == workers, "settings.num_workers", rep)
    if workers > 0:
        expect(s["transfer"]["count"] == batches, "transfer: expected %d batches" % batches, rep)
        expect(s["load"]["where"] == "workers", "samples load in the workers", rep)
    else:
        expect("transfer" not in s, "no transfer at num_workers=0", rep)
    for k in ("text", "markdown", "html"):
        pass
    expect(rep["limiting_stage"]["name"], "a limiting stage is named", rep)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        if case == "workers0":
            trace, _ = profile(pipetune, tmp, (0, None, 1, False, -1, -1))
            rep = report(pipetune, trace)
            check_counts(rep, 0)
            expect(rep["worker_traces"] == 0, "no worker traces", rep)
            for fmt in ("text", "markdown", "html"):
                r = run([pipetune, "report", trace, "--format", fmt])
                if r.returncode != 0 or rep["limiting_stage"]["name"] not in r.stdout:
                    fail("%s report does not name the limiting stage" % fmt, r)
        elif case in ("workers1_fork", "workers2_fork", "workers2_spawn"):
            workers = int(case[7])
            method = case.split("_")[1]
            trace, _ = profile(pipetune, tmp, (workers, method, 1, False, -1, -1))
            rep = report(pipetune, trace)
            check_counts(rep, workers)
            expect(rep["worker_traces"] == workers, "one trace per worker", rep)
            expect(rep["settings"]["start_method"] == method, "start method recorded", rep)
            expect(rep["epochs"][0]["workers_started"] == workers and rep["epochs"][0]["startup_seconds"] > 0,
                   "worker start-up measured", rep)
            expect(rep["memory"]["worker_rss_bytes"] > 0, "worker RSS recorded", rep)
        elif case == "persistent_epochs":
            trace, _ = profile(pipetune, tmp, (2, "fork", 3, True, -1, -1))
            rep = report(pipetune, trace)
            check_counts(rep, 2, epochs=3)
            expect(rep["worker_traces"] == 2, "persistent: two workers for three epochs", rep)
            started = [e["workers_started"] for e in rep["epochs"]]
            expect(started == [2, 0, 0], "workers start in the first epoch only", rep)
        elif case == "worker_raises":
            trace, r = profile(pipetune, tmp, (2, "fork", 1, False, 13, -1), expect_exit=1)
            if "sample 13 is broken" not in r.stderr:
                fail("the worker's exception reaches the script", r)
            rep = report(pipetune, trace)
            s = stages(rep)
            expect(rep["worker_traces"] == 2, "both workers' traces are readable", rep)
            expect(0 < s["load"]["count"] < SAMPLES, "samples up to the failure are counted", rep)
            expect(rep["batches"] == 3, "three batches (0-11) before the broken one", rep)
        elif case == "exits_early":
            trace, _ = profile(pipetune, tmp, (2, "fork", 1, False, -1, 2), expect_exit=3)
            rep = report(pipetune, trace)
            expect(rep["batches"] == 2, "two batches before sys.exit", rep)
            expect(rep["worker_traces"] == 2, "both workers' traces are readable", rep)
            expect(stages(rep)["load"]["count"] >= 2 * BATCH, "the workers' samples are counted", rep)
        elif case == "apply":
            kwargs = os.path.join(tmp, "tuned.json")
            with open(kwargs, "w") as f:
                json.dump({"num_workers": 2, "prefetch_factor": 4, "persistent_workers": True, "pin_memory": False}, f)
            trace, _ = profile(pipetune, tmp, (0, None, 1, False, -1, -1), apply=kwargs)
            rep = report(pipetune, trace)
            check_counts(rep, 2)
            expect(rep["settings"]["prefetch_factor"] == 4 and rep["settings"]["persistent_workers"],
                   "the applied kwargs are the loader's", rep)
        elif case == "tune":
            trace, _ = profile(pipetune, tmp, (0, None, 1, False, -1, -1))
            out = os.path.join(tmp, "kwargs.json")
            r = run([pipetune, "tune", trace, "-o", out, "--cores", "2", "--memory", "64GiB"])
            if r.returncode != 0 or "code change: DataLoader(" not in r.stdout:
                fail("tune", r)
            with open(out) as f:
                kwargs = json.load(f)
            if set(kwargs) != {"num_workers", "prefetch_factor", "persistent_workers", "pin_memory"}:
                fail("kwargs keys: %s" % kwargs)
        elif case == "verify":
            script_trace, _ = profile(pipetune, tmp, (0, None, 1, False, -1, -1))  # writes train.py
            trace = os.path.join(tmp, "verify.trace")
            out = os.path.join(tmp, "best.json")
            r = run([pipetune, "tune", trace, "--verify", "--cores", "2", "--memory", "64GiB", "-o", out, "--",
                     sys.executable, os.path.join(tmp, "train.py")])
            if r.returncode != 0 or "code change: DataLoader(" not in r.stdout or "<- best" not in r.stdout:
                fail("tune --verify", r)
            round1 = os.path.join(tmp, "verify-round-1.trace")
            with open(os.path.join(tmp, "verify.dataloader.json")) as f:
                planned = json.load(f)
            rep = report(pipetune, round1)
            expect(rep["settings"]["num_workers"] == planned["num_workers"], "round 1 ran the plan", rep)
            check_counts(rep, planned["num_workers"])
            if not os.path.exists(out):
                fail("the best round's kwargs are written")
        elif case == "two_loaders":
            script = os.path.join(tmp, "two.py")
            with open(script, "w") as f:
                f.write(TWO_LOADERS.format(samples=SAMPLES, batch=BATCH))
            trace = os.path.join(tmp, "two.trace")
            r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, script])
            if r.returncode != 0:
                fail("profile", r)
            rep = report(pipetune, trace)
            s = stages(rep)
            batches = 2 * SAMPLES // BATCH
            expect(rep["settings"]["num_workers"] == 2, "the training loader (more time in it) is profiled", rep)
            expect(rep["worker_traces"] == 4, "two workers per epoch, two epochs", rep)
            expect(s["load"]["count"] == 2 * SAMPLES and s["load"]["where"] == "workers",
                   "only the training loader's samples", rep)
            expect(rep["batches"] == batches and s["transfer"]["count"] == batches, "its own batches", rep)
            expect([e["workers_started"] for e in rep["epochs"]] == [2, 2], "workers start every epoch", rep)
        elif case == "bad_apply":
            bad = os.path.join(tmp, "bad.json")
            with open(bad, "w") as f:
                json.dump({"num_workers": -1}, f)
            r = run([pipetune, "profile", "--apply", bad, "--", sys.executable, "-c", "pass"])
            if r.returncode != 2 or "num_workers" not in r.stderr or "bad.json" not in r.stderr:
                fail("bad --apply file: exit 2 naming file and key", r)
        else:
            fail("unknown case " + case)
    print("ok", case)


if __name__ == "__main__":
    main()
