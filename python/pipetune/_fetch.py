"""Concurrent fetches for a map-style dataset (docs/pytorch.md, "Fetch
threads"): each batch's indices are fetched with dataset[i] from K threads
of the process that fetches them (a DataLoader worker, or the main process
at num_workers=0), and handed to collate in the sampler's order, so the
batch is the one the DataLoader builds without them.

Why threads: a sample read from object storage waits tens of milliseconds
on the network and uses well under one of CPU; that wait releases the GIL,
so K threads keep K reads in flight in one process where the DataLoader's
only other lever is K processes, each with its own copy of the program.

In a DataLoader worker the threads are a pool the worker keeps (made at its
first batch, after fork or spawn) and they read ahead: every index list the
main process queues for the worker has its reads started as it arrives, so
the next batch is being read while this one is collated and pickled, and
reads stay in flight between batches. Only the index lists the worker was
given are read, each once; the worker loop still takes them in order and
calls __getitems__ for each, which hands over the samples already read. At
num_workers=0 no index list is known before it is asked for: the threads
then live for one batch. (docs/pytorch.md, "Reads ahead".)

Used two ways, one mechanism: `pipetune.concurrent_fetch(dataset, threads)`
in code, and `fetch_threads` in a kwargs file applied by `profile --apply`
or `autotune`, which wraps the dataset each DataLoader iterator fetches
from (the DataLoader's own `dataset` stays the program's object)."""
import collections
import os
import queue
import sys
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
        if not isinstance(indices, (list, tuple)):
            indices = list(indices)
        if self.threads == 1 or len(indices) <= 1:
            return [self.dataset[i] for i in indices]
        window = _worker_window(self)
        if window is not None:
            return window.take(self, indices)
        # The main process (num_workers=0): threads for this batch alone, ended before it returns or raises.
        pool = _Pool(min(self.threads, len(indices)))
        try:
            return pool.collect(pool.submit(self, indices))
        finally:
            pool.close()


def _is_iterable(dataset):
    try:
        from torch.utils.data import IterableDataset
    except ImportError:
        return False
    return isinstance(dataset, IterableDataset)


class _Batch:
    """One batch's reads: its samples by position, the first failure, and
    how many reads are still to end."""

    def __init__(self, fetch, indices):
        self.fetch = fetch  # the ConcurrentFetch whose dataset reads it
        self.indices = indices
        self.results = [None] * len(indices)
        self.failure = None  # (position, exception) of the earliest failed read
        self.left = len(indices)
        self.cancelled = False
        self.done = threading.Event()


class _Pool:
    """`threads` fetch threads taking (batch, position) reads in the order
    they were submitted: a batch's reads before the next batch's, so the
    batch asked for first is ready first, and a thread that has no read left
    in it moves on to the next batch rather than wait for the slowest."""

    def __init__(self, threads):
        self.lock = threading.Lock()
        self.work = threading.Condition(self.lock)
        self.tasks = collections.deque()
        self.closed = False
        self.ended = threading.Semaphore(0)  # released by each thread as its last act
        self.threads = [threading.Thread(target=self._run, name="pipetune-fetch-%d" % k, daemon=True)
                        for k in range(threads)]
        for thread in self.threads:
            thread.start()

    def submit(self, fetch, indices):
        batch = _Batch(fetch, indices)
        with self.lock:
            if self.closed:
                raise RuntimeError("pipetune: fetch threads already ended")
            self.tasks.extend((batch, position) for position in range(len(indices)))
            self.work.notify(len(indices))
        if not indices:
            batch.done.set()
        return batch

    def _take(self):
        """The next read to make, or None once the pool is closed. Reads of a
        batch that failed or was cancelled are counted off, not made: the
        first failure stops its batch's further reads, as a plain loop would."""
        with self.lock:
            while True:
                while not self.tasks and not self.closed:
                    self.work.wait()
                if self.closed:
                    return None
                batch, position = self.tasks.popleft()
                if batch.failure is None and not batch.cancelled:
                    return batch, position
                self._count_off(batch)

    def _count_off(self, batch):
        batch.left -= 1
        if batch.left == 0:
            batch.done.set()

    def _run(self):
        ends = {}  # the thread_done of each ConcurrentFetch this thread read for
        try:
            while True:
                task = self._take()
                if task is None:
                    return
                batch, position = task
                if batch.fetch.thread_done is not None:
                    ends[id(batch.fetch)] = batch.fetch.thread_done
                value = error = None
                try:
                    value = batch.fetch.dataset[batch.indices[position]]
                except BaseException as caught:  # raised in the batch's caller, by collect()
                    error = caught
                with self.lock:
                    if error is None:
                        batch.results[position] = value
                    elif batch.failure is None or position < batch.failure[0]:
                        batch.failure = (position, error)
                    self._count_off(batch)
                del value, error
        finally:
            try:
                # The recorder's per-thread handles are given back by the thread that took them.
                for done in ends.values():
                    done()
            finally:
                self.ended.release()

    def collect(self, batch):
        """The batch's samples in its indices' order, once every read of it
        has ended; its earliest failure raised, naming the index."""
        batch.done.wait()
        if batch.failure is not None:
            position, error = batch.failure
            batch.failure = None  # no reference cycle through the traceback
            _name_index(error, batch.indices[position])
            raise error
        if batch.cancelled:
            raise RuntimeError("pipetune: the fetch threads ended before dataset%r was read" % (batch.indices,))
        return batch.results

    def close(self):
        """No further reads start; those in flight end (a read cannot be
        interrupted from another thread) before it returns. Waited for on a
        semaphore, not with join(): a join that Ctrl-C interrupts leaves its
        thread listed by threading.enumerate() after it has ended (CPython's
        join state is not restored), which would look like a thread left
        behind. Once every thread has said it ended, the joins return at once."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            for batch, _ in self.tasks:
                batch.cancelled = True
                batch.done.set()
            self.tasks.clear()
            self.work.notify_all()
        for _ in self.threads:
            self.ended.acquire()
        for thread in self.threads:
            thread.join()


_window = None  # (pid, _Window): this worker process's fetch threads


def _worker_window(fetch):
    """The calling DataLoader worker's _Window (made on its first batch);
    None in the main process."""
    global _window
    if _window is not None and _window[0] == os.getpid():
        return _window[1]
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        return None
    if get_worker_info() is None:
        return None
    window = _Window(fetch, _loop_queue())
    _window = (os.getpid(), window)
    return window


def _loop_queue():
    """The index queue of the worker loop that called us (torch's
    _worker_loop, or StatefulDataLoader's copy, keep it as `index_queue`):
    found on the stack, as torch hands it to nothing else. None if not
    found: the worker then keeps its threads but reads no batch ahead."""
    frame = sys._getframe(1)
    for _ in range(16):
        if frame is None:
            return None
        if frame.f_code.co_name == "_worker_loop":
            found = frame.f_locals.get("index_queue")
            if found is not None and callable(getattr(type(found), "get", None)):
                return found
        frame = frame.f_back
    return None


class _Window:
    """A worker's fetch threads and the batches they read ahead.

    The worker loop takes its work from its index queue one item at a time.
    A feeder thread takes the items from that queue instead, as the main
    process puts them (at most prefetch_factor batches outstanding per
    worker), starts the reads of each index list, and hands the items to the
    loop, in order, through the queue's `get`, which is replaced on that
    one object. The loop then calls __getitems__ for each list, which waits
    for the samples already being read. Only lists the main process sent
    are read, each once; the final signal (None: the loader ended or broke
    off) cancels the reads not yet started and ends the threads before the
    loop sees it, so none is left when the worker exits."""

    def __init__(self, fetch, index_queue):
        self.pool = _Pool(fetch.threads)
        self.fetch = fetch  # the ConcurrentFetch last asked: reads ahead use its dataset
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.held = collections.deque()  # the loop's items, in the order they came
        self.ahead = collections.deque()  # batches started, not yet asked for
        self.broken = None  # what the index queue raised in the feeder
        # Batches the loop found already being read, and those it had to
        # start itself (worker_reads(): the tests tell from these that reading
        # ahead still starts under this torch's worker loop).
        self.taken_ahead = self.read_on_demand = 0
        if index_queue is not None:
            self.source = type(index_queue).get.__get__(index_queue)
            index_queue.get = self.get
            threading.Thread(target=self._feed, name="pipetune-fetch-feeder", daemon=True).start()

    def _feed(self):
        main = threading.main_thread()
        while True:
            try:
                item = self.source(timeout=1.0)
            except queue.Empty:
                if not main.is_alive():
                    return
                continue
            except BaseException as error:  # the queue broke (the main process gone): the loop raises it, not waits
                self.pool.close()
                with self.lock:
                    self.broken = error
                    self.arrived.notify()
                return
            if item is None:
                self.pool.close()
            elif _index_list(item) is not None:
                batch = self.pool.submit(self.fetch, _index_list(item))
                with self.lock:
                    self.ahead.append(batch)
            with self.lock:
                self.held.append(item)
                self.arrived.notify()
            if item is None:
                return

    def get(self, block=True, timeout=None):
        """The index queue's get, as the worker loop calls it."""
        with self.lock:
            if not self.arrived.wait_for(lambda: self.held or self.broken, timeout if block else 0):
                raise queue.Empty
            if not self.held:
                raise self.broken
            return self.held.popleft()

    def take(self, fetch, indices):
        """The samples of `indices`: the batch read ahead for them (the loop
        asks in the order the lists came), else read now."""
        self.fetch = fetch
        batch = None
        with self.lock:
            # Not found: the list the loop held when the window was made (taken from the queue before the
            # feeder was), read now.
            match = next((k for k, b in enumerate(self.ahead)
                          if b.indices is indices or list(b.indices) == list(indices)), None)
            if match is not None:
                for _ in range(match):  # lists the loop skipped (it was ending): their reads not yet started dropped
                    self.ahead.popleft().cancelled = True
                batch = self.ahead.popleft()
        if batch is None:
            self.read_on_demand += 1
            batch = self.pool.submit(fetch, indices)
        else:
            self.taken_ahead += 1
        return self.pool.collect(batch)


def worker_reads():
    """In a DataLoader worker with fetch threads: (batches whose reads had
    started before the worker loop asked for them, batches read when asked).
    Only the first batch, which the loop held before the threads existed, is
    read when asked; a worker loop whose index queue was not found
    (_loop_queue) reads every batch so. (0, 0) in any other process."""
    if _window is None or _window[0] != os.getpid():
        return 0, 0
    return _window[1].taken_ahead, _window[1].read_on_demand


def _index_list(item):
    """The index list a worker loop's item asks for: torch's items are
    (task, indices), StatefulDataLoader's (task, (indices, snapshot)). None
    for its other items (the final signal, a new epoch, a start-up ack)."""
    if not (isinstance(item, tuple) and len(item) == 2):
        return None
    index = item[1]
    if isinstance(index, tuple) and len(index) == 2 and isinstance(index[1], bool) \
            and isinstance(index[0], (list, tuple)):
        index = index[0]
    return index if isinstance(index, (list, tuple)) else None


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
