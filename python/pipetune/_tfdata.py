"""Records tf.data pipelines without a change to the training script, and
applies a tuned tf.data plan at the calls that built them (docs/tfdata.md).
Installed by sitecustomize.py.

How. A meta-path hook waits for TensorFlow to import
tensorflow.python.data.ops.dataset_ops and then wraps the Dataset methods a
script builds its pipeline with (map, batch, prefetch, cache, interleave, ...)
and iterator_ops.OwnedIterator, which both a custom `for` loop and Keras'
model.fit drive. Each wrapped call made from the user's code (not from inside
TensorFlow) tags the dataset it returns with its call site: the file, line and
source text of the call, the op, its function and its knobs. With a plan
(PIPETUNE_TFDATA_APPLY), the same wrapper first rewrites the call's knobs for
that site (num_parallel_calls, cycle_length, buffer_size) and then adds what
the plan puts after it (a cache in memory or in a file, a prefetch), so a
plan reaches the pipeline with no code change. Each new iterator is handed to
the sampler (_tfdata_sampler.py), which reads TensorFlow's own autotune model
of it while it runs and writes each op's counts into the trace.

Nothing here runs per element: the wrappers run once per pipeline built."""
import linecache
import os
import sys

from pipetune import _import_hook, _tfdata_sampler
from pipetune._recorder import read_applied
from pipetune._recorder import warn as _warn

APPLY_ENV = "PIPETUNE_TFDATA_APPLY"  # a tf.data plan (pipetune tune's .tfdata.json)
TARGET = "tensorflow.python.data.ops.dataset_ops"

# Method -> the op's kind. Sources are static methods; the others return a
# dataset built on the receiver (their input).
SOURCES = ("list_files", "from_tensor_slices", "range", "from_tensors", "from_generator")
STATIC = SOURCES + ("zip",)  # zip's inputs are its arguments: tagged like a source, followed like a join
TRANSFORMS = ("map", "batch", "padded_batch", "prefetch", "cache", "shuffle", "repeat", "filter",
              "interleave", "flat_map", "take", "skip", "unbatch", "concatenate")

plan_sites = {}  # site key -> the plan's settings for it
plan_document = None
_tf_dir = None
_here = os.path.dirname(os.path.abspath(__file__))


_ordinals = {}  # "PATH:LINE METHOD" -> {bytecode offset: its ordinal on the line}


def site_key(path, line, method, offset=None):
    """How a plan names a call: its file (absolute), line and method, and
    where one line makes several calls of the method (`ds.map(f).map(g)`),
    which of them: "#2" for the second and so on. A call is known by the
    offset of its bytecode (the same on every run of the script) and
    numbered in the order the line first makes its calls, which for a
    chain is left to right, so the key is stable. The first call's key has
    no ordinal: a plan written before ordinals names the first call as it
    always did (and no longer sets the others alike)."""
    key = "%s:%d %s" % (os.path.abspath(path), line, method)
    if offset is None:
        return key
    seen = _ordinals.setdefault(key, {})
    ordinal = seen.setdefault(offset, len(seen) + 1)
    return key if ordinal == 1 else "%s#%d" % (key, ordinal)


def read_plan():
    """The plan in APPLY_ENV, if set (_recorder.read_applied)."""
    global plan_sites, plan_document

    def sites(document):
        return document, dict(document["tfdata_plan"]["sites"])

    plan_document, plan_sites = read_applied(APPLY_ENV, sites) or (None, {})


def _internal(filename):
    """A call made from TensorFlow (list_files calling from_tensor_slices),
    from an installed library (Keras wrapping the dataset it was given) or
    from pipetune (a plan's added cache) is part of another op, not the
    user's."""
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    if "/site-packages/" in path or "/dist-packages/" in path:
        return True
    return (_tf_dir is not None and path.startswith(_tf_dir)) or path.startswith(_here)


def _function_name(fn):
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "lambda" if name == "<lambda>" else name


def _random_function(dataset):
    """(random, python): whether the op's traced function draws random
    numbers (a cache after it would replay one epoch's draws) and whether it
    calls back into Python (py_function, numpy_function)."""
    wrapper = getattr(dataset, "_map_func", None) or getattr(dataset, "_predicate", None)
    try:
        graph = wrapper.function.graph
        types = {op.type for op in graph.get_operations()}
        for f in graph._functions.values():  # functions the traced one calls (tf.cond branches)
            types.update(n.op for n in f.definition.node_def)
    except Exception:  # no traced function, or one this version keeps elsewhere
        return False, False
    random = any("Random" in t and not t.startswith("Stateless") for t in types)
    python = any(t in ("EagerPyFunc", "PyFunc", "PyFuncStateless") for t in types)
    return random, python


def _bind(original, args, kwargs):
    import inspect

    try:
        return inspect.signature(original).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None


def _rewrite_knobs(method, bound, settings):
    """The call's arguments with the plan's knobs for its site over them."""
    a = bound.arguments
    if method in ("map", "interleave", "filter") and "num_parallel_calls" in settings:
        a["num_parallel_calls"] = int(settings["num_parallel_calls"])
    if method == "interleave" and "cycle_length" in settings:
        a["cycle_length"] = int(settings["cycle_length"])
    if method == "prefetch" and "buffer_size" in settings:
        a["buffer_size"] = int(settings["buffer_size"])


def _add_after(result, settings, site):
    """What the plan puts after the call: a cache, then a prefetch. Each is
    tagged as the plan's, at the site it follows."""
    cache = settings.get("cache_after")
    if cache is not None:
        if cache != "memory":  # TensorFlow writes the files but makes no directory
            os.makedirs(os.path.dirname(cache) or ".", exist_ok=True)
        result = result.cache("" if cache == "memory" else cache)
        _tag(result, dict(site, op="cache", method="cache", added=True, fn="",
                          args={"location": cache}))
    depth = settings.get("prefetch_after")
    if depth:
        result = result.prefetch(int(depth))
        _tag(result, dict(site, op="prefetch", method="prefetch", added=True, fn="",
                          args={"buffer_size": int(depth)}))
    return result


def _tag(dataset, site):
    try:
        object.__setattr__(dataset, "_pipetune_site", site)
    except Exception:  # a dataset type that refuses attributes: not recorded
        pass


def _describe(method, bound, result):
    """The op's arguments worth recording: its function, batch size, buffer,
    count, pattern and knobs as written."""
    a = bound.arguments if bound is not None else {}
    args = {}
    for key in ("batch_size", "buffer_size", "count", "cycle_length", "block_length",
                "num_parallel_calls", "drop_remainder", "file_pattern", "filename", "shuffle"):
        value = a.get(key)
        if isinstance(value, (int, float, str, bool)):
            args[key] = value
    fn = a.get("map_func") or a.get("predicate") or a.get("generator")
    site = {"fn": _function_name(fn) if fn is not None else ""}
    if fn is not None and method in ("map", "filter", "interleave", "flat_map"):
        site["random"], site["python"] = _random_function(result)
    if method == "from_generator":
        site["python"] = True
    if method in SOURCES:
        try:
            cardinality = int(result.cardinality())
            if cardinality >= 0:
                args["elements"] = cardinality
        except Exception:
            pass
    site["args"] = args
    return site


def _wrap(method, original):
    def wrapped(*args, **kwargs):
        caller = sys._getframe(1)
        if _internal(caller.f_code.co_filename):
            return original(*args, **kwargs)
        path, line = caller.f_code.co_filename, caller.f_lineno
        key = site_key(path, line, method, caller.f_lasti)
        settings = plan_sites.get(key) or {}
        bound = _bind(original, args, kwargs)
        if settings and bound is not None:
            _rewrite_knobs(method, bound, settings)
            args, kwargs = bound.args, bound.kwargs
        result = original(*args, **kwargs)
        try:
            site = {"key": key, "file": os.path.basename(path), "path": os.path.abspath(path),
                    "line": line, "method": method, "op": method,
                    "code": linecache.getline(path, line).strip()[:200], "applied": bool(settings)}
            site.update(_describe(method, bound, result))
            _tag(result, site)
            _tfdata_sampler.note_built("%s:%d" % (site["file"], line))
            if settings:
                result = _add_after(result, settings, site)
        except Exception as error:  # never break the user's pipeline
            _warn("cannot record the tf.data call at %s:%d: %r" % (path, line, error))
        return result

    wrapped._pipetune = True
    wrapped.__name__ = getattr(original, "__name__", method)
    wrapped.__doc__ = getattr(original, "__doc__", None)
    return wrapped


def _patch(module):
    from tensorflow.python.data.ops import iterator_ops

    global _tf_dir
    from tensorflow.python.framework import versions

    # TensorFlow is still importing itself here: its package is found from
    # this module's path, not `tensorflow.__file__`.
    path = os.path.abspath(module.__file__)
    _tf_dir = path[:path.rindex(os.sep + "python" + os.sep)]
    cls = module.DatasetV2
    if getattr(cls, "_pipetune_patched", False):
        return
    cls._pipetune_patched = True
    for method in STATIC:
        raw = cls.__dict__.get(method)
        if isinstance(raw, staticmethod):
            setattr(cls, method, staticmethod(_wrap(method, raw.__func__)))
    for method in TRANSFORMS:
        raw = cls.__dict__.get(method)
        if callable(raw):
            setattr(cls, method, _wrap(method, raw))
    _tfdata_sampler.patch_iterators(iterator_ops, versions.__version__, plan_document)


def install(tracing):
    """Called from sitecustomize: `tracing` when the run records a trace."""
    read_plan()
    if not (tracing or plan_sites):
        return
    _import_hook.patch_on_import(TARGET, _patch, "tf.data")
