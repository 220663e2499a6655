"""How much of a process's sample fetching held Python's GIL, measured
(docs/model.md, "How g is measured"): the share of a sample's CPU that fetch
threads cannot overlap.

A daemon thread sleeps about PERIOD_NS at a time. When its sleep ends it
needs the GIL to go on; if another thread of the process holds it, the probe
waits (up to the interpreter's switch interval, then the holder is asked to
let go). So a wake that comes late found the GIL held, and since the wakes
fall at moments unrelated to the fetch's work (the period is drawn at random
so that it cannot beat with a periodic workload), the share of late wakes
estimates the share of time the GIL was held.

Only wakes whose due time fell inside a fetch window are counted: while a
sample's stages run (GilProbe.enter() and leave() around each dataset[i]
or __getitems__, in _samples.py; on fetch threads the windows overlap and
count as one). Collate and, at num_workers=0, the training step are
outside: the model prices those apart (all of collate's CPU as GIL-held).

A wake can also be late because the host had no core for the probe: the
probe reads its own run-queue wait (/proc/thread-self/schedstat, second
field) at each wake, and a wake is counted late only when its lateness less
that wait exceeds LATE_NS (0.3 ms beyond the ~0.1 ms a sleep overshoots on
an idle host).

Per process: `wakes` counted, `gil_late` among them, `seconds` of fetch
window, `samples` fetched in it, and the probe's own `cpu_seconds`. The
GIL-held seconds are gil_late / wakes x seconds; the C++ model turns that
into seconds per sample (analyzer/src/dataloader_model.cc)."""
import ctypes
import os
import random
import threading
import time

from pipetune._runqueue import schedstat

PERIOD_NS = 5_000_000
LATE_NS = 400_000

_now = time.monotonic_ns
_probe = None  # this process's GilProbe, started at its first fetch window
_start_lock = threading.Lock()


def _pread_keeping_gil():
    """pread(fd, n, offset) as libc's, called through ctypes.PyDLL, which
    keeps the GIL: os.pread lets go of it, and a probe that let go after
    each wake waited a second switch interval to get it back whenever a
    fetch held it, halving its wakes. Reading a /proc file takes
    microseconds. os.pread where libc cannot be loaded so."""
    try:
        libc_pread = ctypes.PyDLL(None).pread
    except (OSError, AttributeError):
        return os.pread
    libc_pread.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long)
    libc_pread.restype = ctypes.c_ssize_t
    buffer = ctypes.create_string_buffer(128)

    def pread(fd, n, offset):
        got = libc_pread(fd, buffer, min(n, len(buffer)), offset)
        if got < 0:
            raise OSError("cannot read schedstat")
        return buffer.raw[:got]

    return pread


def _open_schedstat():
    """The calling thread's /proc/thread-self/schedstat, open, or None where
    the kernel does not keep it."""
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:
        schedstat(fd)
    except (OSError, ValueError, IndexError):
        os.close(fd)
        return None
    return fd


class GilProbe:
    def __init__(self):
        self.pid = os.getpid()
        self.lock = threading.Lock()
        # Fetch windows: how many samples are being fetched now (fetch
        # threads overlap), since when, and the windows that closed since
        # the probe's last due time, (open, close) in order: a late wake
        # asks whether its due time, several windows back, was in one.
        self.active = 0
        self.since = 0
        self.closed = []
        self.probing = True  # False once the probe has ended: nothing reads `closed`
        self.window_ns = 0
        self.samples = 0
        self.wakes = 0
        self.late = 0
        self.cpu_ns = 0  # the probe thread's CPU so far
        self.cpu_taken_ns = 0  # ... up to the last take()
        self.thread = threading.Thread(target=self._run, name="pipetune-gil-probe", daemon=True)
        self.thread.start()

    def enter(self):
        with self.lock:
            if self.active == 0:
                self.since = _now()
            self.active += 1

    def leave(self, samples):
        with self.lock:
            self.active -= 1
            self.samples += samples
            if self.active == 0:
                end = _now()
                self.window_ns += end - self.since
                if self.probing:
                    self.closed.append((self.since, end))

    def _covered(self, due):
        """Whether a fetch window was open at `due`; forgets the windows that
        closed before it (the next due time is later)."""
        with self.lock:
            closed = self.closed
            covered = bool(self.active) and self.since <= due
            k = len(closed)
            while k > 0 and closed[k - 1][1] > due:
                k -= 1
                if closed[k][0] <= due:
                    covered = True
            del closed[:k]
            return covered

    def _run(self):
        fd = _open_schedstat()
        if fd is None:
            with self.lock:
                self.probing = False  # nothing to tell the run queue from the GIL by: no figure
                del self.closed[:]
            return
        pread = _pread_keeping_gil()
        _, waited = schedstat(fd, pread)
        while True:
            period = random.randint(PERIOD_NS // 2, PERIOD_NS * 3 // 2)
            due = _now() + period
            time.sleep(period / 1e9)
            woke = _now()
            on_cpu, now_waited = schedstat(fd, pread)
            if self._covered(due):
                late = woke - due - (now_waited - waited) > LATE_NS
                with self.lock:
                    self.wakes += 1
                    self.late += late
            waited = now_waited
            self.cpu_ns = on_cpu

    def take(self):
        """The totals since the last take(), for a trace's record; the
        counts start again (autotune's next segment is its own trace)."""
        with self.lock:
            window_ns = self.window_ns
            if self.active:  # a window open now: counted up to here, the rest in the next take()
                now = _now()
                window_ns += now - self.since
                self.since = now
            totals = {"wakes": self.wakes, "gil_late": self.late, "seconds": round(window_ns / 1e9, 6),
                      "samples": self.samples, "cpu_seconds": round((self.cpu_ns - self.cpu_taken_ns) / 1e9, 6),
                      "period_ms": PERIOD_NS / 1e6}
            self.window_ns = self.samples = self.wakes = self.late = 0
            self.cpu_taken_ns = self.cpu_ns
        return totals


class _Off:
    """The probe turned off (PIPETUNE_GIL_PROBE=0): windows not counted, no
    figure in the trace, the model back to its assumption."""
    pid = None

    def enter(self):
        pass

    def leave(self, samples):
        pass


_OFF = _Off()


def probe():
    """This process's probe, started on first use (a forked worker starts
    its own: threads do not survive fork). PIPETUNE_GIL_PROBE=0 turns it
    off, to measure what it costs (bench/pytorch/gil_probe.py)."""
    global _probe
    p = _probe
    if p is not None and p.pid == os.getpid():
        return p
    if os.environ.get("PIPETUNE_GIL_PROBE") == "0":
        return _OFF
    with _start_lock:
        if _probe is None or _probe.pid != os.getpid():
            _probe = GilProbe()
        return _probe


def take():
    """This process's probe totals since the last take(); None where no
    sample was fetched here."""
    p = _probe
    if p is None or p.pid != os.getpid():
        return None
    return p.take()
