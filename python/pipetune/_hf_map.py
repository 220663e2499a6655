"""An HF `datasets` map-style Dataset read through a format transform
(`dataset.set_transform(fn)`, or `with_transform(fn)`), recorded stage by
stage rather than as one `load` (docs/pytorch.md, "HF datasets,
map-style"):

- `load`: the Arrow read (the rows queried from the table and extracted
  to Python), what is left of dataset[i] (or of __getitems__'s batch);
- `transform[1]:decode:COLUMNS`: the features' decoding of the columns
  that need it (an Image column: PIL opens and decodes the bytes);
- `transform[2]:set_transform:FN`: the function's own time, less the
  recorded transforms it applies;
- `transform[3]:...`: each transform of a torchvision Compose (or any
  class so named) that FN applies: one reachable from FN (a global or a
  closure variable of its code, a default argument, a partial's argument,
  an attribute of a callable object or of a bound method's object), each
  recorded by _samples.TimedTransform as a dataset's own Compose is.

How. datasets formats each query with a CustomFormatter made anew per
query around the dataset's transform: its format_batch (extract, decode,
transform) is wrapped once per process, at class level, and finds a
recorded dataset's state by its transform function. The decode and FN
are recorded with one element per row of the query, so that a batch
fetched by __getitems__ counts its samples. The Compose's `transforms`
attribute is replaced by the recording stand-ins, which pickle (to a
spawned worker, into a checkpoint) as the user's own transforms.
"""
import functools
import time

from pipetune import _dataset

_now = time.monotonic_ns

# id(the format's transform function) -> _Format, for the datasets a
# fetcher of this process reads.
_formats = {}


class _Format:
    """One dataset's format transform: the function (held, so that its id
    stays its own), the SampleContext its records go to, and the names of
    its decode and its own stage."""

    def __init__(self, function, ctx, decode_name, own_name):
        self.function = function
        self.ctx = ctx
        self.decode_name = decode_name
        self.own_name = own_name


def is_hf_dataset(dataset):
    return hasattr(dataset, "_format_kwargs") and any(
        klass.__name__ == "Dataset" and klass.__module__.startswith("datasets") for klass in type(dataset).__mro__)


def _format_transform(dataset):
    """The function of a `custom` format (set_transform, with_transform); None otherwise."""
    if getattr(dataset, "_format_type", None) != "custom":
        return None
    transform = (getattr(dataset, "_format_kwargs", None) or {}).get("transform")
    return transform if callable(transform) else None


def _code_names(code, out, depth=0):
    """The global names a function's code (and the comprehensions and
    lambdas nested in it) reads."""
    out.update(code.co_names)
    if depth < 3:
        for const in code.co_consts:
            if hasattr(const, "co_names"):
                _code_names(const, out, depth + 1)
    return out


def _reachable(function):
    """The values a function applies to a sample may come from, in a stable order."""
    values = []
    if isinstance(function, functools.partial):
        values += list(function.args) + list((function.keywords or {}).values())
        function = function.func
    owner = getattr(function, "__self__", None)  # a bound method: its object's attributes
    if owner is not None:
        values += list(getattr(owner, "__dict__", {}).values())
        function = getattr(function, "__func__", function)
    if not hasattr(function, "__code__") and callable(function):  # a callable object: its attributes and __call__
        values += list(getattr(function, "__dict__", {}).values())
        function = getattr(type(function), "__call__", None)
    code = getattr(function, "__code__", None)
    if code is None:
        return values
    cells = getattr(function, "__closure__", None) or ()
    for cell in cells:
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a cell not yet set
            pass
    values += list(getattr(function, "__defaults__", None) or ())
    values += list((getattr(function, "__kwdefaults__", None) or {}).values())
    globals_ = getattr(function, "__globals__", {})
    values += [globals_[name] for name in sorted(_code_names(code, set())) if name in globals_]
    return values


def _composes(function):
    """The Composes (or wrappers holding one) that `function` can reach, once each."""
    found, seen = [], set()
    for value in _reachable(function):
        compose = value if _dataset.is_compose(value) else None
        if compose is None and not isinstance(value, type):
            held = _dataset.held_transforms(value) if callable(value) else None
            inner = getattr(value, held) if held is not None else None
            compose = inner if _dataset.is_compose(inner) else None
        if compose is not None and id(compose) not in seen:
            seen.add(id(compose))
            found.append(compose)
    return found


def _decode_columns(dataset):
    """The columns whose features decode (Image, Audio, ...), joined for the stage's name."""
    features = getattr(getattr(dataset, "_info", None), "features", None) or {}
    needs = getattr(features, "_column_requires_decoding", {}) or {}
    return "+".join(name for name in features if needs.get(name)) or "features"


def instrument(dataset, ctx, timed_transform):
    """Records `dataset`'s format transform into `ctx`, once per process
    (context_of finds it again). `timed_transform(t, name, ctx)` makes a
    transform's recording stand-in (_samples.TimedTransform)."""
    function = _format_transform(dataset)
    if function is None or not _patch():
        return
    name = getattr(function, "__name__", None) or type(function).__name__
    _formats[id(function)] = _Format(function, ctx, "transform[1]:decode:" + _decode_columns(dataset),
                                     "transform[2]:set_transform:" + name)
    k = 3
    for compose in _composes(function):
        timed = []
        for t in compose.transforms:
            timed.append(timed_transform(t, "transform[%d]:%s" % (k, type(t).__name__), ctx))
            k += 1
        try:
            compose.transforms = timed
        except (AttributeError, TypeError):  # a read-only attribute: its time stays in the function's
            pass


def context_of(dataset):
    """The SampleContext a previous fetcher of this process gave `dataset`'s format; None if none."""
    function = _format_transform(dataset)
    known = _formats.get(id(function)) if function is not None else None
    return known.ctx if known is not None and known.function is function else None


def _patch():
    """Wraps CustomFormatter.format_batch once; False where datasets lacks
    what it needs (the dataset is then recorded as one `load`)."""
    try:
        from datasets.formatting import formatting
    except ImportError:
        return False
    klass = getattr(formatting, "CustomFormatter", None)
    if klass is None or "format_batch" not in klass.__dict__:
        return False
    if getattr(klass.format_batch, "_pipetune", False):
        return True
    original = klass.format_batch

    def format_batch(self, pa_table):
        known = _formats.get(id(getattr(self, "transform", None)))
        decoder = getattr(self, "python_features_decoder", None)
        if known is None or known.function is not self.transform or not known.ctx.active or decoder is None:
            return original(self, pa_table)
        ctx = known.ctx
        rows = max(1, pa_table.num_rows)
        batch = self.python_arrow_extractor().extract_batch(pa_table)  # the Arrow read: `load`
        clock = ctx.clock
        begin, cpu = _now(), clock()
        batch = decoder.decode_batch(batch)
        cpu_ns, end = clock() - cpu, _now()
        ctx.transform_ns += end - begin
        ctx.transform_cpu_ns += cpu_ns
        ctx.record(known.decode_name, begin, end, ctx.index, cpu_ns, rows)
        inner_ns, inner_cpu = ctx.transform_ns, ctx.transform_cpu_ns
        begin, cpu = _now(), clock()
        out = self.transform(batch)
        cpu_ns, end = clock() - cpu, _now()
        # Its own time: the transforms it applied are recorded by theirs.
        own_ns = max(0, end - begin - (ctx.transform_ns - inner_ns))
        own_cpu = max(0, cpu_ns - (ctx.transform_cpu_ns - inner_cpu))
        ctx.transform_ns = inner_ns + (end - begin)
        ctx.transform_cpu_ns = inner_cpu + cpu_ns
        ctx.record(known.own_name, end - own_ns, end, ctx.index, own_cpu, rows)
        return out

    format_batch._pipetune = True
    klass.format_batch = format_batch
    return True
