"""Concurrent fetches for a map-style dataset (docs/pytorch.md, "Fetch
threads"): each batch's indices are fetched with dataset[i] from K threads
of the process that fetches them (a DataLoader worker, or the main process
at num_workers=0), and handed to collate in the sampler's order, so the
batch is the one the DataLoader builds without them.

Why threads: a sample read from object storage waits tens of milliseconds
on the network and uses well under one of CPU; that wait releases the GIL,
so K threads keep K reads in flight in one process where the DataLoader's
only other lever is K processes, each with its own copy of the program.

The threads live for one batch: they are started by __getitems__ and
joined before it returns or raises, so nothing outlives a `break`, a
Ctrl-C or a failed read. Starting K threads costs well under a millisecond
per batch, against K reads of tens of milliseconds each.

Used two ways, one mechanism: `pipetune.concurrent_fetch(dataset, threads)`
in code, and `fetch_threads` in a kwargs file applied by `profile --apply`
or `autotune`, which wraps the dataset each DataLoader iterator fetches
from (the DataLoader's own `dataset` stays the program's object)."""
import threading

FETCH_THREADS_KEY = "fetch_threads"  # the kwargs file's key


class ConcurrentFetch:
    """Stands for a map-style dataset: __getitems__ fetches a batch's
    indices from `threads` threads; everything else is the dataset's."""

    def __init__(self, dataset, threads, thread_done=None):
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError("fetch threads: expected an integer >= 1, got %r" % (threads,))
        if not callable(getattr(dataset, "__getitem__", None)) or _is_iterable(dataset):
            raise TypeError("concurrent fetches need a map-style dataset (dataset[i]); %s is not one: an "
                            "IterableDataset's stream is read in order by one thread (docs/pytorch.md)"
                            % type(dataset).__name__)
        self.dataset = dataset
        self.threads = threads
        # Called on each fetch thread as it ends: the recorder's per-thread
        # handles must be given back by the thread that took them.
        self.thread_done = thread_done

    def with_dataset(self, dataset, thread_done=None):
        """The same fetching over another dataset (the recorder's stand-in)."""
        return ConcurrentFetch(dataset, self.threads, thread_done)

    def __getitem__(self, index):
        return self.dataset[index]

    def __len__(self):
        return len(self.dataset)

    def __getattr__(self, name):
        if name in ("dataset", "threads", "thread_done"):  # not set yet: unpickling
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __getitems__(self, indices):
        indices = list(indices)
        if self.threads == 1 or len(indices) <= 1:
            return [self.dataset[i] for i in indices]
        return _fetch_all(self.dataset, indices, min(self.threads, len(indices)), self.thread_done)


def _is_iterable(dataset):
    try:
        from torch.utils.data import IterableDataset
    except ImportError:
        return False
    return isinstance(dataset, IterableDataset)


def _fetch_all(dataset, indices, threads, thread_done):
    """dataset[i] for each index, from `threads` threads, in the indices'
    order. The first failure stops the threads taking further indices and
    is raised here, once every thread has ended, with the index it failed
    on; a KeyboardInterrupt while waiting does the same."""
    results = [None] * len(indices)
    failure = []  # (position, exception): the first one
    lock = threading.Lock()
    next_position = [0]
    ended = threading.Semaphore(0)  # released by each thread as its last act

    def take():
        with lock:
            if failure or next_position[0] >= len(indices):
                return None
            position = next_position[0]
            next_position[0] += 1
            return position

    def run():
        try:
            while True:
                position = take()
                if position is None:
                    return
                try:
                    results[position] = dataset[indices[position]]
                except BaseException as error:  # raised in the caller's thread, below
                    with lock:
                        failure.append((position, error))
                    return
        finally:
            try:
                if thread_done is not None:
                    thread_done()
            finally:
                ended.release()

    workers = [threading.Thread(target=run, name="pipetune-fetch-%d" % k, daemon=True) for k in range(threads)]
    for worker in workers:
        worker.start()
    # Waited for on a semaphore, not with join(): a join that Ctrl-C
    # interrupts leaves its thread listed by threading.enumerate() after it
    # has ended (CPython's join state is not restored), which would look like
    # a thread left behind. Once every thread has said it ended, the joins
    # return at once.
    waiting = len(workers)
    try:
        while waiting:
            ended.acquire()
            waiting -= 1
    except BaseException:
        # Ctrl-C while waiting: no further reads start; those in flight end
        # (a read cannot be interrupted from another thread) before it goes on.
        with lock:
            next_position[0] = len(indices)
        while waiting:
            ended.acquire()
            waiting -= 1
        raise
    finally:
        if not waiting:
            for worker in workers:
                worker.join()
    if failure:
        position, error = min(failure, key=lambda f: f[0])
        _name_index(error, indices[position])
        raise error
    return results


def _name_index(error, index):
    """Says on the exception which sample failed: the DataLoader's message
    carries the traceback text, notes included, to the training loop."""
    note = "pipetune: while fetching dataset[%r] in a fetch thread" % (index,)
    if hasattr(error, "add_note"):
        error.add_note(note)
    elif error.args and isinstance(error.args[0], str):
        error.args = ("%s (%s)" % (error.args[0], note),) + error.args[1:]


def concurrent_fetch(dataset, threads):
    """A map-style dataset whose batches are fetched from `threads` threads:
    `DataLoader(pipetune.concurrent_fetch(dataset, 8), ...)`. Samples, order
    and batches are the DataLoader's; only the reads overlap."""
    return ConcurrentFetch(dataset, threads)


def unwrapped(dataset):
    """The program's dataset under a ConcurrentFetch, and its thread count (1: none)."""
    if isinstance(dataset, ConcurrentFetch):
        return dataset.dataset, dataset.threads
    return dataset, 1


def threads_of(loader):
    """The fetch threads the loader's iterators read with: a kwargs file's
    (or autotune's) over the program's own wrapper; 1 for a stream."""
    dataset, threads = unwrapped(loader.dataset)
    if _is_iterable(dataset):
        return 1
    return getattr(loader, "_pipetune_fetch_threads", threads)


_said_iterable = []


def patch_base_iterator(base):
    """Every DataLoader iterator (torch's _BaseDataLoaderIter.__init__ keeps
    the dataset its fetchers read as self._dataset): where the loader was
    given fetch threads by a kwargs file, that dataset is fetched with
    them (over the program's own wrapper, if it has one). An
    IterableDataset keeps its one reader, said once."""
    init = base.__init__
    if getattr(init, "_pipetune_fetch", False):
        return

    def __init__(self, loader, *args, **kwargs):
        init(self, loader, *args, **kwargs)
        threads = getattr(loader, "_pipetune_fetch_threads", None)
        dataset, current = unwrapped(self._dataset)
        if threads is not None and threads != current:  # the file's setting wins, as its num_workers does
            if _is_iterable(dataset):
                if not _said_iterable:
                    _said_iterable.append(True)
                    from pipetune._recorder import warn

                    warn("fetch_threads not applied: an IterableDataset's stream is read by one thread per "
                         "worker (docs/pytorch.md)")
                return
            self._dataset = ConcurrentFetch(dataset, threads) if threads > 1 else dataset

    __init__._pipetune_fetch = True
    base.__init__ = __init__
