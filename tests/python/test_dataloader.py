"""Runs a real DataLoader under `pipetune profile` and checks what the trace
holds, through `pipetune report --format json`. Usage: test_dataloader.py CASE PIPETUNE.
Exit 77 when this Python has no torch (the test is skipped)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from _common import fail, run

# Looked up, not imported: importing torch costs a second of CPU, and the
# scripts this runs import it themselves.
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torchvision") is None:
    print("skipped: %s has no torch/torchvision" % sys.executable)
    sys.exit(77)

SAMPLES = 24
BATCH = 4

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
    from torchvision import transforms

    class Scale:
        def __call__(self, x):
            return x * 2.0

    class Shift:
        def __init__(self, nap):
            self.nap = nap
        def __call__(self, x):
            if self.nap:
                time.sleep(self.nap)
            return x + 1.0

    class Squares(Dataset):
        def __init__(self, n, transform, fail_at=-1, get_wait=0, slow_below=0):
            self.n = n
            self.transform = transform
            self.fail_at = fail_at
            self.get_wait = get_wait
            self.slow_below = slow_below
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            if i == self.fail_at:
                raise ValueError("sample %d is broken" % i)
            if self.get_wait:
                time.sleep(self.get_wait)  # a GET from slow storage: waiting, no CPU
            if i < self.slow_below:
                time.sleep(0.1)  # the first batch comes last with in_order=False
            x = torch.full((3, 8, 8), float(i))
            return self.transform(x), i

    class Stream(IterableDataset):
        # get_worker_info imported before any worker: still seen as sharding.
        def __init__(self, n, transform, shard):
            self.n = n
            self.transform = transform
            self.shard = shard
        def __iter__(self):
            first, step = 0, 1
            info = get_worker_info() if self.shard else None
            if info is not None:
                first, step = info.id, info.num_workers
            for i in range(first, self.n, step):
                yield self.transform(torch.full((3, 8, 8), float(i))), i

    def fake_cuda():
        # No GPU here: pin_memory=True with pinning a copy, so that the pin
        # thread (with workers) or the main thread (without) runs as with one.
        # torch 2.x asks torch.accelerator, 1.13 torch.cuda.
        torch.cuda.is_available = lambda: True
        torch.cuda.current_device = lambda: 0
        torch.cuda.set_device = lambda device: None
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:
            accelerator.is_available = lambda: True
            accelerator.current_accelerator = lambda *a, **k: torch.device("cuda")
            accelerator.current_device_index = lambda: 0
            accelerator.set_device_index = lambda device: None
        torch.Tensor.pin_memory = lambda self, *a, **k: self.clone()

    if __name__ == "__main__":
        o = {args}
        if o.get("pin") and not o.get("no_cuda"):
            fake_cuda()
        compose = transforms.Compose([Scale(), Shift(o.get("nap", 0))])
        if o.get("iterable"):
            ds = Stream({samples}, compose, o.get("shard", False))
        else:
            ds = Squares({samples}, compose, o.get("fail_at", -1), o.get("get_wait", 0), o.get("slow_below", 0))
        workers = o.get("workers", 0)
        kwargs = dict(batch_size={batch}, num_workers=workers, pin_memory=o.get("pin", False))
        if workers > 0:
            kwargs.update(multiprocessing_context=o.get("method", "fork"),
                          persistent_workers=o.get("persistent", False))
        if "in_order" in o:
            kwargs["in_order"] = o["in_order"]
        loader = DataLoader(ds, **kwargs)
        seen = 0
        order = []
        for epoch in range(o.get("epochs", 1)):
            for batch, labels in loader:
                order.append(int(labels[0]))
                time.sleep(0.002)
                seen += 1
                if seen == o.get("stop_after"):
                    sys.exit(3)
                if seen == o.get("kill_after"):
                    time.sleep(0.3)  # a snapshot holds the batches so far
                    os.kill(os.getpid(), signal.SIGKILL)
        print("batches", seen)
        print("order", order)
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


# A loader whose samples spin 5 ms of CPU, on CPU 0 beside a process that
# spins there all the time: the time off the CPU is waiting for a core.
CONTENDED = textwrap.dedent("""
    import os, subprocess, sys, time, torch
    from torch.utils.data import DataLoader, Dataset

    class Spin(Dataset):
        def __len__(self):
            return {samples}
        def __getitem__(self, i):
            end = time.thread_time() + 0.005
            while time.thread_time() < end:
                pass
            return torch.zeros(3, 8, 8)

    if __name__ == "__main__":
        os.sched_setaffinity(0, {{0}})
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], env={{}})
        try:
            for batch in DataLoader(Spin(), batch_size={batch}, num_workers=0):
                time.sleep(0.001)
        finally:
            hog.kill()
""")




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


# Every read of the report's JSON goes through these accessors, so that a
# change of the report's schema is an edit here only.

def stages(rep):
    return {s["name"]: s for s in rep["stages"]}


def dataloader(rep):
    return rep["dataloader"]


def stage_counts(rep):
    """Elements of each stage that ran, and the training steps that ended."""
    counts = {name: s["elements"] for name, s in stages(rep).items() if s["elements"]}
    counts["training step"] = dataloader(rep)["steps"]
    return counts


def stage_where(rep, name):
    return stages(rep)[name]["runs_on"]


def stage_seconds(rep, name):
    return stages(rep)[name]["latency_ms_per_element"] / 1e3


def settings(rep):
    return dataloader(rep)["settings"]


def batches(rep):
    return dataloader(rep)["batches"]


def epochs(rep):
    """[(batches, workers_started, startup_seconds)] per epoch."""
    return [(e["batches"], e["workers_started"], e["startup_seconds"]) for e in dataloader(rep)["epochs"]]


def worker_traces(rep):
    return dataloader(rep)["worker_traces"]


def worker_rss_bytes(rep):
    return dataloader(rep)["worker_rss_bytes"]


def limiting_stage(rep):
    """The stage to blame; when the consumer keeps up, the one that would limit next."""
    if rep["bottleneck"]:
        return rep["bottleneck"]
    return (rep["next_limit"] or {}).get("stage") or rep["bound"]


def expect(condition, message, rep):
    if not condition:
        print(json.dumps(rep, indent=1))
        fail(message)


def check_counts(rep, workers, epochs_run=1, samples=SAMPLES):
    counts = stage_counts(rep)
    n_batches = samples // BATCH * epochs_run
    n_samples = samples * epochs_run
    for name in ("load", "transform[0]:Scale", "transform[1]:Shift"):
        expect(counts.get(name) == n_samples, "%s: expected %d samples" % (name, n_samples), rep)
    expect(counts["collate"] == n_batches, "collate: expected %d batches" % n_batches, rep)
    expect(batches(rep) == n_batches, "consumer: expected %d batches" % n_batches, rep)
    expect(counts["training step"] == n_batches, "training step: expected %d" % n_batches, rep)
    expect(settings(rep)["num_workers"] == workers, "settings.num_workers", rep)
    if workers > 0:
        expect(counts["transfer"] == n_batches, "transfer: expected %d batches" % n_batches, rep)
        expect(stage_where(rep, "load") == "workers", "samples load in the workers", rep)
    else:
        expect("transfer" not in counts, "no transfer at num_workers=0", rep)
    expect(limiting_stage(rep), "a limiting stage is named", rep)


def case_workers0(pipetune, tmp):
    trace, _ = profile(pipetune, tmp, dict(workers=0))
    rep = report(pipetune, trace)
    check_counts(rep, 0)
    expect(worker_traces(rep) == 0, "no worker traces", rep)
    for fmt in ("text", "markdown", "html"):
        r = run([pipetune, "report", trace, "--format", fmt])
        if r.returncode != 0 or limiting_stage(rep) not in r.stdout:
            fail("%s report does not name the limiting stage" % fmt, r)


def case_workers0_epochs(pipetune, tmp):
    # The samples are wrapped again every epoch; the transforms once. A 3 ms
    # transform must never be counted twice nor be part of `load`.
    trace, _ = profile(pipetune, tmp, dict(workers=0, epochs=5, nap=0.003))
    rep = report(pipetune, trace)
    check_counts(rep, 0, epochs_run=5)
    expect([e[0] for e in epochs(rep)] == [SAMPLES // BATCH] * 5, "five epochs' batches", rep)
    expect(stage_seconds(rep, "transform[1]:Shift") >= 0.003, "the 3 ms transform", rep)
    expect(stage_seconds(rep, "load") < 0.0015, "load does not include the transforms", rep)
    # The 3 ms is a sleep: the transform's CPU stays far under its time.
    shift = stages(rep)["transform[1]:Shift"]
    expect(shift["cpu_ms_per_element"] < 0.3 * shift["latency_ms_per_element"],
           "the sleeping transform's CPU is not its wall time", rep)


def case_workers(pipetune, tmp, workers, method):
    trace, _ = profile(pipetune, tmp, dict(workers=workers, method=method))
    rep = report(pipetune, trace)
    check_counts(rep, workers)
    expect(worker_traces(rep) == workers, "one trace per worker", rep)
    expect(settings(rep)["start_method"] == method, "start method recorded", rep)
    first = epochs(rep)[0]
    expect(first[1] == workers and first[2] > 0, "worker start-up measured", rep)
    expect(worker_rss_bytes(rep) > 0, "worker RSS recorded", rep)


def case_iterable(pipetune, tmp, workers, shard):
    trace, _ = profile(pipetune, tmp, dict(iterable=True, workers=workers, shard=shard))
    rep = report(pipetune, trace)
    # Not sharded, each worker reads the whole stream.
    copies = workers if workers > 0 and not shard else 1
    check_counts(rep, workers, samples=SAMPLES * copies)
    expect(worker_traces(rep) == workers, "one trace per worker", rep)


def case_pin_memory(pipetune, tmp, workers):
    trace, _ = profile(pipetune, tmp, dict(workers=workers, pin=True, epochs=2))
    rep = report(pipetune, trace)
    check_counts(rep, workers, epochs_run=2)
    expect(settings(rep)["pin_memory"], "settings.pin_memory", rep)
    expect(stage_counts(rep)["pin_memory"] == 2 * SAMPLES // BATCH, "pin_memory: once per batch", rep)


def case_pin_memory_no_cuda(pipetune, tmp):
    # pin_memory=True on a host without CUDA: the report says pinning only
    # costs time, and the plan and its code change must agree (not "kept").
    import torch
    if torch.cuda.is_available():
        print("skipped: this host has CUDA")
        sys.exit(77)
    trace, _ = profile(pipetune, tmp, dict(workers=2, pin=True, no_cuda=True))
    rep = report(pipetune, trace)
    expect(settings(rep)["pin_memory"], "settings.pin_memory", rep)
    expect(any("no CUDA device" in n for n in dataloader(rep)["notes"]), "the report's note", rep)
    r = run([pipetune, "tune", trace, "--format", "json", "--cores", "2", "--memory", "64GiB"])
    if r.returncode != 0:
        fail("tune", r)
    plan = json.loads(r.stdout)
    pin = [k for k in plan["knobs"] if k["stage"] == "pin_memory"]
    if len(pin) != 1 or pin[0]["new"] != "False" or "kept" in pin[0]["reason"]:
        fail("the plan keeps pin_memory: %s" % pin, r)
    if not plan["dataloader_kwargs"]["pin_memory"] is False or "pin_memory=False" not in plan["code_change"]:
        fail("the code change keeps pin_memory", r)


def case_slow_storage(pipetune, tmp):
    # Each sample waits 25 ms on a GET, using no CPU: load is latency, and the
    # run-queue delay the tracer records says the time off the CPU was not
    # spent waiting for a core. No sentence may blame other programs.
    trace, _ = profile(pipetune, tmp, dict(workers=2, get_wait=0.025))
    rep = report(pipetune, trace)
    expect(stages(rep)["load"]["limited_by"] == "latency", "load is limited by latency", rep)
    said = " ".join(rep["assumptions"])
    expect("other programs held the cores" not in said, "nothing blames other programs", rep)
    expect("waiting inside the stages" in said and "run-queue delay" in said,
           "the time off the CPU is called waiting inside load, from the run-queue delay", rep)


def case_contended_host(pipetune, tmp):
    # The other side of slow_storage: the loading waited for a core, which
    # the run-queue delay shows; that is other programs holding the cores.
    script = os.path.join(tmp, "contended.py")
    with open(script, "w") as f:
        f.write(CONTENDED.format(samples=2 * SAMPLES, batch=BATCH))
    trace = os.path.join(tmp, "contended.trace")
    r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, script])
    if r.returncode != 0:
        fail("profile", r)
    rep = report(pipetune, trace)
    said = " ".join(rep["assumptions"])
    expect("waiting for a core (run-queue delay): other programs held the cores" in said,
           "the time off the CPU is called contention, from the run-queue delay", rep)


def torch_version():
    """(major, minor) of this Python's torch, read without importing it."""
    import importlib.metadata

    try:
        major, minor = importlib.metadata.version("torch").split(".")[:2]
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0, 0


def case_out_of_order(pipetune, tmp):
    # in_order=False (torch 2.6 on): the first batch's samples are slow, so
    # the other worker's batches are delivered before it. Every batch is
    # still counted once, in the order the loop got it.
    if torch_version() < (2, 6):
        print("skipped: torch %d.%d has no DataLoader(in_order=...)" % torch_version())
        sys.exit(77)
    trace, r = profile(pipetune, tmp, dict(workers=2, in_order=False, slow_below=BATCH))
    order = [line for line in r.stdout.splitlines() if line.startswith("order ")][0]
    firsts = json.loads(order[len("order "):])
    if firsts == sorted(firsts) or sorted(firsts) != list(range(0, SAMPLES, BATCH)):
        fail("expected every batch once, out of order: %s" % firsts, r)
    rep = report(pipetune, trace)
    check_counts(rep, 2)
    expect(worker_traces(rep) == 2, "one trace per worker", rep)


def case_errors(pipetune, tmp):
    # A worker's trace given for the run's: exit 2, naming the main trace.
    trace, _ = profile(pipetune, tmp, dict(workers=1))
    worker_trace = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("run.trace.")][0]
    r = run([pipetune, "report", worker_trace])
    if r.returncode != 2 or "is a DataLoader worker's trace; report its main trace %s" % trace not in r.stderr:
        fail("a worker's trace: exit 2 naming the main trace", r)
    # A program that imports the DataLoader and builds none.
    none = os.path.join(tmp, "none.trace")
    r = run([pipetune, "profile", "--trace", none, "--", sys.executable, "-c", "import torch.utils.data"])
    if r.returncode != 0:
        fail("profile", r)
    r = run([pipetune, "report", none])
    if r.returncode != 2 or "%s: the program built no DataLoader" % none not in r.stderr:
        fail("no DataLoader: exit 2 saying so", r)


def case_killed(pipetune, tmp):
    # SIGKILL (as the OOM killer sends) after 3 batches: no exit handler runs.
    trace, r = profile(pipetune, tmp, dict(workers=2, kill_after=3), expect_exit=128 + 9)
    rep = report(pipetune, trace)
    expect(batches(rep) == 3, "the three batches before the kill", rep)
    counts = stage_counts(rep)
    expect(counts["training step"] == 2, "the steps that ended", rep)
    expect(counts["load"] >= 3 * BATCH, "the workers' samples are counted", rep)
    # Batches that arrived out of order were taken (transferred) early.
    expect(counts["transfer"] >= 3, "their transfer", rep)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        if case == "workers0":
            case_workers0(pipetune, tmp)
        elif case == "workers0_epochs":
            case_workers0_epochs(pipetune, tmp)
        elif case in ("workers1_fork", "workers2_fork", "workers2_spawn", "workers2_forkserver"):
            case_workers(pipetune, tmp, int(case[7]), case.split("_")[1])
        elif case in ("iterable0", "iterable2_sharded", "iterable2_unsharded"):
            case_iterable(pipetune, tmp, int(case[8]), case.endswith("_sharded"))
        elif case in ("pin_memory0", "pin_memory2"):
            case_pin_memory(pipetune, tmp, int(case[10]))
        elif case == "contended_host":
            case_contended_host(pipetune, tmp)
        elif case == "slow_storage":
            case_slow_storage(pipetune, tmp)
        elif case == "pin_memory_no_cuda":
            case_pin_memory_no_cuda(pipetune, tmp)
        elif case == "out_of_order":
            case_out_of_order(pipetune, tmp)
        elif case == "errors":
            case_errors(pipetune, tmp)
        elif case == "killed":
            case_killed(pipetune, tmp)
        elif case == "persistent_epochs":
            trace, _ = profile(pipetune, tmp, dict(workers=2, epochs=3, persistent=True))
            rep = report(pipetune, trace)
            check_counts(rep, 2, epochs_run=3)
            expect(worker_traces(rep) == 2, "persistent: two workers for three epochs", rep)
            expect([e[1] for e in epochs(rep)] == [2, 0, 0], "workers start in the first epoch only", rep)
        elif case == "persistent_pin_memory":
            # torch 2.x ends persistent workers and the pin thread from its
            # own atexit handler: the counts of both epochs must survive it.
            trace, _ = profile(pipetune, tmp, dict(workers=2, epochs=2, persistent=True, pin=True))
            rep = report(pipetune, trace)
            check_counts(rep, 2, epochs_run=2)
            expect(worker_traces(rep) == 2, "persistent: two workers for two epochs", rep)
            expect(stage_counts(rep)["pin_memory"] == 2 * SAMPLES // BATCH, "pin_memory: once per batch", rep)
        elif case == "worker_raises":
            trace, r = profile(pipetune, tmp, dict(workers=2, fail_at=13), expect_exit=1)
            if "sample 13 is broken" not in r.stderr:
                fail("the worker's exception reaches the script", r)
            rep = report(pipetune, trace)
            expect(worker_traces(rep) == 2, "both workers' traces are readable", rep)
            expect(0 < stage_counts(rep)["load"] < SAMPLES, "samples up to the failure are counted", rep)
            expect(batches(rep) == 3, "three batches (0-11) before the broken one", rep)
        elif case == "exits_early":
            trace, _ = profile(pipetune, tmp, dict(workers=2, stop_after=2), expect_exit=3)
            rep = report(pipetune, trace)
            expect(batches(rep) == 2, "two batches before sys.exit", rep)
            expect(worker_traces(rep) == 2, "both workers' traces are readable", rep)
            expect(stage_counts(rep)["load"] >= 2 * BATCH, "the workers' samples are counted", rep)
        elif case == "apply":
            kwargs = os.path.join(tmp, "tuned.json")
            with open(kwargs, "w") as f:
                json.dump({"num_workers": 2, "prefetch_factor": 4, "persistent_workers": True, "pin_memory": False}, f)
            trace, _ = profile(pipetune, tmp, dict(workers=0), apply=kwargs)
            rep = report(pipetune, trace)
            check_counts(rep, 2)
            expect(settings(rep)["prefetch_factor"] == 4 and settings(rep)["persistent_workers"],
                   "the applied kwargs are the loader's", rep)
            # --no-trace: the same kwargs applied, nothing recorded.
            probe = os.path.join(tmp, "probe.py")
            with open(probe, "w") as f:
                f.write("import torch.utils.data as d\nl = d.DataLoader(list(range(64)), batch_size=8)\n"
                        "print('loader', l.num_workers, l.prefetch_factor, sum(1 for _ in l))\n")
            untraced = os.path.join(tmp, "untraced.trace")
            r = run([pipetune, "profile", "--trace", untraced, "--apply", kwargs, "--no-trace", "--",
                     sys.executable, probe])
            if r.returncode != 0 or "loader 2 4 8" not in r.stdout:
                fail("--apply --no-trace does not run the loader with the kwargs (2 workers, prefetch 4)", r)
            if os.path.exists(untraced) or os.path.exists(untraced + ".main.%d" % os.getpid()):
                fail("--no-trace wrote a trace", r)
        elif case == "tune":
            trace, _ = profile(pipetune, tmp, dict(workers=0))
            out = os.path.join(tmp, "kwargs.json")
            r = run([pipetune, "tune", trace, "-o", out, "--cores", "2", "--memory", "64GiB"])
            if r.returncode != 0 or "code change: DataLoader(" not in r.stdout:
                fail("tune", r)
            with open(out) as f:
                kwargs = json.load(f)
            # fetch_threads: pipetune's own knob for a map-style dataset (docs/pytorch.md).
            if set(kwargs) != {"num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "fetch_threads"}:
                fail("kwargs keys: %s" % kwargs)
        elif case == "verify":
            profile(pipetune, tmp, dict(workers=0))  # writes train.py
            trace = os.path.join(tmp, "verify.trace")
            out = os.path.join(tmp, "best.json")
            r = run([pipetune, "tune", trace, "--verify", "--cores", "2", "--memory", "64GiB", "-o", out, "--",
                     sys.executable, os.path.join(tmp, "train.py")])
            if r.returncode != 0 or "code change: DataLoader(" not in r.stdout or "<- best" not in r.stdout:
                fail("tune --verify", r)
            round1 = os.path.join(tmp, "verify-round-1.trace")
            with open(os.path.join(tmp, "verify.dataloader.json")) as f:
                planned = json.load(f)
            if "stopped: the plan changed nothing" in r.stdout:
                # The script's own settings were the plan: nothing to run again.
                if os.path.exists(round1) or planned["num_workers"] != 0:
                    fail("a plan that changed nothing ran again or differs from the script's", r)
            else:
                rep = report(pipetune, round1)
                expect(settings(rep)["num_workers"] == planned["num_workers"], "round 1 ran the plan", rep)
                check_counts(rep, planned["num_workers"])
            if not os.path.exists(out):
                fail("the best round's kwargs are written")
        elif case == "verify_json":
            # --format json prints what a config's verify prints: the rounds,
            # the best, and (a DataLoader's) the keyword arguments written.
            script = os.path.join(tmp, "train.py")
            with open(script, "w") as f:
                f.write(SCRIPT.format(args=repr(dict(workers=0)), samples=SAMPLES, batch=BATCH))
            trace = os.path.join(tmp, "verify.trace")
            r = run([pipetune, "tune", trace, "--verify", "--format", "json", "--cores", "2", "--memory", "64GiB",
                     "--", sys.executable, script])
            if r.returncode != 0:
                fail("tune --verify --format json", r)
            try:
                doc = json.loads(r.stdout)
            except ValueError:
                fail("tune --verify --format json printed no JSON", r)
            rounds = doc["rounds"]
            expect(rounds[0]["round"] == 0 and rounds[0]["settings"] is None and rounds[0]["measured_throughput"] > 0,
                   "round 0 ran the script's own settings and measured them", doc)
            expect(doc["best_round"] in [x["round"] for x in rounds] and doc["stop_reason"], "a best round", doc)
            with open(doc["output"]) as f:
                written = json.load(f)
            expect(written == doc["dataloader_kwargs"], "the JSON names the keyword arguments written", doc)
            expect(list(written) == ["num_workers", "prefetch_factor", "persistent_workers", "fetch_threads",
                                     "pin_memory"], "the keyword arguments keep the order they were written in", doc)
            expect(doc["code_change"].startswith("DataLoader("), "the code change", doc)
        elif case == "two_loaders":
            script = os.path.join(tmp, "two.py")
            with open(script, "w") as f:
                f.write(TWO_LOADERS.format(samples=SAMPLES, batch=BATCH))
            trace = os.path.join(tmp, "two.trace")
            r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, script])
            if r.returncode != 0:
                fail("profile", r)
            rep = report(pipetune, trace)
            counts = stage_counts(rep)
            n_batches = 2 * SAMPLES // BATCH
            expect(settings(rep)["num_workers"] == 2, "the training loader (more time in it) is profiled", rep)
            expect(worker_traces(rep) == 4, "two workers per epoch, two epochs", rep)
            expect(counts["load"] == 2 * SAMPLES and stage_where(rep, "load") == "workers",
                   "only the training loader's samples", rep)
            expect(batches(rep) == n_batches and counts["transfer"] == n_batches, "its own batches", rep)
            expect([e[1] for e in epochs(rep)] == [2, 2], "workers start every epoch", rep)
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
