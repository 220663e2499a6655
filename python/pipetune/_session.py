"""A process's main recording (docs/pytorch.md, "One run, one trace per
process"): its trace's path (T for the first process of the run, claimed
with O_EXCL; T.main.<pid> for every other), its record (which process of a
job it is, how it ended) and its session, started on first use. The state
every other part of the bootstrap reads lives here."""
import os
import socket
import sys
import threading
import time

from pipetune import _apply, _exit, _gilprobe
from pipetune._recorder import Recorder as _Recorder, warn as _warn

TRACE_ENV = "PIPETUNE_PYTHON_TRACE"  # the run's trace T (absolute), for every process of the run
ROOT_ENV = "PIPETUNE_PYTHON_TRACE_ROOT"  # pid of the process that took PIPETUNE_TRACE
GPU_TRACE_ENV = "PIPETUNE_GPU_TRACE"
KEY = "pipetune_dataloader"
RECORD_VERSION = 2  # 2: counts in stages (loaderN/...), not in the record

now = time.monotonic_ns
cpu = time.thread_time_ns
state = None  # this process's main _Recorder, created on first use
in_worker = False  # this process is a DataLoader worker: it records no main trace
_lock = threading.Lock()
where = threading.local()  # .prefix: the DataLoader whose batches this thread handles


def main_record():
    import torch

    record = {
        "version": RECORD_VERSION, "role": "main", "pid": os.getpid(), "torch": torch.__version__,
        "cuda_available": bool(torch.cuda.is_available()),
        "applied": _apply.kwargs_for_this_rank() or _apply.applied,
        "argv": sys.argv[:8],
        "host": socket.gethostname(), "exit": None, "loaders": []}
    record.update(_apply.distributed_fields())
    return {KEY: record}


def claim(path):
    """T for the first process of the run that records a main trace (O_EXCL:
    one process wins), T.main.<pid> for every other."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        return path
    except FileExistsError:
        return "%s.main.%d" % (path, os.getpid())


def main_recorder():
    """This process's main recorder, started on first use; None in a
    DataLoader worker and in a run not recorded."""
    global state
    path = os.environ.get(TRACE_ENV)
    if not path or in_worker:
        return None
    if state is not None and state.pid == os.getpid():
        return state
    with _lock:
        if state is None or state.pid != os.getpid():
            claimed = None
            try:
                claimed = claim(path)
                state = _Recorder(claimed, os.path.basename(sys.argv[0] or "python"), main_record())
            except Exception as error:  # no tracer library, a file not writable: run unrecorded
                _warn("cannot record: %s" % error)
                os.environ.pop(TRACE_ENV, None)
                if claimed is not None and os.path.exists(claimed) and os.path.getsize(claimed) == 0:
                    os.unlink(claimed)  # an empty claim is no trace
                return None
            _exit.watch(note_exit, stop_main)
    return state


def recording():
    """This process's main recorder when it is running here, else None."""
    rec = state
    if rec is None or not rec.running or rec.pid != os.getpid():
        return None
    return rec


def refresh_rank(rec):
    """The record's rank once torch.distributed knows it (a bounded event:
    rewritten only when it changed)."""
    record = rec.info[KEY]
    fields = _apply.distributed_fields()
    if any(record.get(k) != v for k, v in fields.items() if v is not None):
        record.update({k: v for k, v in fields.items() if v is not None})
        rec.update_info()


def note_exit(status=None, exception=None):
    """How this process is ending, in its record (its trace's end says
    whether it ended at all)."""
    rec = recording()
    if rec is None:
        return
    exit_info = rec.info[KEY].get("exit") or {}
    if status is not None:
        exit_info["status"] = status
    if exception is not None:
        exit_info["exception"] = exception
    rec.info[KEY]["exit"] = exit_info
    rec.update_info()


def process_totals():
    """The whole process so far as `time` counts it: wall seconds since it
    started (/proc/self/stat's start against /proc/uptime, both on the boot
    clock) and CPU-seconds, its own threads' and its reaped children's (the
    DataLoader workers that ended). The report's cores used is the training
    loop's window; this is what a user checks it against. None where /proc
    does not say."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        seconds = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    t = os.times()
    cpu = t.user + t.system + t.children_user + t.children_system
    return {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3)} if seconds > 0 else None


def end_recording(rec):
    """Ends `rec` (a main or a worker session of this process) with the GIL
    probe's totals since the last session ended in its record: what the
    process's sample fetches held the GIL (_gilprobe.py)."""
    if rec.running:
        totals = _gilprobe.take()
        if totals is not None:
            rec.info[KEY]["gil_probe"] = totals
        rec.update_info()
    rec.stop()


def stop_main():
    """Ends this process's main session, if it has one, with the whole
    process's time and CPU in its record (process_totals). The run's root,
    when no process recorded anything, leaves a trace that says the program
    built no DataLoader."""
    try:
        rec = state
        if rec is not None and rec.pid == os.getpid():
            if rec.running:
                rec.info[KEY]["process"] = process_totals()
            end_recording(rec)
        elif os.environ.get(ROOT_ENV) == str(os.getpid()) and not in_worker:
            path = os.environ.get(TRACE_ENV)
            if path and not os.path.exists(path):
                rec = main_recorder()
                if rec is not None:
                    rec.stop()
    except Exception as error:
        _warn("cannot end the trace: %r" % (error,))


def start_segment(path):
    """Starts this process's next main session in `path` (autotune's next
    segment, claimed as the run's trace is: `path` or path.main.<pid>),
    carrying the record; the current one must be stopped."""
    global state
    old = state
    state = _Recorder(claim(path), old.name, old.info)
    return state
