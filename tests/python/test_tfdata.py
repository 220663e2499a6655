"""tf.data under `pipetune profile`, unchanged scripts (docs/tfdata.md):
examples/tfdata/train_tf.py (a custom loop) and train_tf_fit.py (Keras'
model.fit), each written as first versions are: maps sequential, no
prefetch, no cache. Checks what a user reads: a row per op named by its
line, the bottleneck by its line, the prediction against the measured rate,
what TensorFlow fused; the plan keyed by call site and its code change; the
plan applied with no code change, every epoch delivering every file exactly
once; a bad plan refused; tracing's cost.
Usage: test_tfdata.py CASE PIPETUNE. Exit 77 when this Python has no
tensorflow (Debian's python3; `scripts/setup.sh --torch2` installs it)."""
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from _common import fail, run

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "tfdata")
LOOP = os.path.join(EXAMPLES, "train_tf.py")
FIT = os.path.join(EXAMPLES, "train_tf_fit.py")
FILES = 1024  # 32 batches of 32 per epoch: enough for a steady window past each epoch's start
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PIPETUNE_TRACE_INTERVAL_MS="50")
TOLERANCE = 1.75  # predicted over measured, either way (check_report says why)


def images():
    """The JPEG files every case reads, made once per machine (same seed,
    same bytes) and moved into place whole."""
    folder = os.path.join(tempfile.gettempdir(), "pipetune-tfdata-images-%d" % FILES)
    if os.path.isdir(folder):
        return folder
    scratch = tempfile.mkdtemp(prefix="pipetune-tfdata-")
    r = run([sys.executable, os.path.join(EXAMPLES, "make_images.py"), scratch, str(FILES), "120", "160"], env=ENV)
    if r.returncode != 0:
        fail("make_images.py failed", r)
    try:
        os.rename(scratch, folder)
    except OSError:  # another case made it first
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def profile(pipetune, trace, script, *args, apply=None):
    cmd = [pipetune, "profile", "--trace", trace]
    if apply:
        cmd += ["--apply", apply]
    r = run(cmd + ["--", sys.executable, script] + list(args), env=ENV)
    if r.returncode != 0:
        fail("pipetune profile %s failed (%d)" % (os.path.basename(script), r.returncode), r)
    return r


def loop_line(result):
    """The script's JSON line (`pipetune profile` prints the trace's name
    after it)."""
    return json.loads([l for l in result.stdout.splitlines() if l.startswith("{")][-1])


def rate_of(result):
    """The script's own batches per second."""
    return loop_line(result)["batches_per_second"]


def cpu_per_batch(result):
    """The process's CPU seconds a batch over the loop."""
    line = loop_line(result)
    return line["cpu_seconds"] / line["batches"]


def report(pipetune, trace):
    r = run([pipetune, "report", trace, "--format", "json"])
    if r.returncode != 0:
        fail("pipetune report failed", r)
    return json.loads(r.stdout), r


def check_report(pipetune, trace, script_name):
    """A row per op named by its line, the bottleneck the decoding map by
    its line, the prediction near the measured rate, and what TensorFlow
    fused said."""
    rep, r = report(pipetune, trace)
    names = [s["name"] for s in rep["stages"]]
    for op in ("list_files", "map(process_path)", "map(augment)", "batch(32)"):
        if not any(script_name in n and op in n for n in names):
            fail("no row for %s of %s: rows %s" % (op, script_name, names), r)
    bottleneck = rep["bottleneck"]["stage"] if isinstance(rep["bottleneck"], dict) else rep["bottleneck"]
    if "map(process_path)" not in str(bottleneck) or script_name + ":" not in str(bottleneck):
        fail("the bottleneck is %r, not the decoding map named by its line" % (bottleneck,), r)
    text = run([pipetune, "report", trace]).stdout
    if "fused" not in text:
        fail("the report does not say what TensorFlow fused", r)
    ratio = rep["predicted_throughput"] / rep["throughput"]
    # The issue's target is 10%. Pricing the ops' waits for a core and each
    # epoch's start (the old iterator's teardown, the new one's making, the
    # fill to its first output) and running 16 epochs took the prediction
    # from 1.6x-4x the measured rate to 0.93x-1.05x near idle (12 strict
    # runs at load 1.3-2.2; docs/tfdata.md, "How far to trust the
    # prediction"); a host whose load moves within a run moves it more: 10%
    # is judged with PIPETUNE_TFDATA_STRICT=1. The band every run must
    # hold, 1.75x each way, fails on the old gap as it was measured under
    # load (2.7x-4x); 1.5x was tried and a fresh-clone CI run measured 1.52x
    # (model.fit, load 2).
    band = 1.1 if os.environ.get("PIPETUNE_TFDATA_STRICT") == "1" else TOLERANCE
    if not 1 / band <= ratio <= band:
        fail("predicted %.1f against measured %.1f outputs/s (%.2fx), not within %.2fx (load average %.1f on "
             "%d cores)" % (rep["predicted_throughput"], rep["throughput"], ratio, band, os.getloadavg()[0],
                            os.cpu_count()), r)
    print("predicted %.1f, measured %.1f outputs/s: %.2fx" % (rep["predicted_throughput"], rep["throughput"], ratio))
    return rep


# Epochs of the profiled runs: 4 epochs of 32 batches ran about 1.1 s on
# an idle host, and the window after the warm-up (1 s) was a few hundred ms
# of a run: its measured rate moved 0.83x to 1.52x of the prediction from
# run to run (how many epoch starts it held, counts quantised over a short
# window). 16 epochs give a window of about 3.5 s, over a dozen epochs.
PROFILE_EPOCHS = "16"


def case_profile_loop(pipetune, tmp):
    trace = os.path.join(tmp, "loop.ptrace")
    profile(pipetune, trace, LOOP, images(), PROFILE_EPOCHS)
    check_report(pipetune, trace, "train_tf.py")


def case_profile_fit(pipetune, tmp):
    trace = os.path.join(tmp, "fit.ptrace")
    profile(pipetune, trace, FIT, images(), PROFILE_EPOCHS)
    rep = check_report(pipetune, trace, "train_tf_fit.py")
    # model.fit takes a known number of batches from each iterator and
    # never runs one dry: every batch of every epoch is still counted.
    if rep["window"]["seconds"] > 0 and steps_recorded(trace) != 32 * int(PROFILE_EPOCHS):
        fail("model.fit's run recorded %d steps of %d: the last batches of an epoch went unsampled"
             % (steps_recorded(trace), 32 * int(PROFILE_EPOCHS)))


def steps_recorded(trace):
    """The consumer's steps the recorder counted (the trace header's tf.data
    record, the last copy written)."""
    with open(trace, "rb") as f:
        found = re.findall(rb'"steps": ([0-9]+)', f.read())
    return int(found[-1]) if found else 0


def tune(pipetune, trace, *flags):
    plan_path = trace + ".plan.json"
    r = run([pipetune, "tune", trace, "-o", plan_path] + list(flags))
    if r.returncode != 0:
        fail("pipetune tune failed", r)
    with open(plan_path) as f:
        return plan_path, json.load(f)["tfdata_plan"], r


def case_tune_apply(pipetune, tmp):
    """Decoded images fit 1 GiB: the plan caches after the decoding map
    (before the random flip), sets its num_parallel_calls, prints the line
    to write; applied, every epoch delivers every file exactly once."""
    trace = os.path.join(tmp, "loop.ptrace")
    profile(pipetune, trace, LOOP, images(), "2")
    plan_path, plan, r = tune(pipetune, trace, "--memory", "1GiB")
    site = [k for k in plan["sites"] if k.endswith(" map") and "train_tf.py:" in k]
    decode = [k for k in site if plan["sites"][k].get("cache_after") == "memory"]
    # On a loaded host the step itself can be stretched below what the
    # pipeline delivers uncached; a cache then gains nothing and the plan
    # rightly places none, saying the uncached plan meets the step's demand.
    step_binds = any(line.strip().startswith("no cache:") and "demand bound" in line
                     for line in r.stdout.splitlines())
    if not decode and not step_binds:
        fail("the plan places no memory cache after the decoding map: %s" % plan["sites"], r)
    if decode and not any("ds.map(process_path, num_parallel_calls=" in line and ".cache()" in line
                          for line in plan["code_change"]):
        fail("the code change does not say ds.map(process_path, num_parallel_calls=N).cache()", r)
    if not decode:
        print("no cache: the training step binds the uncached plan on this host (load average %.1f)" %
              os.getloadavg()[0])
    if "train_tf.py:" not in r.stdout or "code change" not in r.stdout:
        fail("tune does not print the code change line by line", r)
    if "a cache on disk" in r.stdout:
        fail("the memory cache fits, yet the plan points at a disk cache", r)
    seen_path = os.path.join(tmp, "seen.json")
    applied = profile(pipetune, os.path.join(tmp, "applied.ptrace"), LOOP, images(), "3", seen_path, apply=plan_path)
    check_every_epoch(seen_path, applied)


def check_every_epoch(seen_path, result):
    """Every epoch delivered every file exactly once."""
    with open(seen_path) as f:
        epochs = json.load(f)
    files = sorted(os.path.join(images(), n) for n in os.listdir(images()))
    for e, paths in enumerate(epochs):
        if sorted(paths) != files:
            fail("epoch %d delivered %d files, %d distinct, of %d" % (e, len(paths), len(set(paths)), len(files)),
                 result)


def case_tune_no_memory(pipetune, tmp):
    """The decoded images (108 MiB) do not fit 64 MiB: no memory cache, and
    without --cache-dir the plan's hint of a disk cache; with --cache-dir, a
    cache on disk there (cache(filename)), which applied still
    delivers every file once per epoch."""
    trace = os.path.join(tmp, "loop.ptrace")
    profile(pipetune, trace, LOOP, images(), "2")
    # Without --cache-dir: no cache; the plan says what one on disk would
    # reach where that beats it by kDiskCacheHintGain (1.2), which on an idle
    # host it does (x1.34: the decoding map is most of the work) and on a
    # loaded one need not (the training step, stretched by the load, bounds
    # both at x1.14). Both plans price the same trace, so the hint must be
    # there exactly when the --cache-dir plan beats the other by 1.2x, with
    # its figure (tests/tuner/solver_test.cc holds it on fixed figures).
    hint_path, _, hint_run = tune(pipetune, trace, "--memory", "64MiB")
    with open(hint_path) as f:
        document = json.load(f)
    hint, without = document.get("disk_cache_hint", "absent"), document["predicted_throughput"]
    if hint == "absent":
        fail("the plan's JSON has no disk_cache_hint field", hint_run)
    cache_dir = os.path.join(tmp, "cache")
    plan_path, plan, r = tune(pipetune, trace, "--memory", "64MiB", "--cache-dir", cache_dir)
    with open(plan_path) as f:
        with_dir = json.load(f)["predicted_throughput"]
    caches = [s["cache_after"] for s in plan["sites"].values() if "cache_after" in s]
    if "memory" in caches:
        fail("the plan caches in memory what does not fit 64 MiB: %s" % plan["sites"], r)
    if not caches or not all(c.startswith(cache_dir + os.sep) for c in caches):
        fail("the plan places no cache on disk in --cache-dir: %s" % plan["sites"], r)
    print("memory short: %.1f/s without --cache-dir, %.1f/s with it; hint %s" % (without, with_dir, hint))
    if with_dir >= 1.2 * without * 1.01:
        if (not hint or "map(process_path)" not in hint["after"]
                or abs(hint["predicted_throughput"] / with_dir - 1) > 0.01):
            fail("a disk cache reaches %.1f/s against %.1f/s, but the plan's hint does not say so: %s"
                 % (with_dir, without, hint), hint_run)
        if "a cache on disk after" not in hint_run.stdout or "--cache-dir" not in hint_run.stdout:
            fail("the plan's text does not say what a disk cache would reach", hint_run)
    elif with_dir < 1.2 * without * 0.99 and hint:
        fail("the plan hints at a disk cache that gains less than 1.2x: %s" % hint, hint_run)
    seen_path = os.path.join(tmp, "seen.json")
    applied = profile(pipetune, os.path.join(tmp, "applied.ptrace"), LOOP, images(), "3", seen_path, apply=plan_path)
    check_every_epoch(seen_path, applied)
    if not any(n.endswith(".index") for n in os.listdir(cache_dir)):
        fail("the disk cache wrote nothing in %s" % cache_dir, applied)
    check_autotune_off(pipetune, tmp, hint_path, hint_run, applied)


def check_autotune_off(pipetune, tmp, plan_path, tune_run, traced_run):
    """The plan sets every knob, so it turns TensorFlow's autotuner off:
    in the file, in the code change, and in the program under `--apply
    --no-trace` (TensorFlow then builds no autotune model of the iterator),
    which records nothing and still delivers every file once per epoch. A
    traced run keeps the autotuner on (the sampler reads its model) and
    says so."""
    with open(plan_path) as f:
        plan = json.load(f)["tfdata_plan"]
    if plan.get("options") != {"autotune": False}:
        fail("the plan sets every knob but does not turn the autotuner off: %s" % plan.get("options"), tune_run)
    if not any("options.autotune.enabled = False" in line and "with_options(options)" in line
               for line in plan["code_change"]):
        fail("the code change does not say to turn the autotuner off", tune_run)
    if "kept on while a trace is recorded" not in traced_run.stderr:
        fail("a traced run under the plan does not say the autotuner was kept on for the sampler", traced_run)
    probe = os.path.join(tmp, "probe_autotune.py")
    with open(probe, "w") as f:
        f.write("""import os, runpy, sys
import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops
script = %r
cls, model, calls = iterator_ops.OwnedIterator, [], [0]
original_next = cls.__next__
def next_(self):
    element = original_next(self)
    calls[0] += 1
    if calls[0] == 3:  # the pipeline is running: TensorFlow's autotune model, if it has one
        try:
            tf.data.experimental.get_model_proto(self)
            model.append(True)
        except tf.errors.NotFoundError:
            model.append(False)
    return element
cls.__next__ = next_
sys.path.insert(0, os.path.dirname(script))
sys.argv = [script] + sys.argv[1:]
runpy.run_path(script, run_name="__main__")
print("autotune model: %%s" %% model)
""" % LOOP)
    seen_path = os.path.join(tmp, "seen_untraced.json")
    trace = os.path.join(tmp, "untraced.ptrace")
    r = run([pipetune, "profile", "--trace", trace, "--apply", plan_path, "--no-trace", "--", sys.executable, probe,
             images(), "2", seen_path], env=ENV)
    if r.returncode != 0:
        fail("pipetune profile --apply --no-trace failed (%d)" % r.returncode, r)
    if "autotune model: [False]" not in r.stdout:
        fail("under --apply --no-trace TensorFlow still built its autotune model (the autotuner is on)", r)
    if os.path.exists(trace):
        fail("--no-trace wrote a trace", r)
    check_every_epoch(seen_path, r)
    r = run([pipetune, "profile", "--no-trace", "--", sys.executable, "-c", "pass"], env=ENV)
    if r.returncode != 2 or "--apply" not in r.stderr:
        fail("--no-trace without --apply is not refused with exit 2 naming --apply", r)


ZIP = os.path.join(EXAMPLES, "train_tf_zip.py")
CONCAT = os.path.join(EXAMPLES, "train_tf_concat.py")


def check_join(pipetune, tmp, script, rows, slow, share_rows):
    """A script with a zip or concatenate, written as first versions are:
    a row per op of both inputs by its line; the bottleneck the slow map,
    which is in the SECOND input (a sampler that followed the first alone
    would not see it); the prediction near the measured rate; `share_rows`
    (each input's map) priced for its share of the outputs: their visit
    ratios add up to the join's. Then the plan, which sets the second
    input's map by its call site, applied: every epoch delivers every file
    exactly once."""
    name = os.path.basename(script)
    trace = os.path.join(tmp, "join.ptrace")
    # Eight epochs: the window then holds several whole epochs, each input's
    # share of them, past the warm-up it skips (runs of four epochs failed
    # now and then beside other tests; which check failed was not kept).
    profile(pipetune, trace, script, images(), "8")
    rep, r = report(pipetune, trace)
    names = [s["name"] for s in rep["stages"]]
    for row in rows:
        if not any(n.startswith(name + ":") and n.endswith(row) for n in names):
            fail("no row for %s of %s: rows %s" % (row, name, names), r)
    if sum(n.endswith(" from_tensor_slices") for n in names) != 2:
        fail("not a row for each input's source: rows %s" % names, r)
    bottleneck = rep["bottleneck"]["stage"] if isinstance(rep["bottleneck"], dict) else rep["bottleneck"]
    if slow not in str(bottleneck) or name + ":" not in str(bottleneck):
        fail("the bottleneck is %r, not %s (the second input's map) named by its line" % (bottleneck, slow), r)
    ratio = rep["predicted_throughput"] / rep["throughput"]
    band = 1.1 if os.environ.get("PIPETUNE_TFDATA_STRICT") == "1" else TOLERANCE
    if not 1 / band <= ratio <= band:
        fail("predicted %.1f against measured %.1f outputs/s (%.2fx), not within %.2fx"
             % (rep["predicted_throughput"], rep["throughput"], ratio, band), r)
    visits = {s["name"].split(" ", 1)[1]: s["visit_ratio"] for s in rep["stages"] if " " in s["name"]}
    joined = sum(visits[row] for row in share_rows)
    join_row = [v for k, v in visits.items() if k in ("zip", "concatenate")][0]
    print("predicted %.1f, measured %.1f outputs/s: %.2fx; visit ratios %s" % (
        rep["predicted_throughput"], rep["throughput"], ratio, visits))
    plan_path, plan, r = tune(pipetune, trace, "--memory", "1GiB")
    slow_line = [s["name"] for s in rep["stages"] if s["name"].endswith(slow)][0].split(" ")[0].split(":")[1]
    if not any(k.endswith(":%s map" % slow_line) and "num_parallel_calls" in v for k, v in plan["sites"].items()):
        fail("the plan does not set the second input's map (line %s): %s" % (slow_line, plan["sites"]), r)
    seen_path = os.path.join(tmp, "seen.json")
    applied = profile(pipetune, os.path.join(tmp, "applied.ptrace"), script, images(), "3", seen_path,
                      apply=plan_path)
    check_every_epoch(seen_path, applied)
    return joined, join_row


def case_zip(pipetune, tmp):
    """Images zipped with labels from a second pipeline: each input's map
    runs once per output (visit ratio the join's)."""
    joined, join_row = check_join(pipetune, tmp, ZIP, ("from_tensor_slices", "map(thumbnail)", "map(edge_label)",
                                                       "zip", "batch(32)"), "map(edge_label)",
                                  ("map(thumbnail)",))
    if abs(joined / join_row - 1) > 0.1:
        fail("the zip's first input is not priced once per output: visit ratio %.2f against the zip's %.2f"
             % (joined, join_row))


def case_concatenate(pipetune, tmp):
    """Two sources concatenated: each input's ops priced for its share of
    the outputs, the shares adding up to the whole."""
    joined, join_row = check_join(pipetune, tmp, CONCAT, ("from_tensor_slices", "map(load_photo)", "map(load_scan)",
                                                          "concatenate", "batch(32)"), "map(load_scan)",
                                  ("map(load_photo)", "map(load_scan)"))
    if abs(joined / join_row - 1) > 0.1:
        fail("the concatenate's inputs' visit ratios add up to %.2f, not the concatenate's %.2f"
             % (joined, join_row))


def case_bad_apply(pipetune, tmp):
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump({"tfdata_plan": {"sites": {"/x/train_tf.py:32 map": {"num_parallel_calls": 0}}}}, f)
    r = run([pipetune, "profile", "--apply", bad, "--", sys.executable, "-c", "pass"])
    if r.returncode != 2 or "num_parallel_calls" not in r.stderr or "train_tf.py:32" not in r.stderr:
        fail("a plan with num_parallel_calls 0 is not refused with exit 2 naming the site and key", r)


def case_one_line_and_py_function(pipetune, tmp):
    """Two maps on one line are two sites (the second "map#2"), each set by
    the plan on its own; and a map that runs Python (py_function) made
    parallel by --apply still delivers every element once, in order."""
    script = os.path.join(tmp, "one_line.py")
    with open(script, "w") as f:
        f.write("import json, sys\n"
                "import tensorflow as tf\n"
                "def twice(x):\n"
                "    return x * 2\n"
                "ds = tf.data.Dataset.range(200).map(lambda x: x + 1).map("
                "lambda x: tf.py_function(twice, [x], tf.int64))\n"
                "print(json.dumps([int(v) for v in ds]))\n")
    site = "%s:5 map" % os.path.abspath(script)
    plan = os.path.join(tmp, "plan.json")
    with open(plan, "w") as f:
        json.dump({"tfdata_plan": {"sites": {site: {"num_parallel_calls": 1},
                                             site + "#2": {"num_parallel_calls": 4}}}}, f)
    trace = os.path.join(tmp, "one_line.ptrace")
    r = profile(pipetune, trace, script, apply=plan)
    values = json.loads([l for l in r.stdout.splitlines() if l.startswith("[")][-1])
    if values != [2 * (v + 1) for v in range(200)]:
        fail("the py_function map made parallel lost, repeated or reordered elements", r)
    rep, r = report(pipetune, trace)
    with open(trace, "rb") as f:
        header = f.read(200000).decode("utf-8", "replace")
    if (site + "#2") not in header:
        fail("the second map on the line is not a site of its own (%s#2)" % site, r)
    text = run([pipetune, "report", trace]).stdout
    if "runs Python" not in text:
        fail("the py_function map is not said to run Python", r)


def case_never_iterates(pipetune, tmp):
    script = os.path.join(tmp, "build_only.py")
    with open(script, "w") as f:
        f.write("import tensorflow as tf\nds = tf.data.Dataset.range(10).map(lambda x: x + 1)\n")
    trace = os.path.join(tmp, "none.ptrace")
    profile(pipetune, trace, script)
    r = run([pipetune, "report", trace])
    said = r.stdout + r.stderr
    if r.returncode not in (0, 2) or "never iterated" not in said:
        fail("a script that never iterates its dataset is not said plainly", r)


def case_verify(pipetune, tmp):
    """`tune --verify -- python3`: round 0 as written, round 1 with its plan
    applied, the best round's plan written with its code change."""
    trace = os.path.join(tmp, "v.ptrace")
    out = os.path.join(tmp, "best.tfdata.json")
    r = run([pipetune, "tune", trace, "--verify", "--memory", "1GiB", "-o", out, "--format", "json",
             "--", sys.executable, LOOP, images(), "2"], env=ENV)
    if r.returncode != 0:
        fail("pipetune tune --verify -- python3 failed", r)
    doc = json.loads(r.stdout)
    if len(doc["rounds"]) != 2 or doc["rounds"][1]["plan"] is None:
        fail("the loop did not run the script as written, then with its plan", r)
    with open(out) as f:
        best = json.load(f)["tfdata_plan"]
    if best["code_change"] != doc["code_change"]:
        fail("the plan written is not the best round's", r)


def case_gate(pipetune, tmp):
    """`baseline -- python3` and `check -- python3` on the script: the
    baseline names each op by its line, and an unchanged check passes or
    (noise on a loaded host) fails naming a stage, never a usage error."""
    base = os.path.join(tmp, "base.json")
    cmd = ["--", sys.executable, LOOP, images(), "2"]
    r = run([pipetune, "baseline", "--runs", "1", "-o", base] + cmd, env=ENV)
    if r.returncode != 0:
        fail("pipetune baseline -- python3 failed", r)
    with open(base) as f:
        if "train_tf.py:32 map(process_path)" not in f.read():
            fail("the baseline does not name the decoding map by its line", r)
    r = run([pipetune, "check", "--baseline", base, "--runs", "1"] + cmd, env=ENV)
    if r.returncode not in (0, 1) or "train_tf.py:32 map(process_path)" not in r.stdout:
        fail("pipetune check -- python3 did not judge the script's ops (exit %d)" % r.returncode, r)


def sampler_share(trace):
    """The sampler thread's CPU over the process's, from the trace header's
    tf.data record (the last copy the recorder wrote)."""
    with open(trace, "rb") as f:
        found = re.findall(rb'"sampler_cpu_ms": ([0-9.]+), "process_cpu_ms": ([0-9.]+)', f.read())
    if not found:
        fail("the trace %s records no sampler CPU" % trace)
    sampler, process = (float(v) for v in found[-1])
    return sampler / process if process > 0 else 0.0


def case_overhead(pipetune, tmp):
    """Traced over untraced on the same script, alternated, judged two ways.

    The CPU each batch takes (the loop's `cpu_seconds` over its batches, the
    median run of each side): the tracer's own work is CPU in the process,
    and a neighbour on the host moves it little (0.016-0.023 s a batch for
    the same script, idle or beside two busy loops). A gross cost fails:
    over 1.15x.

    The wall rate, fastest run against fastest run: TensorFlow's autotuner
    lands the same untraced script at about 64 or about 95 batches/s from
    one run to the next on an idle host, and a busy one adds its own spread
    (a CI run measured 45 to 90), so a best half compares whichever mode
    each side drew. The fastest of several runs is the script undisturbed.
    Three pairs, more where the fastest traced is under 0.90 of the fastest
    untraced (up to twelve: a tracer that costs 15% keeps every traced run
    slow, a mode drawn by chance does not hold for twelve). A gross cost
    fails: under 0.85. The 3% target itself is the benchmark's
    (bench/tfdata/compare.py, docs/benchmarks-tfdata.md)."""
    traced, untraced = [], []
    traced_cpu, untraced_cpu = [], []
    sampler_shares = []

    def median(values):
        return sorted(values)[len(values) // 2]

    def wall_ratio():
        return max(traced) / max(untraced)

    def cpu_ratio():
        return median(traced_cpu) / median(untraced_cpu)

    for i in range(12):
        r = run([sys.executable, LOOP, images(), "2"], env=ENV)
        if r.returncode != 0:
            fail("the script failed", r)
        untraced.append(rate_of(r))
        untraced_cpu.append(cpu_per_batch(r))
        trace = os.path.join(tmp, "t%d.ptrace" % i)
        r = profile(pipetune, trace, LOOP, images(), "2")
        traced.append(rate_of(r))
        traced_cpu.append(cpu_per_batch(r))
        sampler_shares.append(sampler_share(trace))
        os.remove(trace)
        if len(traced) >= 3 and wall_ratio() >= 0.90 and cpu_ratio() <= 1.10:
            break
    print("traced/untraced, the fastest run of %d each: %.3f (batches/s: traced %s, untraced %s)"
          % (len(traced), wall_ratio(), " ".join("%.1f" % v for v in traced),
             " ".join("%.1f" % v for v in untraced)))
    print("CPU a batch, traced/untraced, the median run: %.3f (ms: traced %s, untraced %s)"
          % (cpu_ratio(), " ".join("%.1f" % (1e3 * v) for v in traced_cpu),
             " ".join("%.1f" % (1e3 * v) for v in untraced_cpu)))
    if cpu_ratio() > 1.15:
        fail("tracing costs more than 15%% of the CPU: traced/untraced %.3f a batch" % cpu_ratio())
    if wall_ratio() < 0.85:
        fail("tracing costs more than 15%%: the fastest traced run is %.3f of the fastest untraced" % wall_ratio())
    # The recorder's own cost, finer than either: the sampler thread's CPU
    # over the process's while it recorded.
    share = median(sampler_shares)
    print("the sampler's CPU: %.2f%% of the process's (runs: %s)" % (
        100 * share, ", ".join("%.2f%%" % (100 * s) for s in sampler_shares)))
    if share > 0.03:
        fail("the tf.data sampler used %.1f%% of the process's CPU, over the 3%% target" % (100 * share))
    if wall_ratio() < 0.97:
        print("above the 3%% target here (%.3f): see the benchmark for the figure" % wall_ratio())


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: test_tfdata.py CASE PIPETUNE\n")
        sys.exit(2)
    if importlib.util.find_spec("tensorflow") is None:
        print("skipped: no tensorflow in %s" % sys.executable)
        sys.exit(77)
    case = globals().get("case_" + sys.argv[1])
    if case is None:
        sys.stderr.write("unknown case %s\n" % sys.argv[1])
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix="pipetune-tfdata-") as tmp:
        case(os.path.abspath(sys.argv[2]), tmp)
    print("PASS")


if __name__ == "__main__":
    main()
