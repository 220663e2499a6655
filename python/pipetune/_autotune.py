"""Retuning a live job: `pipetune autotune -- python3 train.py` (docs/pytorch.md,
"autotune: retuning a live job"; workflow/autotune_job.h starts it).

The tuned DataLoader is the first one the program iterates, and any later
one over the same kind of dataset (a script that builds a new DataLoader
every epoch). Each of its new iterators is an epoch boundary. While
exploring, at each boundary:

1. the trace of the epochs run at the current settings (a segment: T, then
   T_STEM-retune-K.trace) is ended, persistent workers included, so that it
   describes one setting, which is what the model reads;
2. the pipetune binary's `tune` plans on it, under the job's budgets: the
   segment's measured rate, the plan's kwargs and its predicted rate;
3. the change the segment ran (if any) is judged: kept when it measured
   more than the best settings so far or within TOLERANCE of its
   prediction, else rolled back; settling always comes back to the best
   measured settings (as `tune --verify`'s PickBestRound);
4. the plan (refit on this segment) is tried on the next epoch when it
   differs from the best settings, was never run before, and is predicted
   to gain at least MIN_GAIN over the best measured rate; otherwise, or
   after MAX_CHANGES changes, the settings settle;
5. the next segment's session starts and the settings are set on the
   DataLoader before torch makes the iterator.

Once settled, no more segments or plans: a boundary only sets the settled
kwargs on a new DataLoader. The settled kwargs are written as `tune` writes
them, when they settle (and at exit if the job ended while exploring).

A job of several ranks (torch.distributed initialised) decides on rank 0:
every rank ends its segment, a barrier, rank 0 plans and judges, and the
outcome is broadcast through the job's own process group, so every rank
changes at the same epoch (each its own "ranks" entry, if the plan has one).

Never applied to an IterableDataset: a stream is one iterator that is never
restarted, so it has no boundary; autotune says so and profiles it. A
decision that fails (the analysis cannot run) keeps the current settings,
says why, and stops retuning; nothing here changes the job's exit status.
"""
import inspect
import json
import os
import subprocess
import sys

from pipetune import _apply, _session

AUTOTUNE_ENV = "PIPETUNE_AUTOTUNE"  # {"pipetune", "cores", "memory", "output", "segments"} (autotune_job.cc)
TOLERANCE = 0.10  # a change measured below (1 - TOLERANCE) x its prediction, and no better, is rolled back
MIN_GAIN = 0.05  # a plan predicted to gain less over the measured rate is not tried
MAX_CHANGES = 3
TUNE_TIMEOUT_S = 120

_tuner = None  # this process's _Tuner, made at the first iterator of a recorded DataLoader


def options():
    """The command's settings, or None when not under `pipetune autotune`."""
    text = os.environ.get(AUTOTUNE_ENV)
    if not text:
        return None
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) and value.get("pipetune") and value.get("segments") else None
    except ValueError:
        return None


def segment_trace(settings, trace, k):
    """The run's trace T for k = 0, else the K-th later setting's, named by
    the command (workflow::AutotuneSegmentPattern: T_STEM-retune-{k}.trace)."""
    return trace if k == 0 else settings["segments"].replace("{k}", str(k))


def knobs_of(loader):
    nw = loader.num_workers
    return {"num_workers": nw, "prefetch_factor": loader.prefetch_factor if nw > 0 else None,
            "persistent_workers": bool(loader.persistent_workers) and nw > 0, "pin_memory": bool(loader.pin_memory)}


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


def describe_change(old, new):
    parts = ["%s %s -> %s" % (k, old.get(k), new.get(k)) for k in _apply.TUNABLE if old.get(k) != new.get(k)]
    return ", ".join(parts) or "no change"


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
        self.script = knobs_of(loader)
        self.current = dict(self.script)  # the kwargs file's object now applied (tune's, with "ranks")
        self.ran = dict(self.script)  # this process's knobs that the current segment runs
        self.pending = None  # (the knobs it changed from, its prediction): the change the segment measures
        self.best = None  # (knobs, kwargs object, batches/s measured) of the best measured settings
        self.measured = {}  # _knobs_text(knobs) -> batches/s, of every setting run: none is tried twice
        self.changes = 0
        self.first_ns = _session.now()
        self.costs_ms = []
        self.written = False
        self.rank = 0

    # ---- rank 0 (or the only process): plan and judge

    def plan(self, trace):
        """`pipetune tune` on one segment: its kwargs, measured and predicted
        rates (batches/s); raises RuntimeError saying why it could not."""
        s = self.settings
        out = os.path.splitext(trace)[0] + ".dataloader.json"
        cmd = [s["pipetune"], "tune", trace, "--format", "json", "-o", out]
        if s.get("cores") is not None:
            cmd += ["--cores", repr(float(s["cores"]))]
        if s.get("memory"):
            cmd += ["--memory", s["memory"]]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIPETUNE_PYTHON") and k != AUTOTUNE_ENV}
        # A tune that hangs must not hang the job: TimeoutExpired is a failed decision.
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              timeout=TUNE_TIMEOUT_S)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(lines[-1] if lines else "pipetune tune exited %d" % done.returncode)
        plan = json.loads(done.stdout)
        with open(out) as f:
            kwargs = json.load(f)
        return kwargs, float(plan.get("measured_throughput") or 0), float(plan.get("predicted_throughput") or 0)

    def judge(self, trace, ran):
        """What the job does next, from the segment `trace` that ran at
        `ran` (rank 0's knobs): {"apply": a kwargs object or None (keep),
        "state", "lines", "settled": the kwargs to write once settled}."""
        try:
            kwargs, measured, predicted = self.plan(trace)
        except Exception as error:  # an unreadable trace, an analysis that cannot run
            line = "epoch %d: no decision (%s): the job goes on with %s" % (self.epoch, error, _knobs_text(ran))
            return {"apply": None, "state": "stopped", "lines": [line], "settled": self.current}
        lines = []
        kept = True
        self.measured[_knobs_text(ran)] = measured
        if self.pending is not None:  # the segment measured a change
            came_from, expected = self.pending
            self.pending = None
            kept = measured > self.best[2] or measured >= (1 - TOLERANCE) * expected
            lines.append("epoch %d: %s: predicted %.1f batches/s, measured %.1f (before: %.1f): %s" % (
                self.epoch - 1, describe_change(came_from, ran), expected, measured, self.best[2],
                "kept" if kept else "rolled back"))
        if self.best is None or measured > self.best[2]:
            self.best = (ran, self.current, measured)  # what settling comes back to, as PickBestRound
        # The model refit on this segment plans the next epoch, whether the
        # change was kept or not: the segment measured what it had to guess
        # before (the workers' start-up and CPU).
        new = dict(ran, **_apply.for_rank(*_apply.parse_kwargs(kwargs), 0))
        if new.get("num_workers", 0) == 0:
            new["prefetch_factor"], new["persistent_workers"] = None, False
        base, base_kwargs, best = self.best
        same = all(new.get(k) == base.get(k) for k in _apply.TUNABLE) and \
            kwargs.get("ranks") == base_kwargs.get("ranks")
        tried = _knobs_text(new) in self.measured and not same
        if same or tried or predicted < best * (1 + MIN_GAIN) or self.changes >= MAX_CHANGES:
            why = ("the model's plan is these settings" if same else
                   "the model's plan (%s) was measured at %.1f batches/s" % (
                       _knobs_text(new), self.measured.get(_knobs_text(new), 0)) if tried else
                   "%d changes tried" % self.changes if self.changes >= MAX_CHANGES else
                   "the plan (%s) predicts %.1f batches/s, under %.0f%% more" % (
                       describe_change(base, new), predicted, 100 * MIN_GAIN))
            if _knobs_text(base) == _knobs_text(ran):
                lines.append("epoch %d: settled at %s: %.1f batches/s measured (%s)" % (
                    self.epoch, _knobs_text(base), best, why))
                return {"apply": None, "state": "settled", "lines": lines, "settled": base_kwargs}
            lines.append("epoch %d: %s (back to the best measured, %.1f batches/s); settled (%s)" % (
                self.epoch, describe_change(ran, base), best, why))
            return {"apply": base_kwargs, "state": "settled", "lines": lines, "settled": base_kwargs}
        self.pending = (ran, predicted)
        self.changes += 1
        lines.append("epoch %d: %s: predicted %.1f batches/s (measured %.1f at %s)" % (
            self.epoch, describe_change(ran, new), predicted, best,
            "the current settings" if kept else "the best settings so far"))
        return {"apply": kwargs, "state": "exploring", "lines": lines, "settled": None}

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
        if outcome["apply"] is not None:
            self.current = outcome["apply"]
        self.apply(loader, rank)
        self.state = outcome["state"]
        cost_ms = (_session.now() - begin) / 1e6
        self.costs_ms.append(cost_ms)
        if rank == 0:
            for line in outcome["lines"]:
                _say(line + (" [decision %.0f ms]" % cost_ms if line is outcome["lines"][-1] else ""))
            if self.state != "exploring":
                self.settle(outcome["settled"] or self.current)

    def end_segment(self, loader):
        """Ends this process's trace of the current settings; its path."""
        if getattr(loader, "_iterator", None) is not None:
            loader._iterator._shutdown_workers()  # the segment's persistent workers end their traces
            object.__setattr__(loader, "_iterator", None)
        _session.state.stop()
        return segment_trace(self.settings, self.trace, self.segment)

    def decide(self, trace, ran):
        """judge()'s outcome: rank 0's, the same on every rank of a job."""
        dist = _distributed()
        if dist is None:
            return self.judge(trace, ran)
        dist.barrier()  # every rank's segment is complete before rank 0 reads it
        box = [self.judge(trace, ran) if self.rank == 0 else None]
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

    def settle(self, kwargs):
        seconds = (_session.now() - self.first_ns) / 1e9
        costs = sorted(self.costs_ms)
        _say("%s %.1f s after the first epoch began, after %d decisions of %.0f ms each (median; max %.0f ms)" % (
            "settled" if self.state == "settled" else "stopped retuning", seconds, len(costs),
            costs[len(costs) // 2], costs[-1]))
        self.write(kwargs)

    def write(self, kwargs):
        path = self.settings.get("output")
        if not path:
            return
        try:
            tmp = path + ".tmp.%d" % os.getpid()
            with open(tmp, "w") as f:
                json.dump(kwargs, f, indent=2)
                f.write("\n")
            os.replace(tmp, path)
            self.written = True
        except OSError as error:
            _say("cannot write %s: %s" % (path, error))


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
        else:
            import atexit

            atexit.register(_at_exit)
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


def _at_exit():
    t = _tuner
    if t is None or t.written or t.state != "exploring":
        return
    if t.rank != 0:
        return
    _say("the job ended while exploring (epoch %d); wrote the settings in use" % t.epoch)
    t.write(t.current)
