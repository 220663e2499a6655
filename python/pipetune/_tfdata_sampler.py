"""Samples TensorFlow's autotune model of each iterator the training loop
drives and writes every op's counts into the trace (docs/tfdata.md).

One thread, every PIPETUNE_TRACE_INTERVAL_MS: for each live iterator,
tf.data.experimental.get_model_proto(iterator) (about 0.5 ms of CPU on a
loaded host; the whole sample about 1 ms, recorded as sampler_cpu_ms), the nodes
matched to the user's ops (_tfdata_ops.py), and each op's counts since the
last sample added to its stage through the tracer's C API, as the engine's
stages count theirs. The model forgets a node once its input is exhausted
and an iterator's model goes with it, so the sample is taken while the
iterator runs and once more when a `for` loop's iterator ends.

What is recorded per op (figures are TensorFlow's own, but the last two):
- elements produced (num_elements), and consumed: the elements its input
  node produced;
- bytes produced (bytes_produced); bytes consumed in the header's record;
- CPU and wall time: processing_time is the time the op's kernels ran,
  without its input's, summed over its parallel calls. TensorFlow measures
  no CPU per op and not the waits for a core between kernels: share_cpu
  shares the process's CPU out over the ops and stretches each op's CPU by
  the interval's waits for a core (_runqueue.py, docs/tfdata.md);
- parallelism (the node's "parallelism" parameter) and a prefetch's buffer
  ("buffer_size"), as TensorFlow's autotune set them; buffered elements and
  bytes as its buffer occupancy.
The consumer is the training step: TensorFlow records the time between one
GetNext of the iterator and the next (gap_times), which is the step, whether
a Python loop or Keras' compiled train function calls GetNext; the rest of
each step's wall time is its wait for the pipeline. Each epoch's start (a
new iterator per epoch) is the consumer's epoch_start_ms."""
import os
import sys
import threading
import time
import weakref

from pipetune import _exit, _session, _tfdata_ops as ops_mod
from pipetune._recorder import Recorder, interval_ms, warn
from pipetune._runqueue import RunQueue

KEY = "tfdata"
RECORD_VERSION = 1
now = time.monotonic_ns

sampler = None


class _Stage:
    """One user op's stage in the trace and its counts not yet written."""

    def __init__(self, index, op, name):
        self.index, self.op, self.name = index, op, name
        self.sid = None
        self.worker = None
        self.parallelism = 1
        self.buffer = None
        # elements, consumed, bytes, TensorFlow's time not yet shared out,
        # cpu ns, wall ns (share_cpu turns the fourth into the last two)
        self.pending = [0, 0, 0, 0, 0, 0]
        self.total = {"elements": 0, "consumed": 0, "bytes_in": 0, "bytes_out": 0, "work_ns": 0}
        self.nodes = set()
        self.fused_with = None
        self.removed = True


class _Iterator:
    def __init__(self, iterator, ops):
        self.ref = weakref.ref(iterator)
        self.ops = ops
        self.last = {}  # (node id, role) -> (elements, consumed, bytes out, bytes in, work ns)
        self.root_elements = 0
        self.last_ns = now()
        # At the first sample that saw outputs: (ns, outputs, the last
        # epoch's end ns, ns spent making iterators since it ended)
        self.first_sample = None


class Sampler:
    def __init__(self, tf_version, plan):
        self.tf_version = tf_version
        self.plan = plan
        self.lock = threading.Lock()
        self.iterators = []
        self.signature = None
        self.stages = []
        self.op_stages = []
        self.recorder = None
        self.runqueue = None
        self.stretches = []  # each interval's stretch, for the header's record
        self.epoch_starts_ns = []  # each epoch's start (epoch_start), in the order the epochs ran
        self.epoch_making_ns = []  # of it, making the epoch's iterators
        self.ended_ns = None  # when the last epoch ended (patch_iterators); None: an epoch is running
        self.making_ns = 0  # making iterators since then
        self.sampler_cpu_ns = 0
        self.other_pipelines = []
        self.built = []  # call sites of pipelines built, for a script that never iterates
        self.steps = 0
        self.epochs = 0  # iterators of the recorded pipeline that delivered an element
        self.step_ns = 0  # the consumer's steps since the last flush
        self.step_total_ns = 0
        self.cpu_ns = self.start_cpu_ns = self.process_cpu_ns()  # start_cpu_ns: again when recording starts
        self.thread = None
        self.stopped = False

    # -- the record in the trace's header -------------------------------
    def config(self):
        stages = []
        notes = []
        for s in self.stages:
            knobs = {"parallelism": s.parallelism, "buffer": s.buffer}
            stages.append(ops_mod.stage_config(s.op, s.name, knobs))
            if s.op.get("added_by_tensorflow"):
                notes.append("%s: added by TensorFlow (inject_prefetch), not in the script" % s.name)
                continue
            removed = self.steps > 0 and s.removed and not s.op.get("untagged")
            notes.extend(ops_mod.notes_for(s.op, sorted(s.nodes), s.fused_with, removed))
        if not self.stages:
            if self.built:
                notes.append("the script built a tf.data pipeline (%s) but no Python iterator of it ran: "
                             "it never iterated the dataset, or its loop is compiled into a tf.function, "
                             "where TensorFlow gives pipetune no iterator to sample" % ", ".join(self.built[:3]))
            else:
                notes.append("the script built no tf.data pipeline from its own code")
        if self.stages and self.epochs > 0:
            # The script's loop: each epoch a new iterator over the same
            # dataset, whose cache() outlives the iterator. To the model that
            # is a repeat at the end, so a cache is priced over the epochs.
            stages.append({"name": "epochs (the script's loop)", "op": "repeat",
                           "args": {"count": self.epochs}, "tfdata_epochs": True})
        for other in self.other_pipelines[:3]:
            notes.append("another pipeline's iterator (%s) was not recorded: one pipeline per trace" % other)
        ops = [dict({k: v for k, v in s.op.items() if k not in ("key",)}, stage=s.name, call_site=s.op["key"],
                    nodes=sorted(s.nodes), fused_into=s.fused_with[1] if s.fused_with else None,
                    parallelism=s.parallelism, buffer=s.buffer, **s.total) for s in self.stages]
        return {"name": os.path.basename(sys.argv[0] or "python"),
                "stages": stages or [{"name": "source", "op": "range", "args": {}}],
                "consumer": self.consumer_config(),
                "recording_notes": notes,
                KEY: {"version": RECORD_VERSION, "tensorflow": self.tf_version, "argv": sys.argv[:8],
                      "ops": ops, "steps": self.steps,
                      # The ops' times were stretched by this (mean over the
                      # samples) for their waits for a core (_runqueue.py).
                      "core_wait_stretch": round(sum(self.stretches) / len(self.stretches), 3)
                      if self.stretches else 1.0,
                      # What sampling cost: the sampler thread's CPU against
                      # the process's since recording began (the 3%,
                      # free of the host's noise).
                      "sampler_cpu_ms": round(self.sampler_cpu_ns / 1e6, 3),
                      "process_cpu_ms": round((self.process_cpu_ns() - self.start_cpu_ns) / 1e6, 3),
                      "applied": os.environ.get("PIPETUNE_TFDATA_APPLY") or None}}

    def consumer_config(self):
        """The training step as measured (TensorFlow's gap between
        GetNexts): the model's demand, as a config's step_time_ms is. And
        where the loop made a new iterator per epoch, what going from one
        to the next took (epoch_start): each epoch waits for it before the
        pipeline delivers, so the model prices it per epoch. The first
        epoch's holds the functions' tracing and falls in the warm-up the
        window skips: the later ones are the cost."""
        consumer = {}
        if self.steps:
            consumer["step_time_ms"] = self.step_total_ns / self.steps / 1e6
        later = self.epoch_starts_ns[1:]
        if later:
            consumer["epoch_start_ms"] = sum(later) / len(later) / 1e6
            # The part paid whatever the knobs: the model scales the rest
            # (teardown, fill) with the stages that run each epoch.
            making = self.epoch_making_ns[1:]
            consumer["epoch_iterator_ms"] = min(sum(making), sum(later)) / len(later) / 1e6
        return consumer

    def ensure_recorder(self):
        if self.recorder is None:
            path = os.environ.get(_session.TRACE_ENV)
            if not path:
                return None
            self.recorder = Recorder(_session.claim(path), self.config()["name"], self.config(),
                                     spans_per_second=0)
            self.runqueue = RunQueue()
            self.start_cpu_ns = self.process_cpu_ns()
            _exit.watch(lambda **_: None, self.stop)
        return self.recorder

    # -- iterators -------------------------------------------------------
    def add_iterator(self, iterator, dataset):
        ops = ops_mod.user_ops(dataset)
        if not any(not o.get("untagged") for o in ops):
            return  # a dataset the script did not build (Keras' own, a peek)
        signature = tuple(o["key"] for o in ops)
        with self.lock:
            if self.signature is None:
                self.signature = signature
                self.stages = [_Stage(i, o, "") for i, o in enumerate(ops)]
                # The user's ops by their index in the chain; self.stages also
                # holds the ops TensorFlow added, in pipeline order.
                self.op_stages = list(self.stages)
                names = set()
                for s in self.stages:
                    name = ops_mod.describe(s.op)
                    base, n = name, 2
                    while name in names:
                        name, n = "%s #%d" % (base, n), n + 1
                    names.add(name)
                    s.name = name
            elif signature != self.signature:
                where = ops_mod.describe(ops[-1])
                if where not in self.other_pipelines:
                    self.other_pipelines.append(where)
                return
            self.iterators.append(_Iterator(iterator, ops))
        if self.ensure_recorder() is not None and self.thread is None:
            self.thread = threading.Thread(target=self.run, name="pipetune-tfdata", daemon=True)
            self.thread.start()

    def run(self):
        period = interval_ms() / 1000.0
        while not self.stopped:
            time.sleep(period)
            self.sample()
            self.sampler_cpu_ns = time.thread_time_ns()  # this thread's CPU so far: the recorder's cost

    def sample(self, only=None):
        import tensorflow as tf

        with self.lock:
            live = []
            for entry in self.iterators:
                it = entry.ref()
                if it is None:
                    continue
                live.append(entry)
                if only is not None and it is not only:
                    continue
                try:
                    proto = tf.data.experimental.get_model_proto(it)
                except Exception:  # an iterator being torn down: its counts so far stay
                    continue
                self.read(entry, proto)
            self.iterators = live
            self.flush()

    def stage_for_added(self, index, node):
        """A node TensorFlow added after op `index` (its injected prefetch):
        a stage of its own, once."""
        key = ("added", node.name, index)
        for s in self.stages:
            if s.op.get("added_key") == key:
                return s
        after = self.op_stages[index].op if index is not None else {"file": "", "line": 0, "key": "end"}
        op = {"key": after["key"], "file": after.get("file", ""), "line": after.get("line", 0),
              "method": "prefetch" if node.name == "Prefetch" else node.name, "op": "prefetch",
              "fn": "", "args": {}, "added_by_tensorflow": True, "added_key": key}
        stage = _Stage(len(self.stages), op, "%s %s (added by TensorFlow)" % (
            ("%s:%d" % (op["file"], op["line"])) if op["file"] else "end", node.name))
        pos = self.stages.index(self.op_stages[index]) + 1 if index is not None else len(self.stages)
        while pos < len(self.stages) and self.stages[pos].op.get("added_by_tensorflow"):
            pos += 1
        self.stages.insert(pos, stage)
        return stage

    def read(self, entry, proto):
        chain, relay = ops_mod.model_chain(proto)
        matched = ops_mod.match(entry.ops, chain)
        by_id = {n.id: n for n, _ in chain}
        for index, node, role in matched:
            if role == "added":
                if node.name != "Prefetch":
                    if index is None:
                        continue
                    stage = self.op_stages[index]  # TF's own node: its time is the op's it follows
                    role = "part"
                else:
                    stage = self.stage_for_added(index, node)
                    role = "own"
            else:
                stage = self.op_stages[index]
            stage.nodes.add(node.name)
            stage.removed = False
            elements = node.num_elements
            consumed = self.consumed(proto, node, relay, stage.op)
            join = node.name in ops_mod.JOIN_NODES
            work = node.processing_time + (0 if join else ops_mod.subtree_ns(proto, node))
            bytes_out, bytes_in = node.bytes_produced, node.bytes_consumed
            if role == "fused":  # the second op of a fused node: counts, no time of its own
                work = 0
                first = self.op_stages[index - 1]
                stage.fused_with = (first.op["method"], "%s:%d" % (first.op["file"], first.op["line"]),
                                    node.name)
            elif len(ops_mod.node_kinds(node.name) or ()) == 2 and role == "own":
                # The first op of a fused node: its elements are the inputs the
                # node consumed, and their bytes the node's output (a batch is
                # its elements side by side), so a cache after it is sized.
                elements = consumed
            elif role == "part":
                elements = consumed = bytes_out = bytes_in = 0
            self.add(entry, stage, (node.id, role), (elements, consumed, bytes_out, bytes_in, work))
            p = ops_mod.parameter(node, "parallelism")
            if p is not None and role != "fused":
                stage.parallelism = max(1, int(round(p.value)))
                if stage.sid is not None:
                    self.recorder.tracer.set_parallelism(stage.sid, stage.parallelism)
            b = ops_mod.parameter(node, "buffer_size")
            if b is not None:
                stage.buffer = max(1, int(round(b.value)))
            if stage.sid is not None and role == "own":
                self.recorder.tracer.set_buffer_occupancy(stage.sid, node.buffered_elements, node.buffered_bytes)
        self.consumer(entry, proto, by_id)

    @staticmethod
    def consumed(proto, node, relay, op):
        """What the node took from the node before it in the one chain
        (model_chain): its input's elements; for a join, its last input's
        (a concatenate's last input is 0 until it begins); for the node that
        begins a join's input i >= 1, the last node of input i - 1's. Each
        stage's elements over its predecessor's is then the model's local
        ratio, and its visit ratio its elements per output: 1 for every
        input of a zip, an input's share of a concatenate's outputs."""
        if node.id in relay:
            before = proto.nodes.get(relay[node.id])
            return before.num_elements if before is not None else 0
        if node.name in ops_mod.JOIN_NODES:
            last = op.get("branches", len(node.inputs)) - 1
            before = proto.nodes.get(node.inputs[last]) if 0 <= last < len(node.inputs) else None
            return before.num_elements if before is not None else 0
        before = proto.nodes.get(node.inputs[0]) if node.inputs else None
        return before.num_elements if before is not None else node.num_elements

    def add(self, entry, stage, key, now_counts):
        before = entry.last.get(key, (0, 0, 0, 0, 0))
        delta = [max(0, a - b) for a, b in zip(now_counts, before)]
        entry.last[key] = now_counts
        stage.pending[0] += delta[0]
        stage.pending[1] += delta[1]
        stage.pending[2] += delta[2]
        stage.pending[3] += delta[4]
        stage.total["elements"] += delta[0]
        stage.total["consumed"] += delta[1]
        stage.total["bytes_out"] += delta[2]
        stage.total["bytes_in"] += delta[3]
        stage.total["work_ns"] += delta[4]

    def consumer(self, entry, proto, by_id):
        root = proto.nodes.get(proto.output)
        if root is None:
            return
        steps = root.num_elements - entry.root_elements
        t = now()
        elapsed = t - entry.last_ns
        entry.last_ns = t
        if steps <= 0:
            return
        if entry.root_elements == 0:
            self.epochs += 1
            entry.first_sample = (t, steps, self.ended_ns, self.making_ns)
            self.ended_ns, self.making_ns = None, 0
        elif entry.first_sample is not None:
            self.epoch_start(entry, t, root.num_elements)
        entry.root_elements = root.num_elements
        gaps = list(proto.gap_times)[-steps:]
        mean_gap = (sum(gaps) / len(gaps)) if gaps else 0
        gaps = [mean_gap] * (steps - len(gaps)) + gaps
        step_ns = [int(g * 1000) for g in gaps]
        wait_each = max(0, elapsed - sum(step_ns)) // steps
        tracer = self.recorder.tracer
        self.step_ns += sum(step_ns)
        self.step_total_ns += sum(step_ns)
        for k, step in enumerate(step_ns):
            end = t - (steps - 1 - k) * (elapsed // steps)
            tracer.consumer_step(wait_each, step, end)
        self.steps += steps

    def epoch_start(self, entry, t, outputs):
        """What the epoch that `entry` runs cost before its first output,
        measured at its second sample that saw outputs: from the end of
        the last epoch (patch_iterators: its last step done) to this
        epoch's first output, less one output's time at this epoch's pace
        and plus the last epoch's last step (a steady pipeline hands an
        output on as the step before it ends). It holds the old
        iterator's teardown, the new one's making (TensorFlow optimizing
        and instantiating the graph), what the loop does between epochs
        (Keras' callbacks and its making of an iterator it drops), and
        the pipeline's fill for its first output: all that the model adds
        to each epoch (consumer.epoch_start_ms), of which the iterators'
        making (consumer.epoch_iterator_ms) is paid whatever the knobs and
        the rest scales with the stages that run. The first output came
        (outputs - 0.5) spacings before the first sample that saw them."""
        t1, n1, ended_ns, making_ns = entry.first_sample
        entry.first_sample = None
        if ended_ns is None or outputs <= n1 or t <= t1:
            return
        spacing = (t - t1) / (outputs - n1)
        first_ns = t1 - (n1 - 0.5) * spacing
        step = self.step_total_ns / self.steps if self.steps else 0
        self.epoch_starts_ns.append(max(0, first_ns - ended_ns + step - spacing))
        self.epoch_making_ns.append(making_ns)

    # -- writing ---------------------------------------------------------
    def register_all(self):
        tracer = self.recorder.tracer
        for s in self.stages:
            if s.sid is None:
                op = ops_mod.stage_config(s.op, s.name, {})["op"]
                s.sid = tracer.register_stage(s.name.encode(), op.encode(), s.parallelism)
                s.worker = tracer.attach_worker(s.sid)
        self.recorder.info = self.config()
        self.recorder.update_info()

    @staticmethod
    def process_cpu_ns():
        t = os.times()
        return int((t.user + t.system) * 1e9)

    def share_cpu(self):
        """TensorFlow measures its kernels' time per op, not CPU, and not
        the waits for a core between kernels (_runqueue.py). The process's
        CPU since the last sample is shared out over every op's kernel time
        and the consumer's steps (less their waits) in proportion, never
        more than the time itself. An op's wall time is its CPU stretched
        by the interval's waits for a core (never less than its kernels'
        time, which holds the waits of a kernel preempted while it ran), as
        an engine stage's clock runs while its thread waits: with it the
        model's concurrency bound sees what two parallel calls deliver on a
        host whose cores other programs share."""
        cpu = self.process_cpu_ns()
        spent, self.cpu_ns = cpu - self.cpu_ns, cpu
        stretch = self.runqueue.stretch() if self.runqueue is not None else 1.0
        self.stretches.append(stretch)
        # gap_times is the step's wall time: its waits are in it already.
        running = sum(s.pending[3] for s in self.stages) + self.step_ns / stretch
        self.step_ns = 0
        share = min(1.0, spent / running) if running > 0 else 1.0
        for s in self.stages:
            cpu_ns = s.pending[3] * share
            s.pending[4] += int(cpu_ns)
            s.pending[5] += int(max(s.pending[3], cpu_ns * stretch))
            s.pending[3] = 0

    def flush(self):
        if self.recorder is None or not self.recorder.running:
            return
        if any(s.sid is None for s in self.stages):
            self.register_all()
        self.share_cpu()
        tracer = self.recorder.tracer
        t = now()
        for s in self.stages:
            elements, consumed, nbytes, _, cpu, work = s.pending
            if elements < 1:
                continue  # the work waits for an element to count it against
            tracer.element(s.worker, t - work, t, s.total["elements"], cpu, nbytes)
            if elements > 1:
                tracer.produced(s.worker, elements - 1, 0)
            if consumed > 1:
                tracer.consumed(s.worker, consumed - 1)
            s.pending = [0, 0, 0, 0, 0, 0]

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)  # its workers' counters have one writer at a time
        try:
            if self.recorder is None and self.built and os.environ.get(_session.TRACE_ENV):
                self.ensure_recorder()  # a trace that says why nothing was sampled
            if self.recorder is not None:
                self.sample()
                self.recorder.info = self.config()
                self.recorder.update_info()
                self.recorder.stop()
            if self.runqueue is not None:
                self.runqueue.close()
        except Exception as error:
            warn("cannot end the tf.data trace: %r" % (error,))


def patch_iterators(iterator_ops, tf_version, plan):
    """Hands every OwnedIterator to the sampler, and samples a `for` loop's
    iterator once more when it ends."""
    global sampler
    if sampler is None:
        sampler = Sampler(tf_version, plan)
    cls = iterator_ops.OwnedIterator
    if getattr(cls, "_pipetune_patched", False):
        return
    cls._pipetune_patched = True
    original_init = cls.__init__
    original_next = cls.__next__
    autotune_off = _plan_turns_autotune_off(plan)

    def init(self, dataset=None, *args, **kwargs):
        # The last epoch ended when its iterator ran dry (next_) or, where
        # none runs dry in Python (model.fit takes a known number of
        # batches), when the loop makes its first iterator after it: the
        # epoch's start is measured from there to its first output
        # (Sampler.epoch_start).
        if sampler.ended_ns is None:
            sampler.ended_ns = now()
        if sampler.recorder is not None:
            # Keras' model.fit (3.x) takes a known number of batches from
            # each iterator and makes the next epoch's at once, never
            # running one dry: the old iterator's last batches (up to an
            # interval's worth, 2 to 11 of 32 per epoch at 50 ms) would go
            # with it unsampled, and the measured rate with them.
            sampler.sample()
        if autotune_off and dataset is not None:
            dataset = _without_autotune(dataset)
        made = now()
        original_init(self, dataset, *args, **kwargs)
        sampler.making_ns += now() - made
        if dataset is not None and os.environ.get(_session.TRACE_ENV):
            try:
                sampler.add_iterator(self, dataset)
            except Exception as error:  # never break the user's loop
                warn("cannot record a tf.data iterator: %r" % (error,))

    def next_(self):
        try:
            return original_next(self)
        except StopIteration:
            if sampler.recorder is not None:
                sampler.sample(only=self)
            sampler.ended_ns = now()
            raise

    cls.__init__ = init
    cls.__next__ = next_


def _plan_turns_autotune_off(plan):
    """Whether the applied plan turns TensorFlow's autotuner off (it sets
    every knob: workflow/include/pipetune/workflow/tfdata.h, TfDataPlan).
    Not while a trace is recorded: the sampler reads the autotuner's model,
    which TensorFlow builds only with it on; said once on stderr."""
    options = ((plan or {}).get("tfdata_plan") or {}).get("options") or {}
    if options.get("autotune", True) is not False:
        return False
    if os.environ.get(_session.TRACE_ENV):
        warn("the plan turns TensorFlow's autotuner off (it sets every knob); kept on while a trace is "
             "recorded, as the sampler reads its model: this run pays its cost (`pipetune profile --apply "
             "PLAN --no-trace` runs the plan as its code change would)")
        return False
    return True


def _without_autotune(dataset):
    """The dataset an iterator is made from, with the autotuner off."""
    try:
        import tensorflow as tf

        options = tf.data.Options()
        options.autotune.enabled = False
        return dataset.with_options(options)
    except Exception as error:  # never break the user's loop: the plan's knobs still hold
        warn("cannot turn TensorFlow's autotuner off as the plan says: %r" % (error,))
        return dataset


def note_built(where):
    """A pipeline was built at `where` (file:line of its last op)."""
    if sampler is not None and where not in sampler.built:
        sampler.built.append(where)
        if len(sampler.built) == 1 and os.environ.get(_session.TRACE_ENV):
            _exit.watch(lambda **_: None, sampler.stop)

