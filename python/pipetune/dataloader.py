"""Records torch.utils.data.DataLoader without a change to the training script,
and applies tuned DataLoader keyword arguments. Installed by sitecustomize.py;
docs/pytorch.md describes what is recorded and how, docs/distributed.md a job
of several ranks.

Processes and files. `pipetune profile --trace T` sets PIPETUNE_TRACE=T. The
first Python process that sees it (the run's root) takes it out of the
environment and passes T on to its children as PIPETUNE_PYTHON_TRACE. Every
process that builds a DataLoader (a single script, each rank of a
DistributedDataParallel job, however started) records its own main trace:
the consumer (the training loop's waits and steps), the transfer of batches
from the workers, pin_memory, and with num_workers=0 the samples themselves.
The first such process claims T itself (created with O_EXCL, so exactly one
does); any other writes T.main.<pid>. A launcher that builds no DataLoader
records nothing. Every DataLoader worker process records its samples into
<its main trace>.<pid>: the main trace's path travels to the worker inside
its worker_init_fn (_WorkerTag), so fork, spawn and forkserver workers all
attach to their own main process. The reader (analyzer/dataloader_trace.h)
reads a main trace and its workers' files as one process, and T with its
T.main.<pid> files as one job (analyzer/dataloader_job.h).

A main trace's record says which process of a job it is: RANK, LOCAL_RANK
and WORLD_SIZE from the environment (torchrun sets them), replaced by
torch.distributed's rank and world size once the process group is
initialised (mp.spawn sets no variable), and the host name. How the process
ended is recorded when it is known: sys.exit's status, an uncaught
exception's type; a trace with no clean end is a process that was killed.

Counts live in the tracer's stages, never in the JSON record: the sampler
writes them every snapshot interval, so a run killed at any point (the OOM
killer's SIGKILL) leaves every count up to its last snapshot. The record (the
session's pipeline info) is rewritten only at bounded events: a DataLoader's
construction (its settings, and what it reads and how each sample is
transformed: _dataset.py), an epoch's start when the rank changed, a
worker's start and ready, a worker's stream first seen sharded, the
process's failure. In the
main process, DataLoader N's stages are named "loaderN/...":
`epoch` (one element per iterator made; the element id is the loader's batch
count when the epoch began), `next` (one per batch delivered; the wait in
next()), `step` (the loop's time from one batch to the next call), and at
num_workers=0 its samples' stages; `transfer` and `pin_memory` likewise.

Everything the tracer calls per sample is a ctypes call of the C API; the
clock is time.monotonic_ns(), the tracer's CLOCK_MONOTONIC, and each call's
CPU is time.thread_time_ns() around it.
"""
import atexit
import functools
import importlib.abc
import importlib.util
import inspect
import json
import os
import signal
import socket
import sys
import threading
import time

from pipetune import _dataset, _samples
from pipetune._recorder import Recorder as _Recorder, warn as _warn, warn_once as _warn_once

TRACE_ENV = "PIPETUNE_PYTHON_TRACE"  # the run's trace T (absolute), for every process of the run
ROOT_ENV = "PIPETUNE_PYTHON_TRACE_ROOT"  # pid of the process that took PIPETUNE_TRACE
GPU_TRACE_ENV = "PIPETUNE_GPU_TRACE"
APPLY_ENV = "PIPETUNE_DATALOADER_APPLY"  # a JSON file of DataLoader keyword arguments
TUNABLE = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")
KEY = "pipetune_dataloader"
RECORD_VERSION = 2  # 2: counts in stages (loaderN/...), not in the record

_now = time.monotonic_ns
_cpu = time.thread_time_ns
_state = None  # this process's main _Recorder, created on first use
_worker_rec = None  # in a DataLoader worker process, its _Recorder
_in_worker = False  # this process is a DataLoader worker: it records no main trace
_applied = None  # the kwargs read from APPLY_ENV
_applied_ranks = {}  # rank -> the kwargs that differ for it ("ranks" in the file)
_lock = threading.Lock()
_where = threading.local()  # .prefix: the DataLoader whose batches this thread handles


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _distributed_fields():
    """rank, local_rank, world_size: the environment's (torchrun), then
    torch.distributed's once initialised (mp.spawn sets no variable)."""
    fields = {"rank": _env_int("RANK"), "local_rank": _env_int("LOCAL_RANK"), "world_size": _env_int("WORLD_SIZE")}
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            fields["rank"] = dist.get_rank()
            fields["world_size"] = dist.get_world_size()
    except Exception:  # a backend that cannot say: keep the environment's
        pass
    return fields


def _main_record():
    import torch

    record = {
        "version": RECORD_VERSION, "role": "main", "pid": os.getpid(), "torch": torch.__version__,
        "cuda_available": bool(torch.cuda.is_available()), "applied": _kwargs_for_this_rank() or _applied,
        "argv": sys.argv[:8],
        "host": socket.gethostname(), "exit": None, "loaders": []}
    record.update(_distributed_fields())
    return {KEY: record}


def _claim(path):
    """T for the first process of the run that records a main trace (O_EXCL:
    one process wins), T.main.<pid> for every other."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        return path
    except FileExistsError:
        return "%s.main.%d" % (path, os.getpid())


def _main_recorder():
    """This process's main recorder, started on first use; None in a
    DataLoader worker and in a run not recorded."""
    global _state
    path = os.environ.get(TRACE_ENV)
    if not path or _in_worker:
        return None
    if _state is not None and _state.pid == os.getpid():
        return _state
    with _lock:
        if _state is None or _state.pid != os.getpid():
            claimed = None
            try:
                claimed = _claim(path)
                _state = _Recorder(claimed, os.path.basename(sys.argv[0] or "python"), _main_record())
            except Exception as error:  # no tracer library, a file not writable: run unrecorded
                _warn("cannot record: %s" % error)
                os.environ.pop(TRACE_ENV, None)
                if claimed is not None and os.path.exists(claimed) and os.path.getsize(claimed) == 0:
                    os.unlink(claimed)  # an empty claim is no trace
                return None
            _watch_exit()
    return _state


def _refresh_rank(rec):
    """The record's rank once torch.distributed knows it (a bounded event:
    rewritten only when it changed)."""
    record = rec.info[KEY]
    fields = _distributed_fields()
    if any(record.get(k) != v for k, v in fields.items() if v is not None):
        record.update({k: v for k, v in fields.items() if v is not None})
        rec.update_info()


def _note_exit(status=None, exception=None):
    """How this process is ending, in its record (its trace's end says
    whether it ended at all)."""
    rec = _state
    if rec is None or rec.pid != os.getpid() or not rec.running:
        return
    exit_info = rec.info[KEY].get("exit") or {}
    if status is not None:
        exit_info["status"] = status
    if exception is not None:
        exit_info["exception"] = exception
    rec.info[KEY]["exit"] = exit_info
    rec.update_info()


def _watch_exit():
    """Notes sys.exit's status and an uncaught exception, and ends the
    session at exit: at the interpreter's exit, and at a multiprocessing
    child's (which leaves by os._exit, after its finalizers, not atexit)."""
    original_exit = sys.exit
    if not getattr(original_exit, "_pipetune", False):
        def exit_noting(status=None):
            code = 0 if status is None else status if isinstance(status, int) else 1
            try:
                if code != 0:
                    _note_exit(status=code)
            except Exception:
                pass
            original_exit(status)

        exit_noting._pipetune = True
        sys.exit = exit_noting
    original_hook = sys.excepthook
    if not getattr(original_hook, "_pipetune", False):
        def hook_noting(kind, value, traceback):
            try:
                _note_exit(status=1, exception="%s: %s" % (kind.__name__, str(value)[:200]))
            except Exception:
                pass
            original_hook(kind, value, traceback)

        hook_noting._pipetune = True
        sys.excepthook = hook_noting
    atexit.register(_stop_main)
    try:
        from multiprocessing import util

        util.Finalize(None, _stop_main, exitpriority=-10)
    except Exception:
        pass


def _stop_main():
    """Ends this process's main session, if it has one. The run's root,
    when no process recorded anything, leaves a trace that says the program
    built no DataLoader."""
    try:
        rec = _state
        if rec is not None and rec.pid == os.getpid():
            rec.stop()
        elif os.environ.get(ROOT_ENV) == str(os.getpid()) and not _in_worker:
            path = os.environ.get(TRACE_ENV)
            if path and not os.path.exists(path):
                rec = _main_recorder()
                if rec is not None:
                    rec.stop()
    except Exception as error:
        _warn("cannot end the trace: %r" % (error,))


# ---- worker processes

_worker_loop_signature = None


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
    entered = _now()
    a = bound.arguments
    worker_id = a.get("worker_id", 0)
    iterable = a.get("dataset_kind", 0) == 1  # _DatasetKind.Iterable
    record = {
        "version": RECORD_VERSION, "role": "worker", "pid": os.getpid(), "worker_id": worker_id,
        "num_workers": a.get("num_workers", 0), "loader": tag.loader_id,
        "start_ns": entered, "ready_ns": 0, "iterable": iterable, "sharded_by_worker_info": False}
    rec = _Recorder("%s.%d" % (tag.main_trace, os.getpid()), "dataloader worker %s" % worker_id, {KEY: record})
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
        record["ready_ns"] = _now()
        rec.update_info()

    a["init_fn"] = init_fn
    return rec, bound


def _make_worker_loop(original):
    global _worker_loop_signature
    _worker_loop_signature = inspect.signature(original)

    def _worker_loop(*args, **kwargs):
        global _in_worker
        _in_worker = True
        try:
            bound = _worker_loop_signature.bind(*args, **kwargs)
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
            rec.stop()

    _worker_loop.__module__ = original.__module__
    _worker_loop.__qualname__ = original.__qualname__
    _worker_loop.__name__ = original.__name__
    _worker_loop._pipetune_original = original
    return _worker_loop


def _patch_create_fetcher(module):
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


# ---- the main process


class _Loader:
    """The main process's recording of one DataLoader: its stages' prefix and
    the element ids of its batches and steps (the counts are the tracer's)."""

    def __init__(self, loader_id):
        self.id = loader_id
        self.prefix = "loader%d/" % loader_id
        self.batches = 0
        self.steps = 0


def _settings(loader):
    ctx = loader.multiprocessing_context
    method = None
    if loader.num_workers > 0:
        method = ctx.get_start_method() if ctx is not None else __import__("multiprocessing").get_start_method()
    try:
        batches = len(loader)
    except TypeError:
        batches = None
    try:
        samples = len(loader.dataset)
    except TypeError:
        samples = None
    return {
        "batch_size": loader.batch_size, "num_workers": loader.num_workers,
        "prefetch_factor": loader.prefetch_factor if loader.num_workers > 0 else None,
        "persistent_workers": bool(loader.persistent_workers), "pin_memory": bool(loader.pin_memory),
        "sampler": type(loader.sampler).__name__, "shuffle": _dataset.shuffles(loader),
        "drop_last": bool(loader.drop_last),
        "multiprocessing_context": method, "dataset": type(loader.dataset).__name__,
        "iterable": _is_iterable(loader.dataset), "dataset_length": samples, "batches_per_epoch": batches,
    }


def _kwargs_for_this_rank():
    """The file's kwargs, with this process's rank's own entries over them."""
    kwargs = dict(_applied or {})
    if _applied_ranks:
        kwargs.update(_applied_ranks.get(_distributed_fields()["rank"], {}))
    return kwargs


def _apply_kwargs(signature, args, kwargs):
    bound = signature.bind(*args, **kwargs)
    for key, value in _kwargs_for_this_rank().items():
        if key in TUNABLE:
            bound.arguments[key] = value
    a = bound.arguments
    if a.get("num_workers", 0) == 0:
        a.pop("prefetch_factor", None)
        a.pop("persistent_workers", None)
    elif a.get("prefetch_factor") is None:
        a.pop("prefetch_factor", None)
    return bound.args, bound.kwargs


def _recording(iterator):
    """The main recorder and the iterator's _Loader, or (None, None)."""
    loader = getattr(iterator, "_pipetune_loader", None)
    rec = _state
    if loader is None or rec is None or not rec.running or rec.pid != os.getpid():
        return None, None
    return rec, loader


def _patch_loader(module):
    """DataLoader: construction (settings, --apply), __iter__ (an epoch) and
    the iterators' __next__ (the consumer)."""
    DataLoader = module.DataLoader
    init = DataLoader.__init__
    init_signature = inspect.signature(init)
    loader_ids = [0]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if _applied or _applied_ranks:
            args, kwargs = _apply_kwargs(init_signature, (self,) + args, kwargs)
            args = args[1:]
        init(self, *args, **kwargs)
        try:
            rec = _main_recorder()
            if rec is not None:
                loader_ids[0] += 1
                loader = _Loader(loader_ids[0])
                entry = {"id": loader.id, "settings": _settings(self)}
                try:
                    entry["dataset"] = _dataset.describe_dataset(self.dataset)
                except Exception as error:  # an odd dataset: its settings are still recorded
                    _warn_once("the DataLoader's dataset", error)
                rec.info[KEY]["loaders"].append(entry)
                object.__setattr__(self, "_pipetune_loader", loader)
                rec.update_info()
        except Exception as error:
            _warn_once("a DataLoader", error)

    DataLoader.__init__ = __init__

    original_iter = DataLoader.__iter__

    @functools.wraps(original_iter)
    def __iter__(self):
        rec, loader = _recording(self)
        if rec is None:
            return original_iter(self)
        try:
            _refresh_rank(rec)
        except Exception as error:
            _warn_once("the process's rank", error)
        begin = _now()
        cpu = _cpu()
        it = original_iter(self)
        cpu_ns = _cpu() - cpu
        rec.element(loader.prefix + "epoch", begin, _now(), loader.batches, op="epoch", cpu_ns=cpu_ns)
        it._pipetune_loader = loader
        it._pipetune_prev = None
        return it

    DataLoader.__iter__ = __iter__

    base_next = module._BaseDataLoaderIter.__next__

    @functools.wraps(base_next)
    def __next__(self):
        rec, loader = _recording(self)
        if rec is None:
            return base_next(self)
        begin = _now()
        cpu = _cpu()
        prev = self._pipetune_prev
        if prev is not None:
            # The loop's step: from the previous batch's delivery to this call.
            self._pipetune_prev = None
            wait_ns, prev_end, prev_cpu = prev
            rec.tracer.consumer_step(wait_ns, begin - prev_end, begin)
            rec.element(loader.prefix + "step", prev_end, begin, loader.steps, op="step", cpu_ns=cpu - prev_cpu)
            loader.steps += 1
        outer = getattr(_where, "prefix", None)
        _where.prefix = loader.prefix  # transfer and pin_memory in this thread
        try:
            data = base_next(self)
        finally:
            _where.prefix = outer
        cpu_end = _cpu()
        end = _now()
        rec.element(loader.prefix + "next", begin, end, loader.batches, op="next", cpu_ns=cpu_end - cpu)
        loader.batches += 1
        self._pipetune_prev = (end - begin, end, cpu_end)
        return data

    module._BaseDataLoaderIter.__next__ = __next__


def _patch_iterators(module):
    """The samples at num_workers=0, and the pin thread's DataLoader."""
    utils = module._utils
    single = module._SingleProcessDataLoaderIter
    single_init = single.__init__

    @functools.wraps(single_init)
    def single_process_init(self, loader, *args, **kwargs):
        single_init(self, loader, *args, **kwargs)
        record = getattr(loader, "_pipetune_loader", None)
        rec = _main_recorder() if record is not None else None
        fetcher = getattr(self, "_dataset_fetcher", None)
        if rec is None or fetcher is None:
            return
        try:
            _samples.instrument_fetcher(fetcher, rec, record.prefix)
        except Exception as error:
            _warn_once("the samples at num_workers=0", error)

    single.__init__ = single_process_init

    # The pin thread is started inside the iterator's __init__ with the
    # module's _pin_memory_loop as its target: for the span of the __init__,
    # that target is bound to this DataLoader's prefix.
    multi = module._MultiProcessingDataLoaderIter
    multi_init = multi.__init__
    pin_module = utils.pin_memory

    # Likewise its workers are started there: for the span of the __init__,
    # the DataLoader's worker_init_fn is a _WorkerTag that carries the main
    # trace and the DataLoader's id to them.
    @functools.wraps(multi_init)
    def multi_process_init(self, loader, *args, **kwargs):
        record = getattr(loader, "_pipetune_loader", None)
        rec = _state
        if record is None or rec is None or not rec.running or rec.pid != os.getpid():
            return multi_init(self, loader, *args, **kwargs)
        loop = pin_module._pin_memory_loop
        init_fn = loader.worker_init_fn
        pin_module._pin_memory_loop = functools.partial(loop, _pipetune_prefix=record.prefix)
        object.__setattr__(loader, "worker_init_fn", _WorkerTag(init_fn, rec.path, record.id))
        try:
            multi_init(self, loader, *args, **kwargs)
        finally:
            pin_module._pin_memory_loop = loop
            object.__setattr__(loader, "worker_init_fn", init_fn)

    multi.__init__ = multi_process_init

    pin_loop = pin_module._pin_memory_loop

    @functools.wraps(pin_loop)
    def _pin_memory_loop(*args, _pipetune_prefix=None, **kwargs):
        _where.prefix = _pipetune_prefix
        try:
            return pin_loop(*args, **kwargs)
        finally:
            _where.prefix = None
            if _state is not None and _state.pid == os.getpid() and _state.running:
                _state.detach_thread()

    pin_module._pin_memory_loop = _pin_memory_loop

    pin = pin_module.pin_memory

    @functools.wraps(pin)
    def pin_memory(data, *args, **kwargs):
        rec = _state
        prefix = getattr(_where, "prefix", None)
        # pin_memory calls itself (by its module's name) for each part of a
        # batch: only the outermost call is the batch's. The pin thread also
        # passes on what is not a batch: a persistent worker's acknowledgment
        # of a new epoch (None), an iterable's end of stream.
        if prefix is None or getattr(_where, "pinning", False) or rec is None or not rec.running \
                or rec.pid != os.getpid() or not _is_batch(data):
            return pin(data, *args, **kwargs)
        begin = _now()
        cpu = _cpu()
        _where.pinning = True
        try:
            out = pin(data, *args, **kwargs)
        finally:
            _where.pinning = False
        cpu_ns = _cpu() - cpu
        rec.element(prefix + "pin_memory", begin, _now(), 0, _samples.batch_bytes(out), cpu_ns=cpu_ns)
        return out

    pin_module.pin_memory = pin_memory


def _patch(module):
    """Instruments torch.utils.data.dataloader once it is imported."""
    if getattr(module.DataLoader, "_pipetune_patched", False):
        return
    module.DataLoader._pipetune_patched = True
    _patch_loader(module)
    _patch_iterators(module)
    _patch_create_fetcher(module)
    module._utils.worker._worker_loop = _make_worker_loop(module._utils.worker._worker_loop)
    _patch_unpickling()
    if os.environ.get(TRACE_ENV) and os.environ.get(ROOT_ENV) == str(os.getpid()):
        atexit.register(_stop_main)  # the root says so when no process built a DataLoader


def _is_iterable(dataset):
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


def _is_batch(payload):
    # A worker's (index, payload): a batch, not an end-of-stream marker or an
    # exception on its way to the main process.
    return payload is not None and type(payload).__name__ not in ("_IterableDatasetStopIteration", "ExceptionWrapper")


def _patch_unpickling():
    """Batches from the workers: unpickling (shared-memory tensors rebuilt)
    in the thread that takes them, as `transfer`."""
    import multiprocessing.queues as queues

    base = queues._ForkingPickler
    if getattr(base, "_pipetune", False):
        return

    class _TimedPickler(base):
        _pipetune = True

        @classmethod
        def loads(cls, data, *args, **kwargs):
            rec = _state
            prefix = getattr(_where, "prefix", None)
            if prefix is None or rec is None or not rec.running or rec.pid != os.getpid():
                return base.loads(data, *args, **kwargs)
            begin = _now()
            cpu = _cpu()
            out = base.loads(data, *args, **kwargs)
            if isinstance(out, tuple) and len(out) == 2 and _is_batch(out[1]):
                cpu_ns = _cpu() - cpu
                rec.element(prefix + "transfer", begin, _now(), 0, len(data), cpu_ns=cpu_ns)
            return out

    queues._ForkingPickler = _TimedPickler


# ---- the import hook

class _Finder(importlib.abc.MetaPathFinder):
    target = "torch.utils.data.dataloader"

    def __init__(self):
        self.busy = False

    def find_spec(self, name, path, target=None):
        if name != self.target or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            try:
                _patch(module)
            except Exception as error:  # never break the user's import
                _warn("cannot instrument the DataLoader: %r" % (error,))

        loader.exec_module = exec_module
        return spec


def install():
    """Called from sitecustomize at every Python start-up."""
    global _applied, _applied_ranks
    path = os.environ.pop("PIPETUNE_TRACE", None)
    if path:
        # The run's root: its children (ranks, DataLoader workers) read the
        # trace's path from here; none of them takes PIPETUNE_TRACE again
        # (a program that links the C++ tracer would start on T itself).
        os.environ[TRACE_ENV] = os.path.abspath(path)
        os.environ[ROOT_ENV] = str(os.getpid())
        # CUDA's injection (cupti/src/injection.cc) records this process's
        # GPU activity into T.gpu.<pid>, read with T.
        os.environ[GPU_TRACE_ENV] = os.path.abspath(path) + ".gpu"
    apply_path = os.environ.get(APPLY_ENV)
    if apply_path:
        try:
            with open(apply_path) as f:
                loaded = json.load(f)
            kwargs = loaded.get("dataloader_kwargs", loaded) if isinstance(loaded, dict) else None
            if not isinstance(kwargs, dict):
                raise ValueError("expected a JSON object of DataLoader keyword arguments")
            # A job's plan may set some ranks apart: {"ranks": {"1": {...}}},
            # applied where the rank is known when the DataLoader is built.
            ranks = kwargs.get("ranks") or {}
            by_rank = {int(r): {k: v for k, v in entry.items() if k in TUNABLE}
                       for r, entry in ranks.items() if isinstance(entry, dict)}
            _applied = {k: v for k, v in kwargs.items() if k in TUNABLE}
            _applied_ranks = by_rank
        except (OSError, ValueError) as error:
            _warn("%s: %s: not applied" % (apply_path, error))
    if not (os.environ.get(TRACE_ENV) or _applied or _applied_ranks):
        return
    if "torch.utils.data.dataloader" in sys.modules:
        _patch(sys.modules["torch.utils.data.dataloader"])
    else:
        sys.meta_path.insert(0, _Finder())
