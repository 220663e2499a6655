"""The stages of a streaming dataset, each recorded as its own stage rather
than as one opaque `load`: a webdataset pipeline (tar shards read, then
decode, each map, to_tuple, batched) and a Hugging Face `datasets`
IterableDataset (its shards read, then each `.map`). docs/pytorch.md says
what is recorded.

A stream is a chain of iterators, each pulling from the one before it. A
stage's own time per element is the time of its next() less the time of
the next() calls it made upstream: each call's whole time is added to
its caller's upstream time, which the caller subtracts from its own. What the
stages read from before the first recorded one (the shard list, the tar
files, the Arrow tables) is left to `load`, which the fetcher's
TimedIterator records as the stream's next() less every recorded stage's
own time (SampleContext.transform_ns), exactly as it leaves out a
dataset's transforms.

Names are `transform[K]:NAME`, K counting from 1 in stream order, which
the reader (analyzer/dataloader_profile.cc) orders and models as the
samples' stages; a stage that emits one element per batch (webdataset's
`batched`) has fewer elements than the samples, and the model takes each
stage's visits per batch from its counts.

Nothing of the dataset is changed: the library's own method that chains
the stages is wrapped at class level, once, and finds a dataset's
recording state in a weak map, so the dataset pickles (to a spawned
worker, into a checkpoint) as it would without pipetune.
"""
import time
import weakref

_now = time.monotonic_ns

# dataset -> _Stream, for the datasets a fetcher of this process reads.
_streams = weakref.WeakKeyDictionary()


class _Stream:
    """One dataset's recording: its SampleContext (replaced at each fetcher
    torch makes), the names of its stages by id(stage), and the time (wall
    and CPU) of the next() calls made so far by the stage being pulled
    into the stages upstream of it."""

    def __init__(self, ctx, names):
        self.ctx = ctx
        self.names = names
        self.upstream_ns = 0
        self.upstream_cpu_ns = 0


class IteratorProxy:
    """What every timed stand-in for an iterator shares: the iterator it
    stands for, the count of elements it handed out (their numbers in the
    trace), and being its own iterator."""

    def __init__(self, iterator):
        self._pt_iterator = iterator
        self._pt_count = 0

    def __iter__(self):
        return self

    def __getattr__(self, name):  # the rest of the iterator's attributes are its own
        if name.startswith("_pt_"):
            raise AttributeError(name)
        return getattr(self._pt_iterator, name)


class TimedStage(IteratorProxy):
    """Stands for one stage's output iterator: each next() is recorded as
    the stage's element, less the time of the next() calls made inside it
    by the stages upstream."""

    def __init__(self, iterator, name, stream):
        super().__init__(iter(iterator))
        self._pt_name = name
        self._pt_stream = stream

    def __next__(self):
        stream = self._pt_stream
        ctx = stream.ctx
        if not ctx.active:
            return next(self._pt_iterator)
        # The caller's upstream time so far is put aside while this call
        # counts its own upstream, then given back with this call's whole
        # time added: plain integers, as this runs several times per sample.
        outer_ns, outer_cpu_ns = stream.upstream_ns, stream.upstream_cpu_ns
        stream.upstream_ns = stream.upstream_cpu_ns = 0
        clock = ctx.clock
        begin = _now()
        cpu = clock()
        try:
            item = next(self._pt_iterator)
        finally:
            cpu_ns = clock() - cpu
            end = _now()
            upstream_ns, upstream_cpu_ns = stream.upstream_ns, stream.upstream_cpu_ns
            stream.upstream_ns = outer_ns + (end - begin)
            stream.upstream_cpu_ns = outer_cpu_ns + cpu_ns
        own_ns = max(0, end - begin - upstream_ns)
        own_cpu_ns = max(0, cpu_ns - upstream_cpu_ns)
        ctx.transform_ns += own_ns
        ctx.transform_cpu_ns += own_cpu_ns
        ctx.record(self._pt_name, end - own_ns, end, self._pt_count, own_cpu_ns)
        self._pt_count += 1
        return item


# ---- webdataset

# The stages that read the shards (and those before them): left to `load`.
_WDS_READING = {"SimpleShardList", "ResampledShards", "single_node_only", "split_by_node", "split_by_worker",
                "StreamingOpen", "url_opener", "tar_file_expander", "group_by_keys", "tarfile_to_samples",
                "tarfile_samples", "check_empty", "_shuffle", "shuffle"}


def _wds_stage_name(stage):
    """What a user calls a webdataset stage: decode, map:FN, to_tuple, batched."""
    f = getattr(stage, "f", None)  # a FilterFunction: f with its curried args
    name = getattr(f, "__name__", None) or getattr(stage, "__name__", None) or type(stage).__name__
    args = getattr(stage, "args", ())
    if name == "_map" and args:
        fn = args[0]
        if type(fn).__name__ == "Decoder":
            return "decode"
        return "map:" + (getattr(fn, "__name__", None) or type(fn).__name__)
    return name.lstrip("_")


def _wds_names(pipeline):
    """id(stage) -> its stage name, for the stages after the last that reads."""
    last_reading = -1
    for k, stage in enumerate(pipeline):
        f = getattr(stage, "f", None)
        if {type(stage).__name__, getattr(stage, "__name__", ""), getattr(f, "__name__", "")} & _WDS_READING:
            last_reading = k
    names = {}
    for k, stage in enumerate(pipeline[last_reading + 1:], start=1):
        names[id(stage)] = "transform[%d]:%s" % (k, _wds_stage_name(stage))
    return names


def _patch_wds(klass):
    """Wraps DataPipeline.invoke (which applies each stage to the one before)
    so that a recorded dataset's stages are timed."""
    if getattr(klass.invoke, "_pipetune", False):
        return
    invoke = klass.invoke

    def timed_invoke(self, f, *args, **kwargs):
        out = invoke(self, f, *args, **kwargs)
        stream = _streams.get(self)
        name = stream.names.get(id(f)) if stream is not None else None
        return out if name is None else TimedStage(out, name, stream)

    timed_invoke._pipetune = True
    klass.invoke = timed_invoke


def _webdataset_class(dataset):
    for klass in type(dataset).__mro__:
        if klass.__name__ == "DataPipeline" and klass.__module__.startswith("webdataset") \
                and "invoke" in klass.__dict__:
            return klass
    return None


# ---- Hugging Face datasets

def _hf_names(ex_iterable):
    """The chain of a datasets.IterableDataset's examples iterables, source
    first: [(iterable, stage name or None)], a `.map` named map:FN. In a
    worker, datasets shards the chain into copies; each copy keeps its
    `function`, by which its stage is found (_hf_key)."""
    chain = []
    it = ex_iterable
    while it is not None:
        chain.append(it)
        it = getattr(it, "ex_iterable", None)
    chain.reverse()
    named = []
    k = 0
    for it in chain:
        kind = type(it).__name__
        name = None
        if kind == "MappedExamplesIterable":
            k += 1
            fn = getattr(it, "function", None)
            name = "transform[%d]:map:%s" % (k, getattr(fn, "__name__", None) or type(fn).__name__)
        elif kind in ("FilteredExamplesIterable",):
            k += 1
            name = "transform[%d]:filter" % k
        named.append((it, name))
    return named


def _patch_hf(klass):
    """Wraps an examples iterable's __iter__ so that a recorded dataset's
    `.map` stages are timed; found by their function in the dataset's
    stream, so an unrecorded dataset runs as it would. Only __iter__, the
    path of examples (with_format("torch") and the default): an iterable
    read as Arrow tables (_iter_arrow, a batched map under Arrow
    formatting) is left to `load`, since its __iter__ may itself read
    _iter_arrow and one stage would then be timed twice."""
    klass = next((k for k in klass.__mro__ if "__iter__" in k.__dict__), None)  # a filter's is its map's
    if klass is None or getattr(klass, "_pipetune_streams", False):
        return
    klass._pipetune_streams = True
    original = klass.__dict__["__iter__"]

    def timed(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        for stream in list(_streams.values()):
            name = stream.names.get(_hf_key(self))
            if name is not None:
                return TimedStage(out, name, stream)
        return out

    klass.__iter__ = timed


def _hf_key(ex_iterable):
    # A filter's `function` is a partial made anew in each copy; the user's
    # predicate is its mask_function.
    function = getattr(ex_iterable, "mask_function", None) or getattr(ex_iterable, "function", None)
    return id(function if function is not None else ex_iterable)


def _hf_dataset(dataset):
    return any(klass.__name__ == "IterableDataset" and klass.__module__.startswith("datasets")
               for klass in type(dataset).__mro__) and hasattr(dataset, "_ex_iterable")


def instrument(dataset, ctx):
    """Records the stages of `dataset` (a webdataset pipeline or an HF
    IterableDataset; anything else is left alone) into `ctx`, from the next
    iterator made of it on."""
    stream = _streams.get(dataset)
    if stream is not None:
        stream.ctx = ctx  # a new fetcher (an epoch, a persistent worker's epoch)
        return
    klass = _webdataset_class(dataset)
    if klass is not None:
        _patch_wds(klass)
        _streams[dataset] = _Stream(ctx, _wds_names(dataset.pipeline))
        return
    if _hf_dataset(dataset):
        named = _hf_names(dataset._ex_iterable)
        names = {_hf_key(it): name for it, name in named if name is not None}
        if names:
            for it, name in named:
                if name is not None:
                    _patch_hf(type(it))
            _streams[dataset] = _Stream(ctx, names)


# ---- shards

def shard_count(dataset):
    """How many shards the stream of `dataset` is split into across a
    DataLoader's workers, each shard read whole by one worker: a worker
    past that count gets none and delivers nothing (webdataset's
    check_empty then fails the run), so `tune` proposes no more workers
    than this (docs/pytorch.md, "A stream's shards"). A webdataset
    pipeline's shard list when it splits by worker (this rank's share when
    it also splits by node), an HF IterableDataset's n_shards. None for
    every other dataset, a resampled shard list (each worker draws from all
    of them) and a list not split by worker (each worker reads it all)."""
    if _webdataset_class(dataset) is not None:
        return _wds_shard_count(dataset.pipeline)
    if _hf_dataset(dataset):
        n = getattr(dataset, "n_shards", None)
        return n if isinstance(n, int) and n > 0 else None
    return None


def _wds_shard_count(pipeline):
    if not pipeline or type(pipeline[0]).__name__ != "SimpleShardList":
        return None
    names = {getattr(stage, "__name__", "") for stage in pipeline}
    if "split_by_worker" not in names:
        return None
    urls = len(pipeline[0].urls)
    if "split_by_node" in names:
        from pipetune import _apply

        fields = _apply.distributed_fields()
        rank, world = fields["rank"] or 0, fields["world_size"] or 1
        if world > 1:
            urls = len(range(rank, urls, world))
    return urls or None
