"""Applying DataLoader keyword arguments (`profile --apply FILE`, the
environment's PIPETUNE_DATALOADER_APPLY, and autotune's plans) and knowing
which rank this process is, since a job's file may set ranks apart:
{"ranks": {"1": {...}}} over the file's own keys (docs/pytorch.md)."""
import os
import sys

from pipetune._recorder import read_applied

APPLY_ENV = "PIPETUNE_DATALOADER_APPLY"  # a JSON file of DataLoader keyword arguments
TUNABLE = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "fetch_threads")
# Not a DataLoader argument: the threads each fetching process reads a
# batch's samples with (_fetch.py), set on the DataLoader after its __init__.
FETCH_THREADS = "fetch_threads"

applied = None  # the kwargs read from APPLY_ENV
applied_ranks = {}  # rank -> the kwargs that differ for it ("ranks" in the file)


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def distributed_fields():
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


def parse_kwargs(loaded):
    """(kwargs, by_rank) of a kwargs file's JSON: `tune`'s file, or
    {"dataloader_kwargs": {...}}. Raises ValueError when it is not an object."""
    kwargs = loaded.get("dataloader_kwargs", loaded) if isinstance(loaded, dict) else None
    if not isinstance(kwargs, dict):
        raise ValueError("expected a JSON object of DataLoader keyword arguments")
    ranks = kwargs.get("ranks") or {}
    by_rank = {int(r): {k: v for k, v in entry.items() if k in TUNABLE}
               for r, entry in ranks.items() if isinstance(entry, dict)}
    return {k: v for k, v in kwargs.items() if k in TUNABLE}, by_rank


def for_rank(kwargs, by_rank, rank):
    """The kwargs with `rank`'s own entries over them."""
    merged = dict(kwargs or {})
    if by_rank:
        merged.update(by_rank.get(rank, {}))
    return merged


def read_environment():
    """Reads APPLY_ENV's file, if set (_recorder.read_applied)."""
    global applied, applied_ranks
    parsed = read_applied(APPLY_ENV, parse_kwargs)
    if parsed is not None:
        applied, applied_ranks = parsed


def kwargs_for_this_rank():
    """The file's kwargs, with this process's rank's own entries over them."""
    return for_rank(applied, applied_ranks, distributed_fields()["rank"])


def active():
    return bool(applied or applied_ranks)


def apply_kwargs(signature, args, kwargs):
    """DataLoader.__init__'s arguments with the file's kwargs over them,
    whether passed by keyword, by position or left at the default."""
    bound = signature.bind(*args, **kwargs)
    for key, value in kwargs_for_this_rank().items():
        if key in TUNABLE and key != FETCH_THREADS:
            bound.arguments[key] = value
    a = bound.arguments
    if a.get("num_workers", 0) == 0:
        a.pop("prefetch_factor", None)  # torch refuses them without workers
        a.pop("persistent_workers", None)
    elif a.get("prefetch_factor") is None:
        a.pop("prefetch_factor", None)
    return bound.args, bound.kwargs


def set_fetch_threads(loader, threads):
    """The threads each of the loader's fetching processes reads a batch
    with (1: the DataLoader's own one-by-one fetch); its iterators apply
    them (_fetch.patch_base_iterator)."""
    object.__setattr__(loader, "_pipetune_fetch_threads", max(1, int(threads or 1)))


def apply_fetch_threads(loader):
    """The file's fetch_threads for this rank, on a DataLoader just built."""
    threads = kwargs_for_this_rank().get(FETCH_THREADS)
    if threads is not None:
        set_fetch_threads(loader, threads)
