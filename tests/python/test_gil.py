"""The GIL probe (python/pipetune/_gilprobe.py, docs/model.md "How g is
measured"): how much of a sample's CPU held Python's GIL, measured while
tracing rather than assumed. Usage: test_gil.py CASE PIPETUNE.

Two map-style datasets under `pipetune profile`, each sample about 2 ms of
CPU: `python` spins in the interpreter (the GIL held throughout), `hash`
runs hashlib.sha256 over 4 MiB (CPython lets go of the GIL while it hashes
more than 2 KiB). The report's `dataloader.gil` must say the first held it
for more than 0.7 of its CPU and the second for less than 0.3, each from
enough wakes to be used (`measured`).

workers0: both at num_workers=0, the probe in the main process; and what a
user gets from it: `pipetune tune` keeps `hash` in the main process with
2 or more fetch threads, whose hashing overlaps on the cores, and gives
`python` worker processes, whose CPU one process runs on one core at a
time (under the old assumption both got workers, at a worker's memory
each).
workers2: both at 2 workers, the probe in each worker, the figures summed."""
import json
import os
import sys
import tempfile
import textwrap

from _common import SPIN_SOURCE, fail, json_report, run

BATCHES, BATCH = 80, 16

SCRIPT = textwrap.dedent("""
    import hashlib, json, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    {spin}

    class Spin(Dataset):
        def __len__(self):
            return {batches} * {batch}

        def __getitem__(self, i):
            spin(0.002)
            return torch.tensor([i])

    class Hash(Dataset):
        blob = bytes(range(256)) * (16 << 10)  # 4 MiB

        def __len__(self):
            return {batches} * {batch}

        def __getitem__(self, i):
            return torch.tensor(list(hashlib.sha256(self.blob).digest()[:4]))

    kind, workers = sys.argv[1], int(sys.argv[2])
    dataset = Spin() if kind == "python" else Hash()
    begin, cpu = time.monotonic(), time.process_time()
    for batch in DataLoader(dataset, batch_size={batch}, num_workers=workers):
        pass
    print(json.dumps({{"samples_per_second": len(dataset) / (time.monotonic() - begin),
                      "process_cpu_per_sample": (time.process_time() - cpu) / len(dataset)}}))
""")


def profile(pipetune, tmp, kind, workers, env=None):
    """Profiles the script on dataset `kind` at `workers`; its trace, and
    its loop's samples/s and the process's CPU per sample."""
    script = os.path.join(tmp, "train.py")
    if not os.path.exists(script):
        with open(script, "w") as f:
            f.write(SCRIPT.format(spin=SPIN_SOURCE, batches=BATCHES, batch=BATCH))
    trace = os.path.join(tmp, "%s_%d_%d.trace" % (kind, workers, len(os.listdir(tmp))))  # each run its own
    r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, script, kind, str(workers)], env=env)
    if r.returncode != 0:
        fail("profile of %s at %d workers exited %d" % (kind, workers, r.returncode), r)
    line = [l for l in r.stdout.splitlines() if l.startswith('{"samples_per_second"')]
    if not line:
        fail("the script printed no samples/s", r)
    return trace, json.loads(line[-1])


def gil_share(pipetune, trace, kind):
    """The report's dataloader.gil, and the share of a sample's CPU it says held the GIL."""
    rep = json_report(pipetune, trace)
    gil = rep.get("dataloader", {}).get("gil")
    if gil is None:
        fail("%s: the report has no dataloader.gil: %s" % (kind, json.dumps(rep.get("dataloader"))[:2000]))
    if not gil["measured"]:
        fail("%s: the probe's figures were not used (%d wakes): %s" % (kind, gil["wakes"], gil))
    return gil, gil["gil_seconds_per_sample"] / gil["cpu_seconds_per_sample"]


def gil_of(pipetune, trace, kind):
    gil, share = gil_share(pipetune, trace, kind)
    print("%s: %.2f of each sample's %.2f ms CPU held the GIL (%d wakes, %d late, probe CPU %.3f s over %.2f s)" %
          (kind, share, gil["cpu_seconds_per_sample"] * 1e3, gil["wakes"], gil["gil_late"],
           gil["probe_cpu_seconds"], gil["window_seconds"]))
    if kind == "python" and share <= 0.7:
        fail("python: the GIL held for %.2f of the CPU, expected over 0.7: %s" % (share, gil))
    if kind == "hash" and share >= 0.3:
        fail("hash: the GIL held for %.2f of the CPU, expected under 0.3: %s" % (share, gil))
    return gil


def plan_of(pipetune, tmp, trace):
    """`pipetune tune`'s workers and fetch threads for the run, and the
    fetch threads' reason."""
    r = run([pipetune, "tune", trace, "--format", "json", "-o", os.path.join(tmp, "plan.json")])
    if r.returncode != 0:
        fail("tune exited %d" % r.returncode, r)
    knobs = {k["stage"]: k for k in json.loads(r.stdout)["knobs"]}
    if "num_workers" not in knobs or "fetch_threads" not in knobs:
        fail("the plan has no num_workers or fetch_threads knob: %s" % r.stdout[:2000])
    return int(knobs["num_workers"]["new"]), int(knobs["fetch_threads"]["new"]), knobs["fetch_threads"]["reason"]


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    if case not in ("workers0", "workers2"):
        fail("unknown case " + case)
    workers = 0 if case == "workers0" else 2
    with tempfile.TemporaryDirectory() as tmp:
        traces = {kind: profile(pipetune, tmp, kind, workers)[0] for kind in ("python", "hash")}
        for kind, trace in traces.items():
            gil_of(pipetune, trace, kind)
        if case == "workers0":
            held, released = (plan_of(pipetune, tmp, traces[k]) for k in ("python", "hash"))
            print("planned: python %d workers x %d fetch threads (%s); hash %d workers x %d (%s)" % (held + released))
            if held[0] < 1 or released[0] != 0 or released[1] < 2:
                fail("the plan: python %d workers (expected 1 or more: one process runs its Python on one core), "
                     "hash %d workers x %d fetch threads (expected 0 x 2 or more: threads hash on every core)"
                     % (held[0], released[0], released[1]))
    print("PASS")


if __name__ == "__main__":
    main()
