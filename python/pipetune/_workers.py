"""DataLoader worker processes (docs/pytorch.md, "What is recorded"): each
records its samples into <its main trace>.<pid>. The main trace's path
reaches the worker inside its worker_init_fn (_WorkerTag), so fork, spawn
and forkserver workers all attach to their own main process; the patched
worker loop is pickled by name, and a spawned worker runs the bootstrap at
its start-up."""
import functools
import inspect
import os
import signal
import threading

from pipetune import _samples, _session
from pipetune._recorder import Recorder as _Recorder, warn as _warn, warn_once as _warn_once

_worker_rec = None  # in a DataLoader worker process, its _Recorder



def _get_worker_info_noting():
    """Runs as torch's get_worker_info (its code object, in its module's
    globals) in a traced worker: notes the call, then does what it did."""
    _pipetune_get_worker_info_called()  # noqa: F821 (set in torch's module)
    return _worker_info  # noqa: F821 (torch's module global)


def _watch_get_worker_info(rec, record):
    """Notes in the worker's record whether the dataset's stream calls
    get_worker_info() (to shard itself across the workers). The function's
    code is replaced, not the name, so that a reference the program took
    before (`from torch.utils.data import get_worker_info`) is seen too."""
    from torch.utils.data._utils import worker as worker_module

    def called():
        try:
            if _samples.reading_stream[0] and not record["sharded_by_worker_info"]:
                record["sharded_by_worker_info"] = True
                rec.update_info()
        except Exception:  # never fail the program's call
            pass

    function = worker_module.get_worker_info
    if function.__code__.co_freevars:
        return
    worker_module.__dict__["_pipetune_get_worker_info_called"] = called
    function.__code__ = _get_worker_info_noting.__code__


class _WorkerTag:
    """A recorded DataLoader's worker_init_fn: the program's own (called as
    it would be), with the main trace the worker belongs to and the
    DataLoader's id. Pickled with the worker's other arguments, so that it
    reaches fork, spawn and forkserver workers alike, whatever their
    environment."""

    def __init__(self, init_fn, main_trace, loader_id):
        self.init_fn = init_fn
        self.main_trace = main_trace
        self.loader_id = loader_id

    def __call__(self, worker_id):
        if self.init_fn is not None:
            self.init_fn(worker_id)


def _find_tag(init_fn):
    """The _WorkerTag in a worker's init_fn (torch wraps it in a partial for
    DataPipes); None when the DataLoader is not recorded."""
    if isinstance(init_fn, _WorkerTag):
        return init_fn
    if isinstance(init_fn, functools.partial):
        for arg in init_fn.args:
            if isinstance(arg, _WorkerTag):
                return arg
    return None


def _start_worker(tag, bound):
    """The worker process's recorder and the worker loop's arguments, with
    worker_init_fn wrapped to note when the worker is ready."""
    global _worker_rec
    entered = _session.now()
    a = bound.arguments
    worker_id = a.get("worker_id", 0)
    iterable = a.get("dataset_kind", 0) == 1  # _DatasetKind.Iterable
    record = {
        "version": _session.RECORD_VERSION, "role": "worker", "pid": os.getpid(), "worker_id": worker_id,
        "num_workers": a.get("num_workers", 0), "loader": tag.loader_id,
        "start_ns": entered, "ready_ns": 0, "iterable": iterable, "sharded_by_worker_info": False}
    rec = _Recorder("%s.%d" % (tag.main_trace, os.getpid()), "dataloader worker %s" % worker_id, {_session.KEY: record})
    _worker_rec = rec
    if iterable:
        try:
            _watch_get_worker_info(rec, record)
        except Exception as error:
            _warn_once("sharding by get_worker_info()", error)
    user_init = a.get("init_fn")

    def on_term(signum, frame):
        # multiprocessing ends leftover (persistent, or abandoned) workers
        # with SIGTERM at exit: end the session first, so that the trace
        # keeps its last counts, then exit as torch's own handler would.
        raise SystemExit(0)

    def init_fn(wid):
        # torch installs its worker signal handlers before calling init_fn;
        # ours replaces its SIGTERM one (which _exit()s) for this worker.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_term)
        if user_init is not None:
            user_init(wid)
        record["ready_ns"] = _session.now()
        rec.update_info()

    a["init_fn"] = init_fn
    return rec, bound


def make_worker_loop(original):
    """A worker loop (torch's _worker_loop, or StatefulDataLoader's own),
    recording the worker when its DataLoader is recorded. It keeps the
    original's module and name, so that it pickles by reference to a spawned
    worker, whose bootstrap has put it in that module's place."""
    signature = inspect.signature(original)

    def _worker_loop(*args, **kwargs):
        _session.in_worker = True
        try:
            bound = signature.bind(*args, **kwargs)
            tag = _find_tag(bound.arguments.get("init_fn"))
        except TypeError:
            tag = None
        if tag is None:
            return original(*args, **kwargs)
        try:
            rec, bound = _start_worker(tag, bound)
        except Exception as error:
            _warn("a DataLoader worker cannot record: %r" % (error,))
            return original(*args, **kwargs)
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            _session.end_recording(rec)

    _worker_loop.__module__ = original.__module__
    _worker_loop.__qualname__ = original.__qualname__
    _worker_loop.__name__ = original.__name__
    _worker_loop._pipetune_original = original
    return _worker_loop


def patch_create_fetcher(module):
    """In a worker process, records the samples of each fetcher torch makes
    (once per worker; per epoch for a persistent worker of an iterable
    dataset). The fetcher, not the dataset, is wrapped: WorkerInfo.dataset
    stays the program's own object, which worker_init_fn may change."""
    kind = module._DatasetKind
    create = kind.create_fetcher

    def create_fetcher(*args, **kwargs):
        rec = _worker_rec
        if rec is None or not rec.running or rec.pid != os.getpid():
            return create(*args, **kwargs)
        _samples.reading_stream[0] = True  # an iterable dataset's __iter__ runs in here
        try:
            fetcher = create(*args, **kwargs)
        finally:
            _samples.reading_stream[0] = False
        try:
            _samples.instrument_fetcher(fetcher, rec, "")
        except Exception as error:
            _warn_once("the worker's samples", error)
        return fetcher

    kind.create_fetcher = staticmethod(create_fetcher)

