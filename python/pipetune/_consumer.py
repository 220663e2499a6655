"""The main process's recording of each DataLoader (docs/pytorch.md, "What
is recorded"): its construction (settings; --apply), each iterator (an
epoch), the training loop's waits and steps, transfer and pin_memory, and
at num_workers=0 the samples themselves. DataLoader N's stages are named
"loaderN/..."."""
import functools
import inspect

from pipetune import _apply, _autotune, _dataset, _fetch, _samples, _session, _streams
from pipetune._workers import _WorkerTag
from pipetune._recorder import warn_once as _warn_once
from pipetune._session import cpu as _cpu, now as _now, where as _where

KEY = _session.KEY



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
    dataset = _fetch.unwrapped(loader.dataset)[0]
    return {
        "batch_size": loader.batch_size, "num_workers": loader.num_workers,
        "fetch_threads": _fetch.threads_of(loader),
        "prefetch_factor": loader.prefetch_factor if loader.num_workers > 0 else None,
        "persistent_workers": bool(loader.persistent_workers), "pin_memory": bool(loader.pin_memory),
        "sampler": type(loader.sampler).__name__, "shuffle": _dataset.shuffles(loader),
        "drop_last": bool(loader.drop_last),
        "multiprocessing_context": method, "dataset": type(dataset).__name__,
        "iterable": _is_iterable(loader.dataset), "dataset_length": samples, "batches_per_epoch": batches,
        "shards": _shards(loader.dataset),
    }


def _shards(dataset):
    try:
        return _streams.shard_count(dataset)
    except Exception as error:  # a dataset of an odd shape: the rest is still recorded
        _warn_once("the stream's shards", error)
        return None



def _recording(iterator):
    """The main recorder and the iterator's _Loader, or (None, None)."""
    loader = getattr(iterator, "_pipetune_loader", None)
    rec = _session.recording()
    if loader is None or rec is None:
        return None, None
    return rec, loader


# DataLoader ids, counted over every recorded class (torch's DataLoader and
# torchdata's StatefulDataLoader): "loaderN/" is unique in the process.
_loader_ids = [0]


def patch_loader(module):
    """torch's DataLoader: construction (settings, --apply), __iter__ (an
    epoch) and the iterators' __next__ (the consumer)."""
    patch_loader_class(module.DataLoader)
    patch_next(module._BaseDataLoaderIter)


def patch_loader_class(klass):
    """Construction and __iter__ of a DataLoader class that defines its own
    (torch's; torchdata's StatefulDataLoader, whose __init__ does not call
    DataLoader's and whose __iter__ keeps one iterator for its state)."""
    init = klass.__dict__["__init__"]
    init_signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if _apply.active():
            args, kwargs = _apply.apply_kwargs(init_signature, (self,) + args, kwargs)
            args = args[1:]
        init(self, *args, **kwargs)
        if _apply.active():
            _apply.apply_fetch_threads(self)
        try:
            rec = _session.main_recorder()
            if rec is not None:
                _loader_ids[0] += 1
                loader = _Loader(_loader_ids[0])
                entry = {"id": loader.id, "settings": _settings(self)}
                try:
                    entry["dataset"] = _dataset.describe_dataset(_fetch.unwrapped(self.dataset)[0])
                except Exception as error:  # an odd dataset: its settings are still recorded
                    _warn_once("the DataLoader's dataset", error)
                rec.info[KEY]["loaders"].append(entry)
                object.__setattr__(self, "_pipetune_loader", loader)
                rec.update_info()
        except Exception as error:
            _warn_once("a DataLoader", error)

    klass.__init__ = __init__

    original_iter = klass.__dict__["__iter__"]

    @functools.wraps(original_iter)
    def __iter__(self):
        rec, loader = _recording(self)
        if rec is None:
            return original_iter(self)
        try:
            _session.refresh_rank(rec)
        except Exception as error:
            _warn_once("the process's rank", error)
        if _autotune.options() is not None:
            # An epoch boundary: the settings may change, and the trace with them.
            _autotune.at_iterator(self, loader, _settings)
            rec = _session.recording()
            if rec is None:
                return original_iter(self)
        begin = _now()
        cpu = _cpu()
        it = original_iter(self)
        cpu_ns = _cpu() - cpu
        rec.element(loader.prefix + "epoch", begin, _now(), loader.batches, op="epoch", cpu_ns=cpu_ns)
        it._pipetune_loader = loader
        it._pipetune_prev = None
        return it

    klass.__iter__ = __iter__


def patch_next(base):
    """The iterators' __next__ (every DataLoader iterator derives from
    torch's _BaseDataLoaderIter, StatefulDataLoader's too): the loop's
    waits and steps."""
    base_next = base.__next__

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

    base.__next__ = __next__


def patch_iterators(module):
    """The samples at num_workers=0, and the pin thread's DataLoader, for
    torch's iterators; the pin thread's loop and pin_memory itself."""
    patch_single_iterator(module._SingleProcessDataLoaderIter)
    patch_multi_iterator(module._MultiProcessingDataLoaderIter)
    pin_module = module._utils.pin_memory

    pin_loop = pin_module._pin_memory_loop

    @functools.wraps(pin_loop)
    def _pin_memory_loop(*args, _pipetune_prefix=None, **kwargs):
        _where.prefix = _pipetune_prefix
        try:
            return pin_loop(*args, **kwargs)
        finally:
            _where.prefix = None
            rec = _session.recording()
            if rec is not None:
                rec.detach_thread()

    pin_module._pin_memory_loop = _pin_memory_loop

    pin = pin_module.pin_memory

    @functools.wraps(pin)
    def pin_memory(data, *args, **kwargs):
        rec = _session.recording()
        prefix = getattr(_where, "prefix", None)
        # pin_memory calls itself (by its module's name) for each part of a
        # batch: only the outermost call is the batch's. The pin thread also
        # passes on what is not a batch: a persistent worker's acknowledgment
        # of a new epoch (None), an iterable's end of stream.
        if prefix is None or getattr(_where, "pinning", False) or rec is None or not _is_batch(data):
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


def patch_single_iterator(single):
    """A num_workers=0 iterator class (torch's, or StatefulDataLoader's own
    copy of it): its fetcher's samples, in the main process."""
    single_init = single.__init__

    @functools.wraps(single_init)
    def single_process_init(self, loader, *args, **kwargs):
        single_init(self, loader, *args, **kwargs)
        record = getattr(loader, "_pipetune_loader", None)
        rec = _session.main_recorder() if record is not None else None
        fetcher = getattr(self, "_dataset_fetcher", None)
        if rec is None or fetcher is None:
            return
        try:
            _samples.instrument_fetcher(fetcher, rec, record.prefix)
        except Exception as error:
            _warn_once("the samples at num_workers=0", error)

    single.__init__ = single_process_init


def patch_multi_iterator(multi):
    """A worker iterator class (torch's, or StatefulDataLoader's own copy):
    the pin thread is started inside its __init__ with torch's
    _pin_memory_loop as its target, so for the span of the __init__ that
    target is bound to this DataLoader's prefix. Likewise its workers are
    started there: for that span, the DataLoader's worker_init_fn is a
    _WorkerTag that carries the main trace and the DataLoader's id to them."""
    from torch.utils.data import _utils

    pin_module = _utils.pin_memory
    multi_init = multi.__init__

    @functools.wraps(multi_init)
    def multi_process_init(self, loader, *args, **kwargs):
        record = getattr(loader, "_pipetune_loader", None)
        rec = _session.recording()
        if record is None or rec is None:
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


def _is_iterable(dataset):
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


# What a worker sends the main process besides batches: an iterable's end of
# stream, an exception on its way, StatefulDataLoader's acknowledgment of a
# start or a new epoch (carrying the worker's state).
_NOT_BATCHES = ("_IterableDatasetStopIteration", "ExceptionWrapper", "_AckStartup")


def _is_batch(payload):
    # A worker's (index, payload): a batch, not one of the above. A
    # StatefulDataLoader's worker sends (payload, worker id, state delta).
    if isinstance(payload, tuple) and len(payload) == 3 and type(payload[0]).__name__ in _NOT_BATCHES:
        return False
    return payload is not None and type(payload).__name__ not in _NOT_BATCHES


def patch_unpickling():
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
            rec = _session.recording()
            prefix = getattr(_where, "prefix", None)
            if prefix is None or rec is None:
                return base.loads(data, *args, **kwargs)
            begin = _now()
            cpu = _cpu()
            out = base.loads(data, *args, **kwargs)
            if isinstance(out, tuple) and len(out) == 2 and _is_batch(out[1]):
                cpu_ns = _cpu() - cpu
                rec.element(prefix + "transfer", begin, _now(), 0, len(data), cpu_ns=cpu_ns)
            return out

    queues._ForkingPickler = _TimedPickler


