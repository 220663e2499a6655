"""Per-sample recording, in whichever process fetches a DataLoader's samples
(a worker process, or the main process at num_workers=0): `load` (each
dataset[i], or each element of an iterable dataset's stream, less its
transforms), each transform of the dataset's `transform` (a Compose, a list,
or a wrapper object holding one), and `collate`.
docs/pytorch.md says what is recorded.

Each recorded call is timed on the monotonic clock (the tracer's) and, on
the samples that read it, on the thread's CPU clock (time.thread_time_ns),
so that each stage is charged its own CPU rather than the whole thread's:
load, the transforms and collate all run on one thread.

The CPU clock is a system call, and in a DataLoader worker a dear one (about
8 us with its aftermath, beside a worker's large tensors: read around each
stage of a map-style sample it cost 3-5% of images/s,
docs/benchmarks-pytorch.md). So a dataset's samples read it on the first
CPU_CLOCK_WARMUP samples and then on one in CPU_CLOCK_EVERY; each stage of
the other samples is charged its own wall time at the stage's CPU share so
far (its summed CPU over its summed wall time on the samples that read the
clock): a stage that sleeps or waits for storage stays cheap, a stage that
computes is charged about its time. PIPETUNE_CPU_CLOCK_EVERY=1 reads it on
every sample; `pipetune baseline` and `check` do, since they compare each
stage's CPU between runs.

Wrapping rules. The fetcher torch makes per epoch (at num_workers=0), per
worker, or per epoch of a persistent worker of an iterable dataset is
instrumented each time; the dataset's `transform` is wrapped once, the first
time, and its wrappers keep reporting to the one SampleContext of that
dataset, so that `load` never includes a transform's time.
"""
import functools
import operator
import os
import threading
import time

from pipetune import _dataset, _fetch, _gilprobe, _hf_map, _streams

_now = time.monotonic_ns
_cpu = time.thread_time_ns
_no_clock = int  # int() is 0: the clock of a sample that does not read the CPU clock
_thread_id = threading.get_ident

CPU_CLOCK_WARMUP = 8


def _cpu_clock_every():
    try:
        return max(1, int(os.environ.get("PIPETUNE_CPU_CLOCK_EVERY", "8")))
    except ValueError:
        return 8


CPU_CLOCK_EVERY = _cpu_clock_every()

# True while a dataset's stream is being read (its iterator made, or its
# next()): what get_worker_info() calls are noted as sharding (dataloader.py).
reading_stream = [False]


class SampleContext(threading.local):
    """One dataset's recording state, shared by its transforms' wrappers: the
    recorder and stage-name prefix of the sample being fetched, and what its
    transforms took so far (subtracted from `load`). Outside a fetch
    (`active` false) the transforms run unrecorded. The state is each
    thread's own: with fetch threads (_fetch.py) several samples of one
    dataset are fetched at once, each on its thread.

    record() is the one way every stage of a sample is recorded (load, a
    transform, a stream's stage, a format's decode). It is called several
    times per sample, so it keeps the fetching thread's tracer handle of
    each stage by name, valid for one recorder, prefix and thread, rather
    than look them up per call (Recorder.element's way: a thread-local
    table, the prefixed name built each time)."""

    def __init__(self, rec):
        self.rec = rec
        self.prefix = ""
        self.index = 0
        self.active = False
        self.transform_ns = 0
        self.transform_cpu_ns = 0
        self._handles = {}
        self._pending = None
        self._owner = None  # the recorder and prefix _handles are of
        self._thread = None
        # The CPU clock: this sample's (`clock`: _cpu, or _no_clock on a
        # sample that does not read it), and each stage's [CPU, wall] summed
        # over the samples that read it (the module's docstring).
        self.samples = 0
        self.reading = True
        self.clock = _cpu
        self._cpu_share = {}

    def begin(self, rec, prefix, index):
        thread = _thread_id()
        owner = self._owner
        if owner is None or owner[0] is not rec or owner[1] != prefix or thread != self._thread:
            self._handles = {}
            self._pending = rec.buffer()  # this thread's, handed over in batches (Recorder.push)
            self._owner = (rec, prefix)
            self._thread = thread
        self.rec = rec
        self.prefix = prefix
        self.index = index
        self.transform_ns = 0
        self.transform_cpu_ns = 0
        n = self.samples
        self.samples = n + 1
        reading = n < CPU_CLOCK_WARMUP or n % CPU_CLOCK_EVERY == 0
        self.reading = reading
        self.clock = _cpu if reading else _no_clock
        self.active = True

    def record(self, name, begin, end, element_id, cpu_ns, count=1, op="map"):
        """`count` elements of stage `name` (unprefixed), done from begin to end with cpu_ns of CPU."""
        rec = self.rec
        if not rec.running:
            return
        share = self._cpu_share.get(name)
        if self.reading:
            if share is None:
                share = self._cpu_share[name] = [0, 0]
            share[0] += max(0, cpu_ns)
            share[1] += end - begin
        elif share is None or share[1] <= 0:
            cpu_ns = end - begin  # not read yet for this stage: its wall time
        else:
            cpu_ns = min(end - begin, (end - begin) * share[0] // share[1])
        if _thread_id() != self._thread:  # a transform run on a thread of the dataset's own
            rec.elements(self.prefix + name, begin, end, element_id, count, op=op, cpu_ns=cpu_ns)
            return
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = rec.worker(self.prefix + name, op)
        rec.push(self._pending, handle, begin, end, element_id, cpu_ns, count)

    def record_load(self, begin, end, cpu_ns, count=1):
        self.record("load", begin, max(begin, end - self.transform_ns), self.index,
                    cpu_ns - self.transform_cpu_ns, count, op="read")


def _original(wrapper):
    # Pickled or copied, a wrapper is its original (operator.getitem of a list
    # holding it): a spawned worker gets the user's transforms and wraps them
    # itself, and a saved dataset does not need pipetune to load.
    return (operator.getitem, ([wrapper.__dict__["_pt_original"]], 0))


class _Stand:
    """Stands for the object in _pt_original: its attributes, repr and pickling are the original's."""

    def __getattr__(self, name):
        if name == "_pt_original":
            raise AttributeError(name)
        return getattr(self._pt_original, name)

    def __repr__(self):
        return repr(self._pt_original)

    def __reduce_ex__(self, protocol):
        return _original(self)


class TimedTransform(_Stand):
    """One transform of a Compose (or of a list) recorded as its own stage."""

    def __init__(self, transform, name, ctx):
        self._pt_original = transform
        self.name = name
        self.ctx = ctx

    def __call__(self, *args, **kwargs):
        ctx = self.ctx
        if not ctx.active:
            return self._pt_original(*args, **kwargs)
        clock = ctx.clock
        begin = _now()
        cpu = clock()
        out = self._pt_original(*args, **kwargs)
        cpu_ns = clock() - cpu
        self.record(ctx, begin, _now(), cpu_ns)
        return out

    def record(self, ctx, begin, end, cpu_ns):
        ctx.transform_ns += end - begin
        ctx.transform_cpu_ns += cpu_ns
        ctx.record(self.name, begin, end, ctx.index, cpu_ns)


class TimedCompose(_Stand):
    """Stands for a Compose: calls its transforms' recording wrappers in turn."""

    def __init__(self, compose, timed, ctx):
        self._pt_original = compose
        self.transforms = timed
        self.ctx = ctx

    def __call__(self, x):
        ctx = self.ctx
        if not ctx.active:
            for t in self.transforms:
                x = t(x)
            return x
        # Each clock is read once between two transforms, not twice (the
        # thread's CPU clock is a system call: about a microsecond, more
        # beside a worker's large tensors), and the steps are recorded
        # after the last one, so that no step's time holds the recording.
        clock = ctx.clock
        steps = []
        begin = _now()
        cpu = clock()
        try:
            for t in self.transforms:
                x = t._pt_original(x)
                cpu_end = clock()
                end = _now()
                steps.append((t, begin, end, cpu_end - cpu))
                begin, cpu = end, cpu_end
        finally:  # the steps done before one that raised are recorded too
            for t, begin, end, cpu_ns in steps:
                t.record(ctx, begin, end, cpu_ns)
        return x


def _transform_name(k, t):
    return "transform[%d]:%s" % (k, type(t).__name__)


def _wrapped_context(transform):
    if isinstance(transform, TimedCompose):
        return transform.ctx
    if isinstance(transform, list) and transform and all(isinstance(t, TimedTransform) for t in transform):
        return transform[0].ctx
    return None


def _existing_context(transform):
    """The SampleContext of a transform wrapped before: the dataset's
    `transform` itself, or the one attribute of a wrapper object holding it."""
    ctx = _wrapped_context(transform)
    if ctx is None and transform is not None and not isinstance(transform, list):
        for value in getattr(transform, "__dict__", {}).values():
            ctx = ctx or _wrapped_context(value)
    return ctx


def _timed(transform, ctx):
    """A Compose's or a list's recording stand-in; None for anything else."""
    if isinstance(transform, list) and transform and all(callable(t) for t in transform):
        return [TimedTransform(t, _transform_name(k, t), ctx) for k, t in enumerate(transform)]
    if _dataset.is_compose(transform):
        timed = [TimedTransform(t, _transform_name(k, t), ctx) for k, t in enumerate(transform.transforms)]
        return TimedCompose(transform, timed, ctx)
    return None


def _wrap_transform(dataset, transform, ctx):
    """Replaces the dataset's transforms by ones that record each transform,
    when `dataset.transform` is a Compose (torchvision's, or any class so
    named with a `transforms` list) or a list of callables, or a wrapper
    object holding one of those in an attribute (torchvision's
    ClassificationPresetTrain: `self.transforms = Compose([...])`), whose
    attribute is replaced."""
    owner, key = dataset, "transform"
    timed = _timed(transform, ctx)
    if timed is None:
        held = _dataset.held_transforms(transform)
        if held is None:
            return  # one opaque callable: its time stays in `load`
        owner, key = transform, held
        timed = _timed(getattr(transform, held), ctx)
        if timed is None:
            return
    try:
        setattr(owner, key, timed)
    except (AttributeError, TypeError):  # a read-only attribute: the transforms go unrecorded
        pass


def context_of(dataset, rec):
    """The dataset's SampleContext, its transforms wrapped the first time
    (an HF map-style dataset's format transform: _hf_map.py)."""
    transform = getattr(dataset, "transform", None)
    hf = transform is None and _hf_map.is_hf_dataset(dataset)
    ctx = _hf_map.context_of(dataset) if hf else _existing_context(transform)
    if ctx is not None:
        ctx.rec = rec  # wrapped in a forked parent, or by another DataLoader
        return ctx
    ctx = SampleContext(rec)
    if hf:
        _hf_map.instrument(dataset, ctx, TimedTransform)
    elif transform is not None:
        _wrap_transform(dataset, transform, ctx)
    return ctx


class TimedDataset:
    """Stands for a map-style dataset in its fetcher: dataset[i] is recorded
    as `load` (its time less the transforms') and each transform's stage."""

    def __init__(self, dataset, ctx, rec, prefix):
        self._pt_dataset = dataset
        self._pt_ctx = ctx
        self._pt_rec = rec
        self._pt_prefix = prefix

    def __getitem__(self, index):
        ctx = self._pt_ctx
        ctx.begin(self._pt_rec, self._pt_prefix, index if isinstance(index, int) else 0)
        probe = _gilprobe.probe()
        probe.enter()
        begin = _now()
        clock = ctx.clock
        cpu = clock()
        try:
            item = self._pt_dataset[index]
        finally:
            ctx.active = False
            probe.leave(1)
        cpu_ns = clock() - cpu
        ctx.record_load(begin, _now(), cpu_ns)
        return item

    def __len__(self):
        return len(self._pt_dataset)

    def __getattr__(self, name):
        if name == "__getitems__" or name.startswith("_pt_"):  # batch fetching: TimedBatchDataset's
            raise AttributeError(name)
        return getattr(self._pt_dataset, name)


class TimedBatchDataset(TimedDataset):
    """Stands for a map-style dataset that fetches a batch at once
    (__getitems__, as HF datasets' does): the call is recorded as `load` of
    that many samples, so that the traced run fetches as the untraced one."""

    def __getitems__(self, indices):
        ctx = self._pt_ctx
        first = indices[0] if len(indices) and isinstance(indices[0], int) else 0
        ctx.begin(self._pt_rec, self._pt_prefix, first)
        probe = _gilprobe.probe()
        probe.enter()
        begin = _now()
        clock = ctx.clock
        cpu = clock()
        try:
            items = self._pt_dataset.__getitems__(indices)
        finally:
            ctx.active = False
            probe.leave(max(1, len(indices)))
        cpu_ns = clock() - cpu
        ctx.record_load(begin, _now(), cpu_ns, max(1, len(indices)))
        return items


class TimedIterator(_streams.IteratorProxy):
    """Stands for an iterable dataset's iterator in its fetcher: each next()
    is recorded as `load` (less the transforms') and each transform's stage,
    the elements numbered in stream order."""

    def __init__(self, iterator, ctx, rec, prefix):
        super().__init__(iterator)
        self._pt_ctx = ctx
        self._pt_rec = rec
        self._pt_prefix = prefix

    def __next__(self):
        ctx = self._pt_ctx
        ctx.begin(self._pt_rec, self._pt_prefix, self._pt_count)
        reading_stream[0] = True
        begin = _now()
        cpu = ctx.clock()
        try:
            item = next(self._pt_iterator)
        finally:
            ctx.active = False
            reading_stream[0] = False
        cpu_ns = ctx.clock() - cpu
        ctx.record_load(begin, _now(), cpu_ns)
        self._pt_count += 1
        return item


def batch_bytes(data, depth=0):
    """A batch's bytes: its tensors' (and arrays') nbytes, nested up to 6 deep."""
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
        return sum(batch_bytes(x, depth + 1) for x in data)
    if isinstance(data, dict):
        return sum(batch_bytes(x, depth + 1) for x in data.values())
    return 0


def timed_collate(collate_fn, rec, prefix):
    counter = [0]

    @functools.wraps(collate_fn)
    def collate(batch):
        begin = _now()
        cpu = _cpu()
        out = collate_fn(batch)
        cpu_ns = _cpu() - cpu
        rec.element(prefix + "collate", begin, _now(), counter[0], batch_bytes(out), op="batch", cpu_ns=cpu_ns)
        rec.flush()  # the batch's samples, recorded on this thread, in the tracer's counts by the batch's end
        counter[0] += 1
        return out

    return collate


def instrument_fetcher(fetcher, rec, prefix):
    """Records the samples and collate of a fetcher torch just made (its
    dataset, or its iterable dataset's iterator, and its collate_fn)."""
    dataset = fetcher.dataset
    ctx = context_of(_fetch.unwrapped(dataset)[0], rec)
    if hasattr(fetcher, "dataset_iter"):  # _IterableDatasetFetcher
        _streams.instrument(dataset, ctx)  # a webdataset's or HF datasets' own stages
        if not isinstance(fetcher.dataset_iter, TimedIterator):
            fetcher.dataset_iter = TimedIterator(fetcher.dataset_iter, ctx, rec, prefix)
    elif isinstance(dataset, _fetch.ConcurrentFetch):
        # Each sample is recorded on the fetch thread that reads it.
        if not isinstance(dataset.dataset, TimedDataset):
            fetcher.dataset = dataset.with_dataset(TimedDataset(dataset.dataset, ctx, rec, prefix),
                                                   rec.detach_thread)
    elif not isinstance(dataset, TimedDataset):
        timed = TimedBatchDataset if callable(getattr(dataset, "__getitems__", None)) else TimedDataset
        fetcher.dataset = timed(dataset, ctx, rec, prefix)
    if getattr(fetcher, "collate_fn", None) is not None:
        fetcher.collate_fn = timed_collate(fetcher.collate_fn, rec, prefix)
