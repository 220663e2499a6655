"""Records torch.utils.data.DataLoader without a change to the training script,
and applies tuned DataLoader keyword arguments. Installed by sitecustomize.py;
docs/pytorch.md describes what is recorded and how.

Processes and files. `pipetune profile --trace T` sets PIPETUNE_TRACE=T. The
first Python process that sees it takes it out of the environment (so no
other process writes T) and owns T: it records the consumer (the training
loop's waits and steps), the transfer of batches from the workers, pin_memory,
and with num_workers=0 the samples themselves. Every DataLoader worker process
(fork or spawn) records its samples into its own trace, T.<pid>; the reader
(analyzer/dataloader_profile.h) reads T and its T.<pid> files as one run.

Everything the tracer calls per sample is a ctypes call of the C API; the
clock is time.monotonic_ns(), the tracer's CLOCK_MONOTONIC.
"""
import atexit
import functools
import importlib.abc
import importlib.util
import inspect
import json
import os
import signal
import sys
import threading
import time

TRACE_ENV = "PIPETUNE_PYTHON_TRACE"  # the main trace; workers write TRACE.<pid>
OWNER_ENV = "PIPETUNE_PYTHON_TRACE_OWNER"  # pid of the process that records the consumer
APPLY_ENV = "PIPETUNE_DATALOADER_APPLY"  # a JSON file of DataLoader keyword arguments
LOADER_ENV = "PIPETUNE_DATALOADER_ID"  # which DataLoader a worker process serves
TUNABLE = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")

_now = time.monotonic_ns
_state = None  # this process's _Recorder, created on first use
_applied = None  # the kwargs read from APPLY_ENV
_lock = threading.Lock()


def _warn(message):
    sys.stderr.write("pipetune: %s\n" % message)


def _interval_ms():
    try:
        return max(1, int(os.environ.get("PIPETUNE_TRACE_INTERVAL_MS", "100")))
    except ValueError:
        return 100


class _Recorder:
    """One process's session and its stages. Recorders (the C API's workers)
    are per stage and per thread."""

    def __init__(self, path, name, info):
        from pipetune._tracer import Tracer

        self.tracer = Tracer()
        self.pid = os.getpid()
        self.name = name
        self.info = info
        self.stages = {}
        self.local = threading.local()
        self.tracer.start(path, name, json.dumps(info), _interval_ms())
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

    def element(self, name, begin, end, element_id, nbytes=0, op="map"):
        if not self.running:
            return
        w = self.worker(name, op)
        t = self.tracer
        t.consumed(w, 1)
        t.work(w, begin, end, element_id)
        t.produced(w, 1, nbytes)

    def update_info(self):
        if self.running:
            self.tracer.set_info(self.name, json.dumps(self.info))

    def stop(self):
        if not self.running:
            return
        self.update_info()
        self.detach_thread()
        self.running = False
        try:
            self.tracer.stop()
        except OSError as error:
            _warn(str(error))


def _main_recorder():
    """The owner process's recorder, started on first use; None elsewhere."""
    global _state
    path = os.environ.get(TRACE_ENV)
    if not path or os.environ.get(OWNER_ENV) != str(os.getpid()):
        return None
    if _state is not None and _state.pid == os.getpid():
        return _state
    with _lock:
        if _state is None or _state.pid != os.getpid():
            import torch

            info = {"pipetune_dataloader": {
                "version": 1, "role": "main", "pid": os.getpid(), "torch": torch.__version__,
                "cuda_available": bool(torch.cuda.is_available()), "applied": _applied,
                "argv": sys.argv[:8], "loaders": []}}
            try:
                _state = _Recorder(path, os.path.basename(sys.argv[0] or "python"), info)
            except OSError as error:
                _warn("cannot record: %s" % error)
                os.environ.pop(TRACE_ENV, None)
                return None
            atexit.register(_stop_main)
    return _state


def _stop_main():
    if _state is not None and _state.pid == os.getpid():
        _state.stop()


# ---- per-sample instrumentation (worker processes, and the main process at num_workers=0)

class _TimedTransform:
    """One transform of a Compose (or of a list) recorded as its own stage."""

    def __init__(self, transform, name, ctx):
        self.transform = transform
        self.name = name
        self.ctx = ctx

    def __call__(self, *args, **kwargs):
        begin = _now()
        out = self.transform(*args, **kwargs)
        end = _now()
        self.ctx.transform_ns += end - begin
        self.ctx.rec.element(self.name, begin, end, self.ctx.index)
        return out

    def __getattr__(self, name):
        return getattr(self.transform, name)

    def __repr__(self):
        return repr(self.transform)


class _TimedCompose:
    def __init__(self, compose, timed):
        self.compose = compose
        self.transforms = timed

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __getattr__(self, name):
        return getattr(self.compose, name)

    def __repr__(self):
        return repr(self.compose)


class _SampleContext:
    def __init__(self, rec):
        self.rec = rec
        self.index = 0
        self.transform_ns = 0


def _transform_name(k, t):
    return "transform[%d]:%s" % (k, type(t).__name__)


def _instrument_transform(dataset, ctx):
    """Replaces dataset.transform by one that records each transform; True if it did."""
    transform = getattr(dataset, "transform", None)
    if transform is None or isinstance(transform, _TimedCompose):
        return False
    try:
        if isinstance(transform, list) and all(callable(t) for t in transform):
            dataset.transform = [_TimedTransform(t, _transform_name(k, t), ctx) for k, t in enumerate(transform)]
            return True
        inner = getattr(transform, "transforms", None)
        if type(transform).__name__ == "Compose" and isinstance(inner, (list, tuple)):
            timed = [_TimedTransform(t, _transform_name(k, t), ctx) for k, t in enumerate(inner)]
            dataset.transform = _TimedCompose(transform, timed)
            return True
    except (AttributeError, TypeError):
        pass
    return False


class _TimedDataset:
    """Stands for a map-style dataset in the fetcher: dataset[i] is recorded as
    `load` (its time less the transforms' time) and each transform's stage."""

    def __init__(self, dataset, rec):
        self._pt_dataset = dataset
        self._pt_ctx = _SampleContext(rec)
        _instrument_transform(dataset, self._pt_ctx)

    def __getitem__(self, index):
        ctx = self._pt_ctx
        ctx.index = index if isinstance(index, int) else 0
        ctx.transform_ns = 0
        begin = _now()
        item = self._pt_dataset[index]
        end = _now()
        load_end = max(begin, end - ctx.transform_ns)
        ctx.rec.element("load", begin, load_end, ctx.index, op="read")
        return item

    def __len__(self):
        return len(self._pt_dataset)

    def __getattr__(self, name):
        if name == "__getitems__":  # batch fetching would bypass the per-sample timing
            raise AttributeError(name)
        return getattr(self._pt_dataset, name)


def _batch_bytes(data, depth=0):
    if depth > 6:
        return 0
    nbytes = getattr(data, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        if hasattr(data, "element_size") and hasattr(data, "numel"):
            return int(data.element_size() * data.numel())
    except Exception:
        return 0
    if isinstance(data, (list, tuple)):
        return sum(_batch_bytes(x, depth + 1) for x in data)
    if isinstance(data, dict):
        return sum(_batch_bytes(x, depth + 1) for x in data.values())
    return 0


def _timed_collate(collate_fn, rec):
    counter = [0]

    @functools.wraps(collate_fn)
    def collate(batch):
        begin = _now()
        out = collate_fn(batch)
        end = _now()
        rec.element("collate", begin, end, counter[0], _batch_bytes(out), op="batch")
        counter[0] += 1
        return out

    return collate


# ---- worker processes

_worker_loop_signature = None


def _make_worker_loop(original):
    global _worker_loop_signature
    _worker_loop_signature = inspect.signature(original)

    def _worker_loop(*args, **kwargs):
        path = os.environ.get(TRACE_ENV)
        if not path:
            return original(*args, **kwargs)
        entered = _now()
        bound = _worker_loop_signature.bind(*args, **kwargs)
        a = bound.arguments
        worker_id = a.get("worker_id", 0)
        info = {"pipetune_dataloader": {
            "version": 1, "role": "worker", "pid": os.getpid(), "worker_id": worker_id,
            "num_workers": a.get("num_workers", 0), "loader": int(os.environ.get(LOADER_ENV, "0") or 0),
            "start_ns": entered, "ready_ns": 0}}
        try:
            rec = _Recorder("%s.%d" % (path, os.getpid()), "dataloader worker %s" % worker_id, info)
        except OSError as error:
            _warn("worker %s cannot record: %s" % (worker_id, error))
            return original(*args, **kwargs)
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
            info["pipetune_dataloader"]["ready_ns"] = _now()
            rec.update_info()

        a["init_fn"] = init_fn
        if a.get("dataset_kind", 0) == 0 and "dataset" in a:  # _DatasetKind.Map
            a["dataset"] = _TimedDataset(a["dataset"], rec)
        if a.get("collate_fn") is not None:
            a["collate_fn"] = _timed_collate(a["collate_fn"], rec)
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            rec.stop()

    _worker_loop.__module__ = original.__module__
    _worker_loop.__qualname__ = original.__qualname__
    _worker_loop.__name__ = original.__name__
    _worker_loop._pipetune_original = original
    return _worker_loop


# ---- the main process


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
        "sampler": type(loader.sampler).__name__, "drop_last": bool(loader.drop_last),
        "multiprocessing_context": method, "dataset": type(loader.dataset).__name__,
        "dataset_length": samples, "batches_per_epoch": batches,
    }


def _apply_kwargs(signature, args, kwargs):
    bound = signature.bind(*args, **kwargs)
    for key, value in _applied.items():
        if key in TUNABLE:
            bound.arguments[key] = value
    a = bound.arguments
    if a.get("num_workers", 0) == 0:
        a.pop("prefetch_factor", None)
        a.pop("persistent_workers", None)
    elif a.get("prefetch_factor") is None:
        a.pop("prefetch_factor", None)
    return bound.args, bound.kwargs


def _patch(module):
    """Instruments torch.utils.data.dataloader once it is imported."""
    DataLoader = module.DataLoader
    if getattr(DataLoader, "_pipetune_patched", False):
        return
    DataLoader._pipetune_patched = True
    utils = module._utils
    init = DataLoader.__init__
    init_signature = inspect.signature(init)
    loader_ids = [0]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if _applied:
            args, kwargs = _apply_kwargs(init_signature, (self,) + args, kwargs)
            args = args[1:]
        init(self, *args, **kwargs)
        rec = _main_recorder()
        if rec is not None:
            loader_ids[0] += 1
            entry = {"id": loader_ids[0], "settings": _settings(self), "epochs": [], "batches": 0,
                     "steps": 0, "wait_ns": 0, "step_ns": 0}
            rec.info["pipetune_dataloader"]["loaders"].append(entry)
            object.__setattr__(self, "_pipetune_entry", entry)
            rec.update_info()

    DataLoader.__init__ = __init__

    original_iter = DataLoader.__iter__

    @functools.wraps(original_iter)
    def __iter__(self):
        entry = getattr(self, "_pipetune_entry", None)
        rec = _main_recorder() if entry is not None else None
        if rec is None:
            return original_iter(self)
        begin = _now()
        previous = os.environ.get(LOADER_ENV)
        os.environ[LOADER_ENV] = str(entry["id"])
        try:
            it = original_iter(self)
        finally:
            if previous is None:
                os.environ.pop(LOADER_ENV, None)
            else:
                os.environ[LOADER_ENV] = previous
        end = _now()
        it._pipetune_entry = entry
        it._pipetune_prev = None
        entry["epochs"].append({"start_ns": begin, "iter_ns": end - begin, "batches": 0})
        rec.update_info()
        return it

    DataLoader.__iter__ = __iter__

    base_next = module._BaseDataLoaderIter.__next__

    @functools.wraps(base_next)
    def __next__(self):
        entry = getattr(self, "_pipetune_entry", None)
        if entry is None or _state is None or not _state.running or _state.pid != os.getpid():
            return base_next(self)
        begin = _now()
        prev = self._pipetune_prev
        if prev is not None:
            _state.tracer.consumer_step(prev[0], begin - prev[1], begin)
            self._pipetune_prev = None
            # Per DataLoader too: a script may iterate several.
            entry["steps"] += 1
            entry["wait_ns"] += prev[0]
            entry["step_ns"] += begin - prev[1]
        try:
            data = base_next(self)
        except StopIteration:
            raise
        end = _now()
        self._pipetune_prev = (end - begin, end)
        entry["batches"] += 1
        if entry["epochs"]:
            entry["epochs"][-1]["batches"] += 1
        return data

    module._BaseDataLoaderIter.__next__ = __next__

    # num_workers=0: the main process loads the samples itself.
    single = module._SingleProcessDataLoaderIter
    single_init = single.__init__

    @functools.wraps(single_init)
    def single_process_init(self, loader, *args, **kwargs):
        single_init(self, loader, *args, **kwargs)
        rec = _main_recorder() if getattr(loader, "_pipetune_entry", None) is not None else None
        fetcher = getattr(self, "_dataset_fetcher", None)
        if rec is None or fetcher is None:
            return
        dataset = getattr(fetcher, "dataset", None)
        if dataset is not None and not isinstance(dataset, _TimedDataset) and hasattr(dataset, "__getitem__") \
                and not _is_iterable(dataset):
            fetcher.dataset = _TimedDataset(dataset, rec)
        if getattr(fetcher, "collate_fn", None) is not None:
            fetcher.collate_fn = _timed_collate(fetcher.collate_fn, rec)

    single.__init__ = single_process_init

    # Batches from the workers: unpickling in the thread that takes them.
    multi = module._MultiProcessingDataLoaderIter
    try_get = multi._try_get_data

    @functools.wraps(try_get)
    def _try_get_data(self, *args, **kwargs):
        _transfer.active = True
        try:
            return try_get(self, *args, **kwargs)
        finally:
            _transfer.active = False

    multi._try_get_data = _try_get_data

    pin_loop = utils.pin_memory._pin_memory_loop

    @functools.wraps(pin_loop)
    def _pin_memory_loop(*args, **kwargs):
        _transfer.active = True
        try:
            return pin_loop(*args, **kwargs)
        finally:
            _transfer.active = False
            if _state is not None and _state.pid == os.getpid() and _state.running:
                _state.detach_thread()

    utils.pin_memory._pin_memory_loop = _pin_memory_loop

    pin = utils.pin_memory.pin_memory

    @functools.wraps(pin)
    def pin_memory(data, *args, **kwargs):
        rec = _state if _state is not None and _state.pid == os.getpid() else None
        if rec is None or not rec.running:
            return pin(data, *args, **kwargs)
        begin = _now()
        out = pin(data, *args, **kwargs)
        rec.element("pin_memory", begin, _now(), 0, _batch_bytes(out), op="map")
        return out

    utils.pin_memory.pin_memory = pin_memory

    utils.worker._worker_loop = _make_worker_loop(utils.worker._worker_loop)
    _patch_unpickling()


def _is_iterable(dataset):
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


_transfer = threading.local()


def _patch_unpickling():
    import multiprocessing.queues as queues

    base = queues._ForkingPickler
    if getattr(base, "_pipetune", False):
        return

    class _TimedPickler(base):
        _pipetune = True

        @classmethod
        def loads(cls, data, *args, **kwargs):
            if not getattr(_transfer, "active", False) or _state is None or not _state.running \
                    or _state.pid != os.getpid():
                return base.loads(data, *args, **kwargs)
            begin = _now()
            out = base.loads(data, *args, **kwargs)
            if isinstance(out, tuple) and len(out) == 2 and out[1] is not None:  # (index, batch)
                _state.element("transfer", begin, _now(), 0, len(data), op="map")
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
    global _applied
    path = os.environ.pop("PIPETUNE_TRACE", None)
    if path:
        # This process owns the trace; its children (DataLoader workers,
        # anything else) must not start their own on the same file.
        os.environ[TRACE_ENV] = os.path.abspath(path)
        os.environ[OWNER_ENV] = str(os.getpid())
    apply_path = os.environ.get(APPLY_ENV)
    if apply_path:
        try:
            with open(apply_path) as f:
                loaded = json.load(f)
            kwargs = loaded.get("dataloader_kwargs", loaded) if isinstance(loaded, dict) else None
            if not isinstance(kwargs, dict):
                raise ValueError("expected a JSON object of DataLoader keyword arguments")
            _applied = {k: v for k, v in kwargs.items() if k in TUNABLE}
        except (OSError, ValueError) as error:
            _warn("%s: %s: not applied" % (apply_path, error))
    if not (os.environ.get(TRACE_ENV) or _applied):
        return
    if "torch.utils.data.dataloader" in sys.modules:
        _patch(sys.modules["torch.utils.data.dataloader"])
    else:
        sys.meta_path.insert(0, _Finder())
