"""What reading a job of N ranks costs `pipetune report` (docs/benchmarks-pytorch.md,
"Merging rank traces"). From the repository root:

    /usr/bin/python3 bench/pytorch/merge_ranks.py [BUILD_DIR] [--ranks 2,4,...,256] [--batches B]

For each N it writes the traces of a synthetic N-rank job with the Python
recorder's own writer (pipetune._recorder.Recorder over the tracer's C API,
as a live DataLoader's are written): per rank a main trace (T for rank 0,
T.main.<pid> for the others) and two worker traces, B batches of 4 samples.
Eight ranks share a "host" (the record's host name), so N > 8 is a job of
several nodes read on CLOCK_REALTIME. Every rank's samples cost 4 ms and its
step 10 ms, except the last rank's samples, which cost 8 ms: it is the
straggler, and every other rank's step includes its wait at the all-reduce.

It then runs `pipetune report T --format json` once per N and prints the
wall time, CPU time and peak RSS of that process (os.wait4), the bytes read,
and whether the report named the last rank as the straggler. The last line
is the ratio of the peak RSS at the largest N to that at N = 2.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BATCH = 4
WORKERS = 2
STEP_NS = 10_000_000
SAMPLE_NS = 4_000_000
COLLATE_NS = 500_000
TRANSFER_NS = 200_000
RANKS_PER_HOST = 8


def settings():
    return {"batch_size": BATCH, "num_workers": WORKERS, "prefetch_factor": 2, "persistent_workers": False,
            "pin_memory": False, "sampler": "DistributedSampler", "drop_last": False,
            "multiprocessing_context": "fork", "dataset": "Synthetic", "iterable": False,
            "dataset_length": None, "batches_per_epoch": None}


def in_child(write, *args):
    """Runs write(*args) in a process of its own, as every rank and worker
    writes its trace: a process's tracer keeps the stages of its earlier
    sessions."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            write(*args)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("writing a synthetic trace failed")


def write_worker(Recorder, path, w, wpid, t0, batches, sample_ns):
    record = {"version": 2, "role": "worker", "pid": wpid, "worker_id": w, "num_workers": WORKERS,
              "loader": 1, "start_ns": t0, "ready_ns": t0 + 20_000_000, "iterable": False,
              "sharded_by_worker_info": False}
    rec = Recorder("%s.%d" % (path, wpid), "dataloader worker %d" % w, {"pipetune_dataloader": record})
    t = t0 + 20_000_000
    for b in range(w, batches, WORKERS):
        for s in range(BATCH):
            rec.element("load", t, t + sample_ns, b * BATCH + s, 0, cpu_ns=sample_ns // 4)
            t += sample_ns
        rec.element("collate", t, t + COLLATE_NS, b, 4096, op="batch", cpu_ns=COLLATE_NS)
        t += COLLATE_NS
    rec.stop()


def write_rank(Recorder, path, rank, world, batches, pid, worker_pids):
    """One rank: its main trace at `path` and its workers' at path.<pid>."""
    sample_ns = SAMPLE_NS * (2 if rank == world - 1 else 1)
    # Each worker makes every other batch: a batch every (samples + collate) / workers.
    batch_ns = (BATCH * sample_ns + COLLATE_NS) // WORKERS
    # DDP: every rank moves at the slowest rank's pace.
    slowest_batch_ns = (BATCH * 2 * SAMPLE_NS + COLLATE_NS) // WORKERS
    period = max(STEP_NS, slowest_batch_ns)
    t0 = time.monotonic_ns()
    for w, wpid in enumerate(worker_pids):
        in_child(write_worker, Recorder, path, w, wpid, t0, batches, sample_ns)
    record = {"version": 2, "role": "main", "pid": pid, "torch": "synthetic", "cuda_available": False,
              "applied": None, "argv": ["train.py"], "host": "node%d" % (rank // RANKS_PER_HOST), "exit": None,
              "rank": rank, "local_rank": rank % RANKS_PER_HOST, "world_size": world,
              "loaders": [{"id": 1, "settings": settings()}]}
    rec = Recorder(path, "train.py", {"pipetune_dataloader": record})
    t = t0
    rec.element("loader1/epoch", t, t + 1_000_000, 0, op="epoch", cpu_ns=1_000_000)
    t += 20_000_000 + batch_ns
    for b in range(batches):
        # The straggler waits for its input; the others wait at the all-reduce (in the step).
        wait = max(0, batch_ns - STEP_NS) if rank == world - 1 else 0
        rec.element("loader1/next", t, t + wait + TRANSFER_NS, b, op="next", cpu_ns=TRANSFER_NS)
        rec.element("loader1/transfer", t + wait, t + wait + TRANSFER_NS, 0, 4096, cpu_ns=TRANSFER_NS)
        t += wait + TRANSFER_NS
        step = period - wait - TRANSFER_NS
        if b + 1 < batches:
            rec.element("loader1/step", t, t + step, b, op="step", cpu_ns=STEP_NS // 2)
        t += step
    rec.stop()


def write_job(Recorder, directory, world, batches):
    trace = os.path.join(directory, "job.trace")
    for rank in range(world):
        pid = 100000 + 10 * rank
        path = trace if rank == 0 else "%s.main.%d" % (trace, pid)
        in_child(write_rank, Recorder, path, rank, world, batches, pid, [pid + 1, pid + 2])
    return trace


def measure(pipetune, trace):
    start = time.monotonic()
    with open(os.devnull, "w") as null:
        p = subprocess.Popen([pipetune, "report", trace, "--format", "json"], stdout=subprocess.PIPE,
                             stderr=null, text=True)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        sys.exit("pipetune report %s failed (status %d)" % (trace, status))
    return json.loads(out), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--ranks", default="2,4,8,16,32,64,128,256")
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(build, "python"))
    from pipetune._recorder import Recorder

    pipetune = os.path.join(build, "cli", "pipetune")
    print("%5s %6s %10s %9s %9s %11s %9s" % ("ranks", "files", "bytes", "wall s", "cpu s", "peak RSS", "straggler"))
    peaks = []
    for world in [int(n) for n in args.ranks.split(",")]:
        directory = tempfile.mkdtemp(prefix="pipetune_merge_")
        try:
            trace = write_job(Recorder, directory, world, args.batches)
            files = os.listdir(directory)
            size = sum(os.path.getsize(os.path.join(directory, f)) for f in files)
            report, wall, cpu, rss = measure(pipetune, trace)
        finally:
            shutil.rmtree(directory)
        named = report.get("straggler") == world - 1 and len(report.get("ranks", [])) == world
        peaks.append(rss)
        print("%5d %6d %10d %9.3f %9.3f %8.1f MiB %9s" % (world, len(files), size, wall, cpu, rss / 2**20,
                                                         "ok" if named else "WRONG"))
    print("peak RSS at %s ranks over %s ranks: %.2f" % (args.ranks.split(",")[-1], args.ranks.split(",")[0],
                                                          peaks[-1] / peaks[0]))


if __name__ == "__main__":
    main()
