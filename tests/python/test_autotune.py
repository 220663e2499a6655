"""`pipetune autotune -- python3 train.py` (docs/pytorch.md, "autotune:
retuning a live job") on small generated scripts whose samples wait on
"storage" (a sleep: more workers help even on a busy 2-core machine).
Usage: test_autotune.py CASE PIPETUNE. Exit 77 when this Python has no torch.

Cases: kept (one DataLoader kept over the epochs), new_each_epoch (a new
DataLoader every epoch), stream (an IterableDataset: declined, read once),
failed (the trace is unreadable at the boundary: the job goes on), ddp
(2 ranks, mp.spawn, gloo: both change at the same epoch)."""
import importlib.util
import json
import os
import re
import socket
import sys
import tempfile
import textwrap
from _common import fail, run

if importlib.util.find_spec("torch") is None:
    print("skipped: %s has no torch" % sys.executable)
    sys.exit(77)

SAMPLES = 48
BATCH = 4

# Each epoch prints what the loop saw: the DataLoader's num_workers when
# its iterator was made, and whether the sampler's samples came exactly once.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset, IterableDataset

    MODE = {mode!r}
    SAMPLES, BATCH, EPOCHS = {samples}, {batch}, {epochs}

    class Slow(Dataset):
        def __len__(self):
            return SAMPLES
        def __getitem__(self, i):
            time.sleep(0.004)  # a GET from storage: waiting, no CPU
            return torch.full((3, 8, 8), float(i)), i

    class Stream(IterableDataset):
        def __iter__(self):
            for i in range(SAMPLES * EPOCHS):
                time.sleep(0.002)
                yield torch.zeros(3), i

    def epoch(loader, e, rank=0):
        seen = []
        it = iter(loader)
        workers = loader.num_workers
        threads = getattr(loader, "_pipetune_fetch_threads", 1)  # set by a plan with fetch threads
        for x, i in it:
            seen.extend(int(v) for v in i)
            time.sleep(0.001)  # the step
        expected = sorted(loader.sampler) if hasattr(loader.sampler, "__len__") else None
        ok = sorted(seen) == sorted(expected) and len(seen) == len(set(seen))
        print("rank %d epoch %d num_workers %d fetch_threads %d samples %d %s"
              % (rank, e, workers, threads, len(seen), "ok" if ok else "WRONG"), flush=True)

    def single(new_each_epoch):
        loader = DataLoader(Slow(), batch_size=BATCH, shuffle=True, num_workers=0)
        for e in range(1, EPOCHS + 1):
            if new_each_epoch:
                loader = DataLoader(Slow(), batch_size=BATCH, shuffle=True, num_workers=0)
            epoch(loader, e)
            if MODE == "failed" and e == 2:
                # The trace of epoch 2's settings becomes unreadable before
                # the boundary reads it.
                trace = os.path.splitext(os.environ["PIPETUNE_PYTHON_TRACE"])[0] + "-retune-1.trace"
                os.unlink(trace)
                with open(trace, "w") as f:
                    f.write("not a trace")

    def stream():
        n = 0
        for x, i in DataLoader(Stream(), batch_size=BATCH, num_workers=0):
            n += len(i)
        print("stream read %d samples" % n, flush=True)

    def rank_main(rank, world, port):
        import torch.distributed as dist
        from torch.utils.data.distributed import DistributedSampler
        torch.multiprocessing.set_start_method("fork", force=True)  # workers start in ms, not seconds
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
        dataset = Slow()
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True)
        loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=0)
        for e in range(1, EPOCHS + 1):
            sampler.set_epoch(e)
            epoch(loader, e, rank)
            dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        if MODE == "stream":
            stream()
        elif MODE == "ddp":
            import torch.multiprocessing as mp
            mp.spawn(rank_main, args=(2, int(sys.argv[1])), nprocs=2)
        else:
            single(MODE == "new_each_epoch")
        sys.exit(3)  # the job's own status, passed through
""")


def autotune(pipetune, tmp, mode, epochs, extra=()):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT.format(mode=mode, samples=SAMPLES, batch=BATCH, epochs=epochs))
    trace = os.path.join(tmp, "train.trace")
    cmd = [pipetune, "autotune", "--trace", trace, "--cores", "2", "--memory", "4GiB"] + list(extra)
    cmd += ["--", sys.executable, script]
    if mode == "ddp":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            cmd.append(str(s.getsockname()[1]))
    r = run(cmd, cwd=tmp)
    if r.returncode != 3:
        fail("autotune exited %d, expected the job's own 3" % r.returncode, r)
    return trace, r


def epochs_seen(r, rank=0, threads=False):
    """{epoch: num_workers} ({epoch: (num_workers, fetch_threads)} with
    `threads`); fails unless each epoch saw its samples exactly once."""
    seen = {}
    for m in re.finditer(r"rank (\d+) epoch (\d+) num_workers (\d+) fetch_threads (\d+) samples (\d+) (ok|WRONG)",
                         r.stdout):
        if m.group(6) != "ok":
            fail("epoch %s of rank %s did not see the sampler's samples exactly once" % (m.group(2), m.group(1)), r)
        if int(m.group(1)) == rank:
            seen[int(m.group(2))] = (int(m.group(3)), int(m.group(4))) if threads else int(m.group(3))
    return seen


def check_retuned(pipetune, tmp, mode):
    # An earlier run's segment left behind would be read as another rank of
    # this run's: autotune deletes it before the job starts.
    for stale in ("train-retune-1.trace", "train-retune-1.trace.main.1"):
        with open(os.path.join(tmp, stale), "w") as f:
            f.write("an earlier run's")
    # At most 3 changes, each judged at the next boundary: settled by epoch 5.
    trace, r = autotune(pipetune, tmp, mode, epochs=5)
    if os.path.exists(os.path.join(tmp, "train-retune-1.trace.main.1")):
        fail("a stale segment trace was left beside the run's", r)
    seen = epochs_seen(r)
    if sorted(seen) != [1, 2, 3, 4, 5] or seen[1] != 0:
        fail("expected 5 epochs, the first at the script's num_workers=0: %s" % seen, r)
    # The reads wait: more workers, or fetch threads (docs/pytorch.md), overlap them.
    if max(seen.values()) < 2 and not re.search(r"fetch_threads 1 -> \d+", r.stderr):
        fail("no epoch ran with workers or fetch threads: %s" % seen, r)
    change = re.search(r"pipetune autotune: epoch 2: (?:num_workers 0 -> (\d+)|fetch_threads 1 -> \d+).*predicted "
                       r"([\d.]+) batches/s \(measured ([\d.]+) at the current settings\)", r.stderr)
    if not change or (change.group(1) is not None and int(change.group(1)) != seen[2]):
        fail("epoch 2's change is not said as 'num_workers 0 -> N ... predicted ... measured'", r)
    if not re.search(r"epoch 2: (?:num_workers 0|fetch_threads 1) -> \d+.*predicted [\d.]+ batches/s, measured [\d.]+ "
                     r"\(before: [\d.]+\): (kept|rolled back)", r.stderr):
        fail("the change is not judged once measured", r)
    if not re.search(r"(settled|stopped retuning) [\d.]+ s after the first epoch began, after \d+ decisions of "
                     r"\d+ ms each", r.stderr):
        fail("the time to settled and the decisions' cost are not said", r)
    kwargs_path = os.path.join(tmp, "train.dataloader.json")
    if not os.path.exists(kwargs_path):
        fail("the settled kwargs were not written", r)
    with open(kwargs_path) as f:
        kwargs = json.load(f)
    if sorted(kwargs) != ["fetch_threads", "num_workers", "persistent_workers", "pin_memory", "prefetch_factor"]:
        fail("the kwargs are not written as tune writes them: %s" % kwargs, r)
    if kwargs["num_workers"] != seen[5]:
        fail("the written num_workers=%d is not the one the last epoch ran: %s" % (kwargs["num_workers"], seen), r)
    # Each segment is a trace of one setting, which report reads.
    segment = os.path.join(tmp, "train-retune-1.trace")
    rep = run([pipetune, "report", segment, "--format", "json"])
    if rep.returncode != 0:
        fail("the first retuned segment's trace does not report", rep)
    settings = json.loads(rep.stdout)["dataloader"]["settings"]
    if settings["num_workers"] != seen[2]:
        fail("the segment's record says num_workers=%s, epoch 2 ran %d" % (settings["num_workers"], seen[2]), rep)


def case_stream(pipetune, tmp):
    trace, r = autotune(pipetune, tmp, "stream", epochs=2)
    if "stream read %d samples" % (SAMPLES * 2) not in r.stdout:
        fail("the stream was not read exactly once, whole", r)
    if "live retuning needs epoch boundaries" not in r.stderr:
        fail("autotune does not say it declines a stream", r)
    if os.path.exists(os.path.join(tmp, "train.dataloader.json")) or os.path.exists(
            os.path.join(tmp, "train-retune-1.trace")):
        fail("a stream was retuned", r)
    if run([pipetune, "report", trace]).returncode != 0:
        fail("the stream's trace is not profiled as profile does", r)


def case_failed(pipetune, tmp):
    trace, r = autotune(pipetune, tmp, "failed", epochs=4)
    seen = epochs_seen(r)
    threads = "epoch 2: fetch_threads 1 -> " in r.stderr  # the reads overlapped by threads rather than workers
    if sorted(seen) != [1, 2, 3, 4] or (seen[2] == 0 and not threads) or not seen[2] == seen[3] == seen[4]:
        fail("after the failed decision the job did not go on with epoch 2's settings: %s" % seen, r)
    if not re.search(r"epoch 3: no decision \(.*train-retune-1\.trace.*\): the job goes on with num_workers=%d"
                     % seen[2], r.stderr):
        fail("the failed decision is not said, naming the trace", r)


def case_ddp(pipetune, tmp):
    trace, r = autotune(pipetune, tmp, "ddp", epochs=3)
    ranks = [epochs_seen(r, rank, threads=True) for rank in (0, 1)]
    if sorted(ranks[0]) != [1, 2, 3] or sorted(ranks[1]) != [1, 2, 3]:
        fail("expected 3 epochs on each rank: %s" % ranks, r)
    changed = [min((e for e in seen if seen[e] != seen[1]), default=None) for seen in ranks]
    if changed[0] is None or changed[0] != changed[1]:
        fail("the ranks did not change at the same epoch: %s" % ranks, r)
    if not os.path.exists(os.path.join(tmp, "train-retune-1.trace")):
        fail("no job trace of the retuned epochs", r)


def case_bad_input(pipetune, tmp):
    r = run([pipetune, "autotune", "--memory", "lots", "--", sys.executable, "-c", "pass"])
    if r.returncode != 2 or "lots" not in r.stderr:
        fail("a bad --memory is not exit 2 naming it", r)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        if case in ("kept", "new_each_epoch"):
            check_retuned(pipetune, tmp, case)
        elif case == "stream":
            case_stream(pipetune, tmp)
        elif case == "failed":
            case_failed(pipetune, tmp)
        elif case == "ddp":
            case_ddp(pipetune, tmp)
        elif case == "bad_input":
            case_bad_input(pipetune, tmp)
        else:
            fail("unknown case %s" % case)
    print("PASS")


if __name__ == "__main__":
    main()
