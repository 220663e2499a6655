"""pipetune.Loader: a config's batches as torch tensors, from the engine's own
threads inside the training process (docs/pytorch.md, "Swapping the
DataLoader"). A ctypes binding of loader/include/pipetune/loader/loader_c.h
in libpipetune_loader.so, like the tracer's (_tracer.py): nothing to compile
against Python, one library for every Python version, and ctypes releases
the GIL for the whole of each call, so the training process's other threads
run while the loop waits for a batch.

    loader = pipetune.Loader("tuned.json")          # instead of DataLoader(...)
    for epoch in range(epochs):
        loader.set_epoch(epoch)                     # optional, as DistributedSampler
        for images, labels in loader:               # float32 NCHW, int64 [N]
            ...

A batch's images are the engine's own buffer (torch.frombuffer over it, no
copy); the buffer is freed when the last tensor using it is. Breaking out of
an epoch, an exception in the loop (Ctrl-C's KeyboardInterrupt included) and
close() or deleting the Loader stop the engine's threads and free its
buffers.
"""
import ctypes
import json
import os
import sys

from pipetune._tracer import find_library

_OK, _END, _BATCH, _TIMEOUT, _BAD_CONFIG = 0, 0, 1, 2, 3
_DTYPE_F32 = 2
_POLL_MS = 100  # a wait is cut into pieces this long so that Ctrl-C is seen


class _Options(ctypes.Structure):
    _fields_ = [
        ("config_json", ctypes.c_char_p),
        ("config_path", ctypes.c_char_p),
        ("seed", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("world_size", ctypes.c_uint32),
        ("drop_last", ctypes.c_int32),
        ("trace_path", ctypes.c_char_p),
        ("autotune", ctypes.c_int32),
        ("autotune_refit_seconds", ctypes.c_double),
        ("autotune_cores", ctypes.c_double),
        ("autotune_memory", ctypes.c_uint64),
        ("autotune_max_threads", ctypes.c_int32),
        ("autotune_output", ctypes.c_char_p),
    ]


class _BatchInfo(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("bytes", ctypes.c_uint64),
        ("dtype", ctypes.c_int32),
        ("channels_first", ctypes.c_int32),
        ("count", ctypes.c_uint32),
        ("height", ctypes.c_int32),
        ("width", ctypes.c_int32),
        ("channels", ctypes.c_int32),
        ("labels", ctypes.c_void_p),
        ("ids", ctypes.c_void_p),
    ]


_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(find_library("libpipetune_loader.so", "PIPETUNE_LOADER_LIBRARY"))
        ptr = ctypes.c_void_p
        signatures = {
            "pipetune_loader_options_init": (None, [ctypes.POINTER(_Options)]),
            "pipetune_loader_create": (ctypes.c_int, [ctypes.POINTER(_Options), ctypes.POINTER(ptr)]),
            "pipetune_loader_batches_per_epoch": (ctypes.c_uint64, [ptr]),
            "pipetune_loader_start_epoch": (ctypes.c_int, [ptr, ctypes.c_uint32]),
            "pipetune_loader_next": (ctypes.c_int, [ptr, ctypes.c_int64, ctypes.POINTER(ptr)]),
            "pipetune_loader_stop": (None, [ptr]),
            "pipetune_loader_destroy": (None, [ptr]),
            "pipetune_batch_get_info": (None, [ptr, ctypes.POINTER(_BatchInfo)]),
            "pipetune_batch_free": (None, [ptr]),
            "pipetune_loader_last_error": (ctypes.c_char_p, []),
            "pipetune_loader_next_decision": (ctypes.c_char_p, [ptr]),
            "pipetune_loader_autotuned_config": (ctypes.c_char_p, [ptr]),
            "pipetune_loader_autotune_finish": (ctypes.c_int, [ptr, ctypes.POINTER(ctypes.c_char_p)]),
        }
        for name, (restype, argtypes) in signatures.items():
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
        _lib = lib
    return _lib


def _last_error():
    return _library().pipetune_loader_last_error().decode(errors="replace")


class _Batch:
    """Owns one engine batch; the tensors over its buffer hold it (through
    the ctypes arrays they were made from) and free it when they go."""

    __slots__ = ("handle", "lib")

    def __init__(self, handle, lib):
        self.handle = handle
        self.lib = lib

    def __del__(self):
        if self.handle:
            self.lib.pipetune_batch_free(self.handle)
            self.handle = None


def _tensor_over(address, nbytes, dtype, owner):
    import torch

    array = (ctypes.c_uint8 * nbytes).from_address(address)
    array.owner = owner  # the array, kept by the tensor, keeps the batch
    return torch.frombuffer(array, dtype=dtype)


def _distributed_shard(rank, world_size):
    if (rank is None) != (world_size is None):
        raise ValueError("pipetune.Loader: give rank and world_size together (or neither)")
    if rank is not None:
        if not 0 <= rank < world_size:
            raise ValueError("pipetune.Loader: rank %r is not in [0, world_size=%r)" % (rank, world_size))
        return rank, world_size
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


_traced = False  # the process's trace is taken by its first Loader


def _trace_path():
    """Under `pipetune profile`, where this process's trace goes: the run's
    trace T for the first process that records (as the DataLoader recorder
    claims it, O_EXCL), T.main.<pid> for any other; None when not profiled,
    in a DataLoader worker, or when this process already records."""
    global _traced
    path = os.environ.get("PIPETUNE_PYTHON_TRACE")
    if not path or _traced:
        return None
    from pipetune import _session

    if _session.in_worker or _session.state is not None:
        return None  # a worker, or the DataLoader recorder has the session
    _traced = True
    return _session.claim(path)


def _autotune_options(options, output, refit_seconds, cores, memory, max_threads):
    """Checks autotune's keyword arguments (a ValueError naming the one that
    is wrong) and sets them in the C options."""

    def positive(name, value, kind):
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
            raise ValueError("pipetune.Loader: %s must be a positive %s, got %r" % (
                name, "integer" if kind is int else "number", value))
        return value

    options.autotune = 1
    options.autotune_refit_seconds = float(positive("autotune_refit_seconds", refit_seconds, (int, float)))
    options.autotune_cores = float(positive("autotune_cores", cores, (int, float)))
    options.autotune_memory = positive("autotune_memory", memory, int)
    options.autotune_max_threads = positive("autotune_max_threads", max_threads, int)
    options.autotune_output = os.fsencode(os.path.abspath(os.fspath(output))) if output is not None else None


class Loader:
    """Iterates a config's batches as (images, labels) torch tensors.

    config: a config file's path, or the config as a dict (its relative paths
    then resolve against the working directory). seed: added to the config's
    seeds; every rank must use the same. rank, world_size: this process's
    shard (default: torch.distributed's when initialised, else the whole
    dataset). drop_last: replaces the config's batch setting when given.

    autotune=True retunes the running engine live (docs/pytorch.md, "autotune=True"):
    a thread of the engine's refits the model on the Loader's own trace every
    autotune_refit_seconds (default 2) and resizes the workers and prefetch
    buffers within the budgets (autotune_cores, autotune_memory in bytes,
    autotune_max_threads; default: the config's resources, else the host's).
    Each decision is printed to stderr as `pipetune autotune` prints it, and
    kept in `decisions`. close() writes the settled config to autotune_output
    (default: NAME.autotuned.json beside the config file, by rank 0 alone
    under torch.distributed; a dict config: not written) and sets
    `autotuned_path`; autotuned_config() gives it as a dict.
    """

    def __init__(self, config, *, seed=0, rank=None, world_size=None, drop_last=None, autotune=False,
                 autotune_output=None, autotune_refit_seconds=None, autotune_cores=None, autotune_memory=None,
                 autotune_max_threads=None):
        self._handle = None
        self._autotune = bool(autotune)
        self.decisions = []
        self.autotuned_path = None
        self._settled = None
        lib = _library()
        if isinstance(config, dict):
            text, path = json.dumps(config), None
        else:
            path = os.path.abspath(os.fspath(config))
            with open(path) as f:
                text = f.read()
        rank, world_size = _distributed_shard(rank, world_size)
        options = _Options()
        lib.pipetune_loader_options_init(ctypes.byref(options))
        options.config_json = text.encode()
        options.config_path = path.encode() if path else None
        options.seed = int(seed) & (2 ** 64 - 1)
        options.rank, options.world_size = rank, world_size
        options.drop_last = -1 if drop_last is None else int(bool(drop_last))
        if autotune:
            _autotune_options(options, autotune_output, autotune_refit_seconds, autotune_cores, autotune_memory,
                              autotune_max_threads)
            if autotune_output is None and rank != 0:
                options.autotune_output = b""  # one file per job: rank 0's (each rank tunes its own shard)
        elif any(v is not None for v in (autotune_output, autotune_refit_seconds, autotune_cores, autotune_memory,
                                         autotune_max_threads)):
            raise ValueError("pipetune.Loader: the autotune_* options need autotune=True")
        trace = _trace_path()
        options.trace_path = trace.encode() if trace else None
        handle = ctypes.c_void_p()
        rc = lib.pipetune_loader_create(ctypes.byref(options), ctypes.byref(handle))
        if rc not in (_OK, _BAD_CONFIG) and trace:
            # Tracing must never stop training: run unrecorded, and say so.
            sys.stderr.write("pipetune: the Loader is not recorded: %s\n" % _last_error())
            options.trace_path = None
            rc = lib.pipetune_loader_create(ctypes.byref(options), ctypes.byref(handle))
        if rc == _BAD_CONFIG:
            raise ValueError("pipetune.Loader: %s" % _last_error())
        if rc != _OK:
            raise RuntimeError("pipetune.Loader: %s" % _last_error())
        self._lib = lib
        self._handle = handle
        self._batches = int(lib.pipetune_loader_batches_per_epoch(handle))
        self._epoch = 0
        self._epoch_set = False
        self._generation = 0  # which iterator owns the engine's current pass
        self.rank, self.world_size = rank, world_size

    def __len__(self):
        return self._batches

    def set_epoch(self, epoch):
        """The epoch the next iterations draw their order and augmentations
        from (as DistributedSampler.set_epoch); without it each iter()
        advances the epoch."""
        self._epoch = int(epoch)
        self._epoch_set = True

    def __iter__(self):
        if self._handle is None:
            raise RuntimeError("pipetune.Loader: iterated after close()")
        epoch = self._epoch
        if not self._epoch_set:
            self._epoch += 1
        self._generation += 1
        rc = self._lib.pipetune_loader_start_epoch(self._handle, epoch)
        if rc != _OK:
            raise RuntimeError("pipetune.Loader: %s" % _last_error())
        return self._epoch_batches(self._generation)

    def _epoch_batches(self, generation):
        lib, handle = self._lib, self._handle
        batch = ctypes.c_void_p()
        ended = False
        try:
            while generation == self._generation and self._handle is not None:
                rc = lib.pipetune_loader_next(handle, _POLL_MS, ctypes.byref(batch))
                if rc == _TIMEOUT:
                    continue
                if rc == _BATCH:
                    if self._autotune:
                        self._print_decisions()
                    yield self._tensors(batch.value)
                    continue
                ended = True  # the engine ended the pass itself (its end, or a failure)
                if self._autotune:
                    self._print_decisions()
                if rc == _END:
                    return
                raise RuntimeError("pipetune.Loader: %s" % _last_error())
        finally:
            # Left early (break, an exception, the iterator dropped): stop the
            # threads now rather than when the next epoch starts.
            if not ended and generation == self._generation and self._handle is not None:
                lib.pipetune_loader_stop(handle)

    def _tensors(self, handle):
        import torch

        owner = _Batch(handle, self._lib)
        info = _BatchInfo()
        self._lib.pipetune_batch_get_info(handle, ctypes.byref(info))
        n = info.count
        dtype = torch.float32 if info.dtype == _DTYPE_F32 else torch.uint8
        images = _tensor_over(info.data, info.bytes, dtype, owner)
        if info.channels_first:
            images = images.view(n, info.channels, info.height, info.width)
        else:
            images = images.view(n, info.height, info.width, info.channels)
        labels = _tensor_over(info.labels, 8 * n, torch.int64, owner)
        return images, labels

    def _print_decisions(self):
        """Prints the decisions made since the last look (the engine's driver
        thread made them; this only reads a queue)."""
        while True:
            line = self._lib.pipetune_loader_next_decision(self._handle)
            if not line:
                return
            decision = json.loads(line.decode())
            self.decisions.append(decision)
            sys.stderr.write("pipetune autotune: %s\n" % decision["line"])
            sys.stderr.flush()

    def autotuned_config(self):
        """autotune=True: the config with the knobs decided so far (after
        close(), the settled config), as a dict; None without autotune."""
        if not self._autotune:
            return None
        if self._handle is None:
            return self._settled
        return json.loads(self._lib.pipetune_loader_autotuned_config(self._handle).decode())

    def close(self):
        """Stops the engine's threads and frees the Loader (batches already
        handed out stay valid). With autotune, writes the settled config first."""
        if self._handle is None:
            return
        if self._autotune:
            self._finish_autotune()
        handle, self._handle = self._handle, None
        self._lib.pipetune_loader_destroy(handle)

    def _finish_autotune(self):
        written = ctypes.c_char_p()
        rc = self._lib.pipetune_loader_autotune_finish(self._handle, ctypes.byref(written))
        self._print_decisions()
        self._settled = json.loads(self._lib.pipetune_loader_autotuned_config(self._handle).decode())
        path = (written.value or b"").decode()
        self.autotuned_path = path or None
        if rc != _OK:
            # Training has ended well; a config that cannot be written must not fail it.
            sys.stderr.write("pipetune autotune: %s\n" % _last_error())
        elif path:
            sys.stderr.write("pipetune autotune: settled config: %s\n" % path)

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
