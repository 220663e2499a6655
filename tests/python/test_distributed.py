"""A 2-rank DistributedDataParallel job (gloo, CPU, 127.0.0.1) under
`pipetune profile`, read back through `pipetune report`. Rank 1's samples
cost twice rank 0's, so rank 1 is the straggler and its costliest input
stage (`load`, where the dataset naps) its bottleneck.

Cases (each one run of the job, to keep the suite short):
  spawn_killed    torch.multiprocessing.spawn starts both ranks under one
                  profile, num_workers=0; rank 1 is SIGKILLed after most of
                  its batches.
  torchrun_nodes  two "nodes": two concurrent profiles, each starting one
                  rank torchrun-style (RANK, LOCAL_RANK, WORLD_SIZE,
                  MASTER_ADDR, MASTER_PORT; Debian's torchrun does not run
                  under Python 3.11), merged by one report; --apply sets
                  num_workers=1 (fork), 2 for rank 0 (a "ranks" entry);
                  `pipetune export` puts both nodes on one timeline. Node 1
                  runs under a host name of its own where the machine
                  allows (unshare --uts), so the job spans two hosts.
Usage: test_distributed.py CASE PIPETUNE. Exit 77 when this Python has no torch."""
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from _common import fail, run as _run

# Looked up, not imported: importing torch costs a second of CPU, and the
# scripts this runs import it themselves.
if importlib.util.find_spec("torch") is None:
    print("skipped: %s has no torch" % sys.executable)
    sys.exit(77)

SAMPLES = 96  # 48 per rank: 12 batches of 4
BATCH = 4
NAP = 0.004  # rank 0's seconds per sample; rank 1's is twice this

TRAIN = textwrap.dedent("""
    import os, signal, sys, time
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

    class Costly(Dataset):
        def __init__(self, n, nap):
            self.n, self.nap = n, nap
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            time.sleep(self.nap)
            return torch.full((8,), float(i)), i % 2

    def train(rank, world, o):
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
        torch.set_num_threads(1)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        ds = Costly({samples}, {nap} * (2 if rank == 1 else 1))
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
        workers = o.get("workers", 1)
        context = "fork" if workers else None
        loader = DataLoader(ds, batch_size={batch}, num_workers=workers, sampler=sampler,
                            multiprocessing_context=context)
        for step, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == o.get("kill_rank") and step + 1 == o.get("kill_after"):
                time.sleep(0.3)  # a snapshot holds the batches so far
                os.kill(os.getpid(), signal.SIGKILL)
        dist.destroy_process_group()

    if __name__ == "__main__":
        o = {args}
        if o["launch"] == "spawn":
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(o["port"])
            torch.multiprocessing.spawn(train, args=(2, o), nprocs=2)
        else:
            train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), o)
""")

# What torchrun does for the ranks of one node, without its agent: one
# process per rank with the variables it sets; the first failure's status.
LAUNCH = textwrap.dedent("""
    import os, subprocess, sys
    ranks, world, port = [int(r) for r in sys.argv[1].split(",")], sys.argv[2], sys.argv[3]
    procs = []
    for local, rank in enumerate(ranks):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=world,
                   LOCAL_WORLD_SIZE=str(len(ranks)), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen(sys.argv[4:], env=env))
    codes = [p.wait() for p in procs]
    sys.exit(next((c for c in codes if c != 0), 0))
""")


def run(cmd, **kw):
    return _run(cmd, timeout=100, **kw)  # a hung job fails the test, not the suite


def expect(condition, message, rep):
    if not condition:
        print(json.dumps(rep, indent=1))
        fail(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_scripts(tmp, args):
    train = os.path.join(tmp, "train.py")
    with open(train, "w") as f:
        f.write(TRAIN.format(args=repr(args), samples=SAMPLES, batch=BATCH, nap=NAP))
    launch = os.path.join(tmp, "launch.py")
    with open(launch, "w") as f:
        f.write(LAUNCH)
    return train, launch


def report(pipetune, traces, fmt="json"):
    r = run([pipetune, "report"] + traces + ["--format", fmt])
    if r.returncode != 0:
        fail("report exited %d" % r.returncode, r)
    return json.loads(r.stdout) if fmt == "json" else r.stdout


# Reads of the report's JSON, in one place.

def ranks(rep):
    return {r["rank"]: r for r in rep["ranks"]}


def check_straggler(rep, workers, world=2):
    """`workers`: every rank's num_workers, or a list of them by rank."""
    workers = workers if isinstance(workers, list) else [workers] * world
    """Every rank recorded; rank 1 binds; its bottleneck is `load`."""
    by_rank = ranks(rep)
    expect(sorted(by_rank) == list(range(world)), "every rank is in the report", rep)
    expect(rep["job"]["world_size"] == world, "the world size", rep)
    expect(rep["straggler"] == 1, "rank 1 (twice the cost per sample) is the straggler", rep)
    expect(by_rank[1]["bottleneck"] == "load", "the straggler's bottleneck is its costliest stage", rep)
    expect(rep["bottleneck"] == "load" and rep["dataloader"]["rank"] == 1, "the headline is rank 1's", rep)
    # Alone, rank 0's input would feed about twice rank 1's rate.
    ratio = by_rank[0]["input_throughput"] / by_rank[1]["input_throughput"]
    expect(ratio > 1.4, "rank 0 alone runs faster than rank 1 (%.2fx)" % ratio, rep)
    for rank, r in by_rank.items():
        expect(r["batches"] > 0 and r["num_workers"] == workers[rank] and r["peak_rss_bytes"] > 0,
               "per-rank figures", rep)


def case_spawn_killed(pipetune, tmp):
    # No worker processes: a forked worker holds its rank's end of the pipe
    # mp.spawn watches, so a killed rank would be seen only when its orphaned
    # worker gives up (torch checks its parent every 5 s).
    train, _ = write_scripts(tmp, dict(launch="spawn", port=free_port(), kill_rank=1, kill_after=10, workers=0))
    trace = os.path.join(tmp, "job.trace")
    r = run([pipetune, "profile", "--trace", trace, "--", sys.executable, train])
    if r.returncode == 0 or "rank 1 (pid" not in r.stderr or "was killed" not in r.stderr:
        fail("profile: a failing exit and rank 1 named as killed", r)
    if "does not link pipetune's tracer" in r.stderr:
        fail("the C++ tracer's message for a Python job", r)
    mains = [f for f in os.listdir(tmp) if f.startswith("job.trace.main.") and f.split(".")[-1].isdigit()
             and f.count(".") == 3]
    if len(mains) != 1:
        fail("one trace per rank: job.trace and one job.trace.main.<pid>, got %s" % os.listdir(tmp))
    # A launcher that exits 0 although a rank was killed: profile exits 1
    # (the rank's failure, from its trace), naming the rank.
    main_trace = os.path.join(tmp, mains[0])
    replay = os.path.join(tmp, "replay.trace")
    copy = "cp %s %s && cp %s %s.main.%s" % (trace, replay, main_trace, replay, mains[0].split(".")[-1])
    r = run([pipetune, "profile", "--trace", replay, "--", "sh", "-c", copy])
    if r.returncode != 1 or "rank 1 (pid" not in r.stderr:
        fail("a launcher that hides a killed rank: profile exits 1 naming it", r)
    rep = report(pipetune, [trace])
    check_straggler(rep, 0)
    by_rank = ranks(rep)
    expect(by_rank[1]["ended"] == "killed" and by_rank[1]["batches"] == 10, "rank 1: killed after 10 batches", rep)
    expect(by_rank[0]["ended"] in ("failed", "killed"), "rank 0 ended with the job", rep)
    text = report(pipetune, [trace], "text")
    if "ranks:" not in text or "> marks the straggler, rank 1" not in text or "killed at" not in text:
        fail("the text report's rank table: %s" % text)
    # One timeline with every rank's process (num_workers=0 here: no workers).
    timeline = os.path.join(tmp, "job.json")
    r = run([pipetune, "export", trace, "-o", timeline])
    if r.returncode != 0:
        fail("export of the job", r)
    with open(timeline) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = [e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    for rank in (0, 1):
        if not any(n.startswith("rank %d main" % rank) for n in names):
            fail("the job's timeline lacks rank %d's processes: %s" % (rank, names))
    # One plan for every rank: the straggler's, within its share of the node
    # by the ranks' CPU per batch (both nap off the CPU, rank 0 waits at the
    # all-reduce: neither holds a core then), its memory half the node's.
    kwargs = os.path.join(tmp, "job.json")
    r = run([pipetune, "tune", trace, "--cores", "2", "--memory", "8GiB", "-o", kwargs, "--format", "json"])
    if r.returncode != 0:
        fail("tune of the job", r)
    plan = json.loads(r.stdout)
    notes = " ".join(plan["notes"])
    budgets = plan["budgets"]
    if ("rank 1's (the straggler" not in notes or "in proportion to its CPU per batch" not in notes
            or not 0 < budgets["cores"] < 2 or budgets["memory_bytes"] != 4 << 30):
        fail("the job's plan: rank 1's, on its share of the node's 2 cores and half its memory", r)
    expect(rep["job"]["missing"] == 0 and "missing" not in text, "every rank recorded: none missing", rep)
    # One rank's trace (T.main.<pid>) deleted: the report of T still says the
    # job had 2 ranks, which was recorded and which is missing, and judges
    # the recorded rank alone.
    gone = [rank for rank, r in by_rank.items() if os.path.basename(r["trace"]) == mains[0]]
    expect(len(gone) == 1, "T.main.<pid> is one rank's trace", rep)
    gone, kept = gone[0], 1 - gone[0]
    os.remove(main_trace)
    rep = report(pipetune, [trace])
    expect(rep["job"]["world_size"] == 2 and rep["job"]["recorded_ranks"] == [kept], "one rank recorded", rep)
    expect(rep["job"]["missing_ranks"] == [gone] and list(ranks(rep)) == [kept], "the other missing", rep)
    expect(rep["straggler"] is None, "no straggler named from one rank", rep)
    text = report(pipetune, [trace], "text")
    if ("The job had 2 ranks" not in text or "rank %d is missing" % gone not in text
            or "1 of 2 ranks missing" not in text):
        fail("the text report names the missing rank: %s" % text)


def case_torchrun_nodes(pipetune, tmp):
    port = free_port()
    train, launch = write_scripts(tmp, dict(launch="env", workers=0))
    # The script's num_workers=0, applied as 1 on every rank but rank 0's 2
    # (a kwargs file's "ranks" entry); rank 1 stays the straggler.
    kwargs = os.path.join(tmp, "kwargs.json")
    with open(kwargs, "w") as f:
        json.dump({"num_workers": 1, "ranks": {"0": {"num_workers": 2}}}, f)
    # Node 1 runs under a host name of its own where this machine lets a
    # process have one (a UTS namespace: root, or unprivileged namespaces),
    # so that the job spans two hosts as gathered traces of two nodes do.
    other_host = "pipetune-node1"
    own_host = subprocess.run(["unshare", "--uts", "sh", "-c", "hostname %s && hostname" % other_host],
                              capture_output=True, text=True) if shutil.which("unshare") else None
    two_hosts = own_host is not None and own_host.returncode == 0 and own_host.stdout.strip() == other_host
    nodes = []
    for node in (0, 1):
        trace = os.path.join(tmp, "node%d.trace" % node)
        cmd = [pipetune, "profile", "--trace", trace, "--apply", kwargs, "--", sys.executable, launch, str(node),
               "2", str(port), sys.executable, train]
        if node == 1 and two_hosts:
            cmd = ["unshare", "--uts", "sh", "-c", 'hostname %s && exec "$@"' % other_host, "sh"] + cmd
        nodes.append((trace, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for trace, p in nodes:
        out, err = p.communicate(timeout=100)
        if p.returncode != 0:
            fail("node %s: profile exited %d\n%s\n%s" % (trace, p.returncode, out, err))
    traces = [t for t, _ in nodes]
    rep = report(pipetune, traces)
    check_straggler(rep, [2, 1])
    by_rank = ranks(rep)
    expect(all(r["ended"] == "clean" and r["local_rank"] == 0 for r in by_rank.values()), "clean ends", rep)
    if two_hosts:  # each node's clock is its own: the job is put together on CLOCK_REALTIME
        expect(rep["job"]["hosts"] == 2 and rep["job"]["clock"] == "CLOCK_REALTIME", "two hosts", rep)
        expect(by_rank[1]["host"] == other_host and by_rank[0]["host"] != other_host, "each rank's host", rep)
    expect(by_rank[0]["batches"] == by_rank[1]["batches"] == SAMPLES // 2 // BATCH, "every batch", rep)
    # Both nodes' traces on one timeline: every rank's main process and its
    # workers (rank 0 ran 2, rank 1 ran 1), labelled by rank.
    timeline = os.path.join(tmp, "job.json")
    r = run([pipetune, "export", traces[0], traces[1], "-o", timeline])
    if r.returncode != 0:
        fail("export of both nodes' traces", r)
    with open(timeline) as f:
        names = {e["args"]["name"].split(" (pid ")[0] for e in json.load(f)["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    want = {"rank 0 main", "rank 0 DataLoader worker 0", "rank 0 DataLoader worker 1", "rank 1 main",
            "rank 1 DataLoader worker 0"}
    if two_hosts:  # the host first, when the job ran on several
        want = {(by_rank[0]["host"] if w.startswith("rank 0") else other_host) + " " + w for w in want}
    if names != want:
        fail("the exported timeline's processes: %s, expected %s" % (sorted(names), sorted(want)), r)
    # One node's trace alone is its own rank; the same rank twice is two runs.
    other = os.path.join(tmp, "again.trace")
    shutil.copy(traces[1], other)
    r = run([pipetune, "report", traces[1], other])
    if r.returncode != 2 or "are both rank 1" not in r.stderr:
        fail("the same rank twice: exit 2 naming both traces", r)
    # A kwargs file's rank entry is checked like the rest: exit 2 naming it.
    with open(kwargs, "w") as f:
        json.dump({"ranks": {"one": {"num_workers": 2}}}, f)
    r = run([pipetune, "profile", "--apply", kwargs, "--", sys.executable, "-c", "pass"])
    if r.returncode != 2 or '"ranks"."one"' not in r.stderr or "kwargs.json" not in r.stderr:
        fail("a bad rank entry: exit 2 naming the file and the key", r)


def main():
    case, pipetune = sys.argv[1], os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        if case == "spawn_killed":
            case_spawn_killed(pipetune, tmp)
        elif case == "torchrun_nodes":
            case_torchrun_nodes(pipetune, tmp)
        else:
            fail("unknown case " + case)
    print("ok", case)


if __name__ == "__main__":
    main()
