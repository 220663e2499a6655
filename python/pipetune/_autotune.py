"""Retuning a live job: `pipetune autotune -- python3 train.py` (docs/pytorch.md,
"autotune: retuning a live job"; workflow/autotune_job.h starts it).

The tuned DataLoader is the first one the program iterates, and any later
one over the same kind of dataset (a script that builds a new DataLoader
every epoch). Each of its new iterators is an epoch boundary. While
exploring, at each boundary:

1. the trace of the epochs run at the current settings (a segment: T, then
   T_STEM-retune-K.trace) is ended, persistent workers included, so that it
   describes one setting, which is what the model reads;
2. the `pipetune autotune` process that runs the job is asked what to run
   next (one JSON line each way over the Unix socket it names): it plans on
   the segment and applies the retuning rules that every driver shares
   (workflow/retune_loop.h: a change must beat the noise of the windows'
   own spread, a cap on tries, settle on the best measured setting). This
   side holds no rule: it reports the segment and applies the answer;
3. the next segment's session starts and the settings answered are set on
   the DataLoader before torch makes the iterator.

Once settled, no more segments or questions: a boundary only sets the
settled kwargs on a new DataLoader. The settled kwargs are written by the
decider (as `tune` writes them).

A job of several ranks (torch.distributed initialised) decides on rank 0:
every rank ends its segment, a barrier, rank 0 asks, and the answer is
broadcast through the job's own process group, so every rank changes at
the same epoch (each its own "ranks" entry, if the answer has one).

Never applied to an IterableDataset: a stream is one iterator that is never
restarted, so it has no boundary; autotune says so and profiles it. A
decision that fails (the decider cannot plan on the segment, or cannot be
reached or answers nothing within DECISION_TIMEOUT_S) keeps the current
settings, says why, and stops retuning; nothing here changes the job's exit
status.
"""
import inspect
import json
import os
import socket
import sys

from pipetune import _apply, _fetch, _session

AUTOTUNE_ENV = "PIPETUNE_AUTOTUNE"  # {"decider": a socket's path, "segments"} (autotune_job.cc)
# How long rank 0 waits for an answer: a decision is a plan on one epoch's
# trace (milliseconds); a decider that takes longer is stuck, and the job
# must not wait on it.
DECISION_TIMEOUT_S = 120

_tuner = None  # this process's _Tuner, made at the first iterator of a recorded DataLoader


def options():
    """The command's settings, or None when not under `pipetune autotune`."""
    text = os.environ.get(AUTOTUNE_ENV)
    if not text:
        return None
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) and value.get("decider") and value.get("segments") else None
    except ValueError:
        return None


def segment_trace(settings, trace, k):
    """The run's trace T for k = 0, else the K-th later setting's, named by
    the command (workflow::AutotuneSegmentPattern: T_STEM-retune-{k}.trace)."""
    return trace if k == 0 else settings["segments"].replace("{k}", str(k))


def knobs_of(loader):
    nw = loader.num_workers
    return {"num_workers": nw, "prefetch_factor": loader.prefetch_factor if nw > 0 else None,
            "persistent_workers": bool(loader.persistent_workers) and nw > 0, "pin_memory": bool(loader.pin_memory),
            "fetch_threads": _fetch.threads_of(loader)}


def _no_worker_prefetch(loader):
    # What torch's own __init__ leaves in prefetch_factor without workers:
    # 2 on 1.13, None on 2.x (its default).
    parameter = inspect.signature(type(loader).__init__).parameters.get("prefetch_factor")
    return None if parameter is None else parameter.default


def set_knobs(loader, knobs):
    """Sets the kwargs on a DataLoader between iterators, as its __init__
    would have: its persistent workers (of the old settings) are ended first."""
    old = getattr(loader, "_iterator", None)
    if old is not None:
        old._shutdown_workers()
        object.__setattr__(loader, "_iterator", None)
    nw = int(knobs["num_workers"])
    prefetch = knobs.get("prefetch_factor") if nw > 0 else _no_worker_prefetch(loader)
    if nw > 0 and prefetch is None:
        prefetch = 2
    # DataLoader.__setattr__ refuses persistent_workers after __init__.
    object.__setattr__(loader, "num_workers", nw)
    object.__setattr__(loader, "prefetch_factor", prefetch)
    object.__setattr__(loader, "persistent_workers", bool(knobs.get("persistent_workers")) and nw > 0)
    object.__setattr__(loader, "pin_memory", bool(knobs.get("pin_memory")))
    if knobs.get("fetch_threads") is not None:
        _apply.set_fetch_threads(loader, knobs["fetch_threads"])


def _knobs_text(knobs):
    return ", ".join("%s=%s" % (k, knobs.get(k)) for k in _apply.TUNABLE)


def _dataset_kind(loader):
    try:
        length = len(loader.dataset)
    except TypeError:
        length = None
    return type(loader.dataset).__name__, length, loader.batch_size


def _say(message):
    sys.stderr.write("pipetune autotune: %s\n" % message)
    sys.stderr.flush()


class _Tuner:
    def __init__(self, settings, loader):
        self.settings = settings
        self.kind = _dataset_kind(loader)
        self.trace = os.environ.get(_session.TRACE_ENV)
        self.segment = 0
        self.epoch = 0  # of the tuned DataLoader(s): iterators made
        self.state = "exploring"  # then "settled", "stopped" (a decision failed) or "declined" (a stream)
        self.current = knobs_of(loader)  # the kwargs object now applied (the decider's, with "ranks")
        self.ran = dict(self.current)  # this process's knobs that the current segment runs
        self.first_ns = _session.now()
        self.costs_ms = []
        self.rank = 0

    # ---- rank 0 (or the only process): ask the decider

    def ask(self, trace, ran):
        """The decider's answer for the segment `trace` that ran at `ran`:
        {"apply": a kwargs object or None (keep), "state", "lines"}. Never
        raises: a decider that cannot be reached or answers nothing usable
        is a stopped answer saying why."""
        request = {"segment": trace, "epoch": self.epoch, "knobs": ran}
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(DECISION_TIMEOUT_S)
                s.connect(self.settings["decider"])
                s.sendall((json.dumps(request) + "\n").encode())
                answer = b""
                while not answer.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            outcome = json.loads(answer.decode())
            if not isinstance(outcome, dict) or outcome.get("state") not in ("exploring", "settled", "stopped"):
                raise ValueError("an answer that is no decision: %r" % answer[:200])
            return outcome
        except (OSError, ValueError) as error:
            line = "epoch %d: no decision (the decider at %s: %s): the job goes on with %s" % (
                self.epoch, self.settings["decider"], error, _knobs_text(ran))
            return {"apply": None, "state": "stopped", "lines": [line]}

    # ---- every rank

    def boundary(self, loader):
        """An epoch boundary of the tuned DataLoader while exploring: end
        the segment, decide (on rank 0), start the next segment, apply."""
        begin = _session.now()
        ran = self.ran  # not the loader's: a new DataLoader each epoch has the script's own
        trace = self.end_segment(loader)
        outcome = self.decide(trace, ran)
        rank = self.rank
        self.segment += 1
        _session.start_segment(segment_trace(self.settings, self.trace, self.segment))
        if outcome.get("apply") is not None:
            self.current = outcome["apply"]
        self.apply(loader, rank)
        self.state = outcome["state"]
        cost_ms = (_session.now() - begin) / 1e6
        self.costs_ms.append(cost_ms)
        if rank == 0:
            lines = outcome.get("lines") or []
            for line in lines:
                _say(line + (" [decision %.0f ms]" % cost_ms if line is lines[-1] else ""))
            if self.state != "exploring":
                self.settled()

    def end_segment(self, loader):
        """Ends this process's trace of the current settings; its path."""
        if getattr(loader, "_iterator", None) is not None:
            loader._iterator._shutdown_workers()  # the segment's persistent workers end their traces
            object.__setattr__(loader, "_iterator", None)
        _session.end_recording(_session.state)
        return segment_trace(self.settings, self.trace, self.segment)

    def decide(self, trace, ran):
        """The decider's answer to rank 0, the same on every rank of a job."""
        dist = _distributed()
        if dist is None:
            return self.ask(trace, ran)
        dist.barrier()  # every rank's segment is complete before rank 0's is read
        box = [self.ask(trace, ran) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def apply(self, loader, rank):
        """Sets this rank's kwargs of self.current on the loader, when it
        does not have them (a new DataLoader each epoch has the script's)."""
        own = dict(self.ran, **_apply.for_rank(*_apply.parse_kwargs(self.current), rank))
        if own.get("num_workers", 0) == 0:
            own["prefetch_factor"], own["persistent_workers"] = None, False
        if own != knobs_of(loader):
            set_knobs(loader, own)
        self.ran = knobs_of(loader)

    def settled(self):
        seconds = (_session.now() - self.first_ns) / 1e9
        costs = sorted(self.costs_ms)
        _say("%s %.1f s after the first epoch began, after %d decisions of %.0f ms each (median; max %.0f ms)" % (
            "settled" if self.state == "settled" else "stopped retuning", seconds, len(costs),
            costs[len(costs) // 2], costs[-1]))


def _distributed():
    """torch.distributed when this process is one of several ranks."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return dist
    except Exception:
        pass
    return None


def _is_iterable(dataset):
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


def at_iterator(loader, record, settings_of):
    """Called by the recorder before torch makes a recorded DataLoader's
    iterator, under autotune. `record` is the loader's _Loader;
    settings_of(loader) its settings as the record holds them. Never raises:
    a failure keeps the settings in use, says so and stops retuning."""
    try:
        _at_iterator(loader, record, settings_of)
    except Exception as error:
        _say("no decision (%r): the job goes on with %s; retuning stopped" % (error, _knobs_text(knobs_of(loader))))
        if _tuner is not None:
            _tuner.state = "stopped"
        rec = _session.state
        if rec is not None and not rec.running and _tuner is not None:
            try:  # the job's later epochs are still recorded
                _session.start_segment(segment_trace(_tuner.settings, _tuner.trace, _tuner.segment + 1))
            except Exception:
                pass


def _at_iterator(loader, record, settings_of):
    global _tuner
    if _tuner is None:
        settings = options()
        if settings is None:
            return
        _tuner = _Tuner(settings, loader)
        if _is_iterable(loader.dataset):
            _tuner.state = "declined"
            _say("loader%d reads an IterableDataset (a stream): live retuning needs epoch boundaries, and a "
                 "stream's iterator is never restarted; profiled as `pipetune profile` does (then: pipetune "
                 "tune %s)" % (record.id, _tuner.trace))
    t = _tuner
    if t.state == "declined" or _dataset_kind(loader) != t.kind:
        return
    dist = _distributed()
    t.rank = dist.get_rank() if dist is not None else 0
    t.epoch += 1
    if t.epoch > 1 and t.state == "exploring":
        t.boundary(loader)
    elif t.state != "exploring":
        t.apply(loader, t.rank)  # a new DataLoader of a settled job
    rec = _session.recording()
    if rec is None:
        return
    for entry in rec.info[_session.KEY]["loaders"]:
        if entry["id"] == record.id and entry["settings"] != settings_of(loader):
            entry["settings"] = settings_of(loader)  # the record describes the settings this segment runs
            rec.update_info()
