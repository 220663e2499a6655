"""Records torch.utils.data.DataLoader (and torchdata's StatefulDataLoader, a
subclass with its own iterators) without a change to the training script,
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

The parts, by topic: _session.py (this process's main trace and record),
_exit.py (how a process ends), _consumer.py (the main process: each
DataLoader, its epochs, batches and steps), _workers.py (the worker
processes), _samples.py (a sample's load, transforms and collate),
_apply.py (keyword arguments applied); this file installs them.
"""
import atexit
import os
import sys

from pipetune import _apply, _consumer, _fetch, _import_hook, _session, _workers


def _patch(module):
    """Instruments torch.utils.data.dataloader once it is imported."""
    if module.DataLoader.__dict__.get("_pipetune_patched", False):
        return
    module.DataLoader._pipetune_patched = True
    _consumer.patch_loader(module)
    _consumer.patch_iterators(module)
    _fetch.patch_base_iterator(module._BaseDataLoaderIter)
    _workers.patch_create_fetcher(module)
    module._utils.worker._worker_loop = _workers.make_worker_loop(module._utils.worker._worker_loop)
    _consumer.patch_unpickling()
    if os.environ.get(_session.TRACE_ENV) and os.environ.get(_session.ROOT_ENV) == str(os.getpid()):
        atexit.register(_session.stop_main)  # the root says so when no process built a DataLoader


def _patch_stateful(module):
    """Instruments torchdata's StatefulDataLoader once its module is
    imported: a DataLoader subclass with its own __init__ and __iter__, its
    own copies of the two iterator classes and its own worker loop, each
    given the hook torch's has. Everything else it shares with torch (the
    iterators' __next__, the fetchers, the pin thread, the unpickling of
    batches), instrumented by _patch, which runs first: this module imports
    torch's."""
    klass = module.StatefulDataLoader
    if klass.__dict__.get("_pipetune_patched", False):
        return
    _patch(sys.modules["torch.utils.data.dataloader"])
    klass._pipetune_patched = True
    _consumer.patch_loader_class(klass)
    _consumer.patch_single_iterator(module._StatefulSingleProcessDataLoaderIter)
    _consumer.patch_multi_iterator(module._StatefulMultiProcessingDataLoaderIter)
    # The iterator starts each worker with this module's _worker_loop (its
    # import of the worker module's): both names get the one wrapper, which
    # pickles as the worker module's.
    worker_loop = _workers.make_worker_loop(module._worker_loop)
    sys.modules[module._worker_loop.__module__]._worker_loop = worker_loop
    module._worker_loop = worker_loop


def install():
    """Called from sitecustomize at every Python start-up."""
    path = os.environ.pop("PIPETUNE_TRACE", None)
    if path:
        # The run's root: its children (ranks, DataLoader workers) read the
        # trace's path from here; none of them takes PIPETUNE_TRACE again
        # (a program that links the C++ tracer would start on T itself).
        os.environ[_session.TRACE_ENV] = os.path.abspath(path)
        os.environ[_session.ROOT_ENV] = str(os.getpid())
        # CUDA's injection (cupti/src/injection.cc) records this process's
        # GPU activity into T.gpu.<pid>, read with T.
        os.environ[_session.GPU_TRACE_ENV] = os.path.abspath(path) + ".gpu"
    # A job's plan may set some ranks apart ({"ranks": {"1": {...}}}),
    # applied where the rank is known when the DataLoader is built.
    _apply.read_environment()
    if not (os.environ.get(_session.TRACE_ENV) or _apply.active()):
        return
    _import_hook.patch_on_import("torch.utils.data.dataloader", _patch, "the DataLoader")
    _import_hook.patch_on_import("torchdata.stateful_dataloader.stateful_dataloader", _patch_stateful,
                                 "torchdata's StatefulDataLoader")
