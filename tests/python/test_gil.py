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
user gets from it: at the traced settings, the model's rate with 2 fetch
threads (`pipetune what-if`) gains over one thread for `hash`, whose
hashing overlaps on the 2 cores, and not for `python`, whose CPU one
process runs one thread at a time. Under the old assumption both were the
second.
workers2: both at 2 workers, the probe in each worker, the figures summed."""
import json
import os
import sys
import tempfile
import textwrap

from _common import SPIN_SOURCE, fail, json_report, run

BATCHES, BATCH = 80, 16

SCRIPT = textwrap.dedent("""
    import hashlib, sys, time
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
    for batch in DataLoader(dataset, batch_size={batch}, num_workers=workers):
        pass
""")


def profile(pipetune, tmp, kind, workers):
    script = os.path.join(tmp, "train.py")
    if not os.path.exists(script):
        with open(script, "w") as f:
            f.write(SCRIPT.format(spin=SPIN_SOURCE, batches=BATCHES, batch=BATCH))
    trace = os.path.join(tmp, "%s_%d.trace" % (kind, workers))
    r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, script, kind, str(workers)])
    if r.returncode != 0:
        fail("profile of %s at %d workers exited %d" % (kind, workers, r.returncode), r)
    return trace


def gil_of(pipetune, trace, kind):
    rep = json_report(pipetune, trace)
    gil = rep.get("dataloader", {}).get("gil")
    if gil is None:
        fail("%s: the report has no dataloader.gil: %s" % (kind, json.dumps(rep.get("dataloader"))[:2000]))
    if not gil["measured"]:
        fail("%s: the probe's figures were not used (%d wakes): %s" % (kind, gil["wakes"], gil))
    share = gil["gil_seconds_per_sample"] / gil["cpu_seconds_per_sample"]
    print("%s: %.2f of each sample's %.2f ms CPU held the GIL (%d wakes, %d late, probe CPU %.3f s over %.2f s)" %
          (kind, share, gil["cpu_seconds_per_sample"] * 1e3, gil["wakes"], gil["gil_late"],
           gil["probe_cpu_seconds"], gil["window_seconds"]))
    if kind == "python" and share <= 0.7:
        fail("python: the GIL held for %.2f of the CPU, expected over 0.7: %s" % (share, gil))
    if kind == "hash" and share >= 0.3:
        fail("hash: the GIL held for %.2f of the CPU, expected under 0.3: %s" % (share, gil))
    return gil


def gain_of_two_threads(pipetune, trace):
    """The model's rate at 2 fetch threads over its rate at the traced 1."""
    rates = []
    for threads in (1, 2):
        r = run([pipetune, "what-if", trace, "--set", "fetch_threads=%d" % threads, "--format", "json"])
        if r.returncode != 0:
            fail("what-if fetch_threads=%d exited %d" % (threads, r.returncode), r)
        rates.append(json.loads(r.stdout)["predicted"]["throughput"])
    return rates[1] / rates[0]


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    if case not in ("workers0", "workers2"):
        fail("unknown case " + case)
    workers = 0 if case == "workers0" else 2
    with tempfile.TemporaryDirectory() as tmp:
        traces = {kind: profile(pipetune, tmp, kind, workers) for kind in ("python", "hash")}
        for kind, trace in traces.items():
            gil_of(pipetune, trace, kind)
        if case == "workers0":
            held, released = (gain_of_two_threads(pipetune, traces[k]) for k in ("python", "hash"))
            print("2 fetch threads over 1, predicted: python %.2fx, hash %.2fx" % (held, released))
            if held > 1.15 or released < 1.3:
                fail("the plan's credit for fetch threads: python %.2fx (at most 1.15), hash %.2fx (at least 1.3)"
                     % (held, released))
    print("PASS")


if __name__ == "__main__":
    main()
