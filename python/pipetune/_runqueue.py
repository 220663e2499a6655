"""How long this process's threads waited for a core (docs/tfdata.md, "What
each figure is").

TensorFlow's per-op time is the time its kernels ran. Between one kernel
and the next, and between an op and the thread that takes its output, a
thread waits to be woken and then waits in the run queue for a core; that
wait is in no op's figure. On a host whose cores are shared with other
programs it is most of an element's wall time (measured on a 2-core host at
load average 12: 1.9 cores' worth of waiting next to 0.5 of running), and a
model fed the kernels' time alone predicted 1.6x to 4x the measured rate.

Linux keeps each thread's time on a core and its time waiting in the run
queue (/proc/self/task/TID/schedstat, fields one and two, in ns). Over an
interval, (running + waiting) / running of the threads that did work (ran
at least BUSY_SHARE of it) is how much a runnable thread's work was
stretched by waiting for a core: the sampler multiplies each op's time by
it, so that a tf.data op's wall time holds its waits as an engine
stage's wall time does (its clock runs while the thread is preempted).

One pread per thread per sample on a descriptor kept open (about 2 us each;
TensorFlow runs a few dozen threads), nothing per element."""
import os
import time

TASKS = "/proc/self/task"
# A thread that ran at least this share of the interval did the ops' work
# (a decoding call, the step); the many that wake briefly and wait
# (TensorFlow's pools, the sampler) wait far longer than they run, and
# counted in, one stretch for all the process's threads overstated the
# working threads' waits: near idle it was 1.6 and the prediction 0.84x to
# 0.93x of the measured rate (docs/benchmarks-tfdata.md).
BUSY_SHARE = 0.1


def schedstat(fd, pread=os.pread):
    """(ns on a core, ns waiting in the run queue) of the thread whose
    schedstat `fd` is open on (the GIL probe reads its own with a pread
    that keeps the GIL, _gilprobe.py)."""
    fields = pread(fd, 96, 0).split()
    return int(fields[0]), int(fields[1])


class RunQueue:
    def __init__(self):
        self.fds = {}  # thread id -> open schedstat descriptor
        self.last = {}  # thread id -> (running ns, waiting ns)
        self.available = os.path.isdir(TASKS)
        self.last_ns = time.monotonic_ns()
        if self.available:
            self.stretch()  # the first interval starts now

    def read(self):
        """{thread id: (running ns, waiting ns)} of the live threads."""
        counts = {}
        try:
            tids = os.listdir(TASKS)
        except OSError:
            return counts
        for tid in tids:
            fd = self.fds.get(tid)
            try:
                if fd is None:
                    fd = self.fds[tid] = os.open("%s/%s/schedstat" % (TASKS, tid), os.O_RDONLY)
                counts[tid] = schedstat(fd)
            except (OSError, ValueError, IndexError):
                continue  # the thread ended between the listing and the read
        for tid in [t for t in self.fds if t not in counts]:
            os.close(self.fds.pop(tid))  # an ended thread's id may be reused: never read it stale
        return counts

    def stretch(self):
        """(running + waiting) / running since the last call, over the
        threads that ran at least BUSY_SHARE of it (all of them where none
        did): 1 where no thread ran, or where Linux keeps no such counts."""
        if not self.available:
            return 1.0
        counts = self.read()
        t = time.monotonic_ns()
        busy = BUSY_SHARE * (t - self.last_ns)
        self.last_ns = t
        deltas = []
        for tid, (run, wait) in counts.items():
            run0, wait0 = self.last.get(tid, (0, 0))
            deltas.append((max(0, run - run0), max(0, wait - wait0)))
        self.last = counts
        working = [d for d in deltas if d[0] >= busy] or deltas
        running = sum(d[0] for d in working)
        waiting = sum(d[1] for d in working)
        return (running + waiting) / running if running > 0 else 1.0

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
