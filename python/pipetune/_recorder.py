"""A process's tracer session as the DataLoader recorder uses it: its stages
by name, and per thread a recorder (the C API's worker) of each stage."""
import json
import os
import sys
import threading

warned = set()


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

    def detach_thread(self):
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
        self.element(name, begin, end, first_id, nbytes, op, cpu_ns)
        if count > 1 and self.running:
            w = self.local.workers[name]
            self.tracer.consumed(w, count - 1)
            self.tracer.produced(w, count - 1, 0)

    def update_info(self):
        if self.running:
            self.tracer.set_info(self.name, json.dumps(self.info))

    def stop(self):
        if not self.running:
            return
        self.detach_thread()
        self.running = False
        try:
            self.tracer.stop()
        except OSError as error:
            warn(str(error))
