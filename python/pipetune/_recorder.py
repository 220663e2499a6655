"""A process's tracer session as the DataLoader recorder uses it: its stages
by name, and per thread a recorder (the C API's worker) of each stage."""
import array
import json
import os
import sys
import threading

warned = set()

# Buffered element records (Recorder.push): the C API's record layout
# (PIPETUNE_ELEMENT_FIELDS in tracer_c.h), how many are handed over at once,
# and how long the first of them may wait: under a snapshot's interval, so
# that a snapshot's counts lag the work by no more than that.
_FIELDS = 7
PENDING_RECORDS = 64
_PENDING_VALUES = PENDING_RECORDS * _FIELDS
PENDING_NS = 20_000_000
_MASK = (1 << 64) - 1


def warn(message):
    sys.stderr.write("pipetune: %s\n" % message)


def warn_once(what, error):
    if what not in warned:
        warned.add(what)
        warn("%s is not recorded: %r" % (what, error))


def read_applied(variable, parse):
    """The settings file the environment variable `variable` names (set by
    `pipetune profile --apply`: a DataLoader's kwargs, a tf.data plan), read
    as JSON and handed to `parse`; None when the variable is not set. A file
    that cannot be read or parsed is said and not applied: the C++ side
    validated it before the program started, so the program runs on as
    written."""
    path = os.environ.get(variable)
    if not path:
        return None
    try:
        with open(path) as f:
            return parse(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as error:
        warn("%s: %s: not applied" % (path, error))
        return None


def interval_ms():
    try:
        return max(1, int(os.environ.get("PIPETUNE_TRACE_INTERVAL_MS", "100")))
    except ValueError:
        return 100


class Recorder:
    """One process's session and its stages. Recorders (the C API's workers)
    are per stage and per thread."""

    def __init__(self, path, name, info, spans_per_second=None):
        from pipetune import _tracer

        self.tracer = _tracer.shared()
        self.path = path
        self.pid = os.getpid()
        self.name = name
        self.info = info
        self.stages = {}
        self.local = threading.local()
        self.tracer.start(path, name, json.dumps(info), interval_ms(), spans_per_second)
        self.running = True

    def stage(self, name, op):
        sid = self.stages.get(name)
        if sid is None:
            sid = self.tracer.register_stage(name.encode(), op.encode(), 1)
            self.stages[name] = sid
        return sid

    def worker(self, name, op="map"):
        """This thread's recorder of stage `name`."""
        table = getattr(self.local, "workers", None)
        if table is None:
            table = self.local.workers = {}
        w = table.get(name)
        if w is None:
            w = table[name] = self.tracer.attach_worker(self.stage(name, op))
        return w

    def buffer(self):
        """This thread's buffer of element records not yet handed to the
        tracer (push()): a flat list, PIPETUNE_ELEMENT_FIELDS values each."""
        pending = getattr(self.local, "pending", None)
        if pending is None:
            pending = self.local.pending = []
        return pending

    def push(self, pending, worker, begin, end, element_id, cpu_ns, count=1, nbytes=0):
        """One element of this thread's `worker` (a handle from worker()),
        buffered in `pending` (buffer()'s) and handed to the tracer in one
        call with the others: when PENDING_RECORDS are buffered, when the
        first of them ended PENDING_NS before this one, and at flush(). A
        ctypes call in a busy DataLoader worker costs several microseconds
        (its code is cold beside the sample's work); five records a sample
        made one each (docs/benchmarks-pytorch.md)."""
        pending += (worker, begin, end, element_id & _MASK, cpu_ns if cpu_ns > 0 else 0, count, nbytes)
        if len(pending) >= _PENDING_VALUES or end - pending[2] > PENDING_NS:
            self.flush(pending)

    def flush(self, pending=None):
        """Hands this thread's buffered records to the tracer."""
        if pending is None:
            pending = getattr(self.local, "pending", None)
        if pending and self.running:
            values = array.array("Q", pending)
            self.tracer.elements(values.buffer_info()[0], len(pending) // _FIELDS)
        if pending:
            del pending[:]

    def detach_thread(self):
        self.flush()
        table = getattr(self.local, "workers", None) or {}
        for w in table.values():
            self.tracer.detach_worker(w)
        self.local.workers = {}

    def element(self, name, begin, end, element_id, nbytes=0, op="map", cpu_ns=0):
        """One element of stage `name`: its work from begin to end, cpu_ns of
        this thread's CPU in it."""
        if not self.running:
            return
        table = getattr(self.local, "workers", None)
        w = table.get(name) if table is not None else None
        if w is None:
            w = self.worker(name, op)
        self.tracer.element(w, begin, end, element_id, max(0, cpu_ns), nbytes)

    def elements(self, name, begin, end, first_id, count, nbytes=0, op="map", cpu_ns=0):
        """`count` elements of stage `name` done in one call (a batch fetched
        at once, a decode of its rows): one span, the counts of `count`."""
        if not self.running:
            return
        pending = self.buffer()
        self.push(pending, self.worker(name, op), begin, end, first_id, cpu_ns, count, nbytes)
        self.flush(pending)

    def update_info(self):
        if self.running:
            self.tracer.set_info(self.name, json.dumps(self.info))

    def stop(self):
        """Ends the session, this thread's buffered records first (another
        thread's are its own to flush: detach_thread())."""
        if not self.running:
            return
        self.detach_thread()
        self.running = False
        try:
            self.tracer.stop()
        except OSError as error:
            warn(str(error))
