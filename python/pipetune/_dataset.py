"""What a DataLoader reads and how each sample is transformed, as recorded at
the DataLoader's construction in its record's `dataset` (docs/pytorch.md,
"What is recorded"): the dataset's class and root (a torchvision ImageFolder
or DatasetFolder, with its extensions and loader), and each transform with
its public attributes. `pipetune tune TRACE --engine` rebuilds the input on
the engine from it (workflow/engine_from_dataloader.h); nothing here is
interpreted, only described.

The transforms are found where torchvision keeps them: `dataset.transform`
is a Compose (nested ones flattened), a list, or a wrapper object that holds
a Compose or a list in one of its attributes and is called as a plain
callable (torchvision's references/classification/presets.py
ClassificationPresetTrain keeps `self.transforms = T.Compose([...])`).
"""
import enum
import itertools
import math
import numbers
import os

# A record stays small: a transform's long lists (AutoAugment's policies)
# and deep structures are cut, never the whole record.
MAX_ITEMS = 32
MAX_DEPTH = 4
_SKIP = object()  # a value JSON cannot hold: the attribute is left out


def jsonable(value, depth=0):
    """`value` as JSON holds it, or _SKIP: numbers (finite), strings, None,
    enums (their value, as InterpolationMode's "bilinear"), torch dtypes
    ("torch.float32"), sequences and dicts of those, and small tensors."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return jsonable(value.value, depth)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value) if math.isfinite(value) else _SKIP
    if type(value).__name__ == "dtype" and type(value).__module__ == "torch":
        return str(value)  # ConvertImageDtype's: "torch.float32"
    if depth >= MAX_DEPTH:
        return _SKIP
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and _elements(value) <= MAX_ITEMS:
        return jsonable(tolist(), depth)  # a small tensor or array: Normalize's mean given as one
    if isinstance(value, (list, tuple)):
        items = [jsonable(v, depth + 1) for v in value[:MAX_ITEMS]]
        return _SKIP if any(v is _SKIP for v in items) else items
    if isinstance(value, dict):
        out = {}
        for k, v in itertools.islice(value.items(), MAX_ITEMS):
            v = jsonable(v, depth + 1)
            if isinstance(k, str) and v is not _SKIP:
                out[k] = v
        return out
    return _SKIP


def _elements(value):
    """A tensor's (numel) or an array's (size) element count; large when unknown."""
    numel = getattr(value, "numel", None)
    count = numel() if callable(numel) else getattr(value, "size", None)
    return count if isinstance(count, int) else MAX_ITEMS + 1


def _public_params(transform):
    """A transform's public instance attributes that JSON holds (nn.Module's
    `training` flag is no parameter)."""
    params = {}
    for key, value in getattr(transform, "__dict__", {}).items():
        if key.startswith("_") or key == "training":
            continue
        value = jsonable(value)
        if value is not _SKIP:
            params[key] = value
    return params


def _is_function(value):
    return type(value).__name__ in ("function", "builtin_function_or_method", "method")


def _name_of(value):
    """A function's name ("<lambda>", "pil_loader"), else its class's."""
    return getattr(value, "__qualname__", type(value).__name__) if _is_function(value) else type(value).__name__


def describe_transform(transform):
    """{"name": class (or function) name, "module": its module, "params": public attributes}."""
    function = _is_function(transform)
    return {"name": _name_of(transform),
            "module": getattr(transform, "__module__", None) if function else type(transform).__module__,
            "params": {} if function else _public_params(transform)}


def is_compose(transform):
    """torchvision's Compose, or any class so named with a `transforms` list."""
    return type(transform).__name__ == "Compose" and isinstance(getattr(transform, "transforms", None),
                                                                  (list, tuple))


def is_transform_list(value):
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(callable(t) for t in value)


def held_transforms(wrapper):
    """The attribute of a wrapper object that holds its transforms (a
    Compose, or a list of callables): its name, or None when it holds none
    or more than one (which one it calls cannot be told)."""
    if not callable(wrapper) or type(wrapper).__module__.startswith("torchvision."):
        return None  # torchvision's own transforms (RandomApply's list) are not wrappers
    found = [key for key, value in getattr(wrapper, "__dict__", {}).items()
             if not key.startswith("__") and (is_compose(_unwrap(value)) or is_transform_list(value))]
    return found[0] if len(found) == 1 else None


def _unwrap(transform):
    """The recording wrappers of _samples.py stand for the user's objects."""
    return getattr(transform, "__dict__", {}).get("_pt_original", transform)


def flatten_transforms(transform, out, depth=0):
    """The transforms a sample goes through, in order, nested Composes and
    lists flattened."""
    transform = _unwrap(transform)
    if depth < MAX_DEPTH and is_compose(transform):
        inner = transform.transforms
    elif depth < MAX_DEPTH and is_transform_list(transform):
        inner = transform
    else:
        out.append(describe_transform(transform))
        return out
    for t in inner:
        flatten_transforms(t, out, depth + 1)
    return out


def _folder_base(dataset):
    """"ImageFolder" or "DatasetFolder" when the dataset is (or derives from)
    torchvision's; None otherwise."""
    for cls in type(dataset).__mro__:
        if cls.__module__.startswith("torchvision.datasets") and cls.__name__ in ("ImageFolder", "DatasetFolder"):
            return cls.__name__
    return None


def describe_dataset(dataset):
    """The record's `dataset`: what is read and how each sample is transformed."""
    record = {"class": type(dataset).__name__, "module": type(dataset).__module__, "base": _folder_base(dataset)}
    root = getattr(dataset, "root", None)
    if isinstance(root, (str, os.PathLike)):
        record["root"] = os.path.abspath(os.fspath(root))
    if record["base"] is not None:
        # DatasetFolder keeps its extensions, a tuple or one string (None
        # when is_valid_file chose the files).
        extensions = getattr(dataset, "extensions", None)
        if isinstance(extensions, str):
            extensions = (extensions,)
        record["extensions"] = [e for e in extensions if isinstance(e, str)] \
            if isinstance(extensions, (list, tuple)) else None
        loader = getattr(dataset, "loader", None)
        if loader is not None:
            record["loader"] = "%s.%s" % (getattr(loader, "__module__", "?"), _name_of(loader))
        classes = getattr(dataset, "classes", None)
        record["classes"] = len(classes) if isinstance(classes, (list, tuple)) else None
        samples = getattr(dataset, "samples", None)
        record["samples"] = len(samples) if isinstance(samples, (list, tuple)) else None
    target_transform = getattr(dataset, "target_transform", None)
    record["target_transform"] = None if target_transform is None else _name_of(_unwrap(target_transform))
    transform = _unwrap(getattr(dataset, "transform", None))
    record["transform_holder"] = None
    if transform is None:
        record["transforms"] = []
        return record
    holder = None if is_compose(transform) or is_transform_list(transform) else held_transforms(transform)
    if holder is not None:
        record["transform_holder"] = "%s.%s" % (type(transform).__name__, holder)
        transform = _unwrap(getattr(transform, holder))
    record["transforms"] = flatten_transforms(transform, [])
    return record


def shuffles(loader):
    """Whether the DataLoader reorders its samples each epoch (its sampler
    says so); None for a sampler pipetune does not know."""
    sampler = getattr(loader, "sampler", None)
    name = type(sampler).__name__
    if name == "RandomSampler":
        return True
    if name == "SequentialSampler":
        return False
    if name == "DistributedSampler":
        return bool(getattr(sampler, "shuffle", False))
    return None
