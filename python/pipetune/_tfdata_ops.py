"""The user's tf.data ops and TensorFlow's autotune model of them, matched
(docs/tfdata.md, "What TensorFlow rewrites").

TensorFlow rewrites a pipeline before it runs: a sequential map may become a
ParallelMapV2, a map followed by a batch one MapAndBatch, a shuffle followed
by a repeat one ShuffleAndRepeat; an identity map disappears; a prefetch is
added at the end; a cache is two nodes. The model that get_model_proto
returns describes the rewritten graph. This file walks both chains from the
source up and gives each of the user's ops (each call site) the model nodes
that do its work, so that every row of the report is a line of the script,
and writes down what was fused, made parallel, removed or added. A zip or a
concatenate has several inputs: both chains are walked into every input, and
each input's ops are matched to its nodes on their own.

The pipeline's description for the trace's header is built here too: the
engine's pipeline config (the one model's contract), one stage per op."""

# A model node's name -> the user's op(s) it runs. Two kinds: TF fused two
# ops into the node. "cache-impl": the second node of a cache.
NODE_KINDS = {
    "Range": ("source",), "TensorSlice": ("source",), "FromTensor": ("source",),
    "Generator": ("source",), "TFRecord": ("source",), "TextLine": ("source",),
    "FixedLengthRecord": ("source",),
    "Map": ("map",), "ParallelMap": ("map",), "ParallelMapV2": ("map",),
    "MapAndBatch": ("map", "batch"),
    "Batch": ("batch",), "BatchV2": ("batch",), "ParallelBatch": ("batch",),
    "PaddedBatch": ("padded_batch",), "PaddedBatchV2": ("padded_batch",),
    "Prefetch": ("prefetch",),
    "Shuffle": ("shuffle",), "ShuffleAndRepeat": ("shuffle", "repeat"),
    "Repeat": ("repeat",), "ForeverRepeat": ("repeat",), "FiniteRepeat": ("repeat",),
    "Filter": ("filter",), "ParallelFilter": ("filter",),
    "Interleave": ("interleave",), "FlatMap": ("flat_map",),
    "Take": ("take",), "FiniteTake": ("take",), "Skip": ("skip",), "FiniteSkip": ("skip",),
    "Unbatch": ("unbatch",),
    "MemoryCache": ("cache",), "FileCache": ("cache",),
    "MemoryCacheImpl": ("cache-impl",), "FileCacheImpl": ("cache-impl",),
    "Zip": ("zip",), "Concatenate": ("concatenate",),
}
SOURCES = ("list_files", "from_tensor_slices", "range", "from_tensors", "from_generator", "source")
LOOKAHEAD = 4  # user ops a node may skip over (ops TF removed) before it counts as TF's own


def node_kinds(name):
    if name.startswith("ParallelInterleave") or name.startswith("LegacyParallelInterleave"):
        return ("interleave",)
    return NODE_KINDS.get(name)


JOINS = ("zip", "concatenate")  # ops with several inputs, each a chain of its own
JOIN_NODES = {"Zip": "zip", "Concatenate": "concatenate"}
_JOIN_TYPES = {"ZipDataset": "zip", "ConcatenateDataset": "concatenate"}


def _inputs(dataset, join):
    """The datasets `dataset` reads: every input of a join (zip, concatenate),
    else the one it transforms (an interleave's per-element datasets are
    its function's, not inputs)."""
    if join:
        try:
            return list(dataset._inputs())
        except Exception:  # a version that keeps them elsewhere: the first only
            pass
    single = getattr(dataset, "_input_dataset", None)
    return [single] if single is not None else []


def user_ops(dataset):
    """The tagged ops of the pipeline that ends at `dataset`, in one chain:
    the inputs of a zip or a concatenate each in turn (source first), then
    the join and the ops after it. Each op is its site with `path` (which
    input of which join it lies in, the same as model_chain's) and, for a
    join, `branches`. An untagged source (a reader class) or join is kept
    as an op of its own so that its node has a row; other untagged datasets
    (options, TF's own wrappers) are skipped."""
    return _ops_of_chain(dataset, (), [0])


def _ops_of_chain(dataset, path, seen):
    ops = []  # the end first
    while dataset is not None and seen[0] < 1000:
        seen[0] += 1
        site = getattr(dataset, "_pipetune_site", None)
        join = _JOIN_TYPES.get(type(dataset).__name__.lstrip("_"))
        inputs = _inputs(dataset, join is not None)
        if site is not None:
            ops.append(dict(site, path=path))
        elif not inputs or join:
            name = type(dataset).__name__.lstrip("_")
            ops.append({"key": "source:" + name, "file": "", "line": 0, "method": join or "source",
                        "op": join or "source", "fn": "", "args": {}, "code": "", "untagged": name,
                        "path": path})
        if join and inputs:  # one input (zip((a,))) is a join of one: the same path as its node's inputs
            ops[-1]["branches"] = len(inputs)
            ops.reverse()
            branches = []
            for i, branch in enumerate(inputs):
                chain = _ops_of_chain(branch, path + (i,), seen)
                if i > 0 and chain:
                    chain[0]["relay"] = True  # its input is, to the model, the last op of branch i - 1
                branches.extend(chain)
            return branches + ops
        dataset = inputs[0] if inputs else None
    ops.reverse()
    return ops


def model_chain(proto):
    """The model's nodes in the order of user_ops, Root left out: the inputs
    of a Zip or Concatenate node each in turn, then it and what follows;
    each node with its path (which input of which join). Also each node
    that begins input i >= 1 of a join, mapped to the last node of input
    i - 1: the node before it in the chain. A concatenate's input appears
    only once it has begun. Each node keeps the nodes under its other
    inputs (an interleave's per-element datasets), whose time it includes."""
    relay = {}
    chain = _nodes_of_chain(proto, proto.output, (), relay, [0])
    return chain, relay


def _nodes_of_chain(proto, node_id, path, relay, steps):
    nodes = []  # the end first
    while node_id and node_id in proto.nodes and steps[0] < 1000:
        steps[0] += 1
        node = proto.nodes[node_id]
        if node.name != "Root":
            nodes.append((node, path))
        if node.name in JOIN_NODES and node.inputs:  # a concatenate's second input shows once it begins
            nodes.reverse()
            branches = []
            for i, input_id in enumerate(node.inputs):
                chain = _nodes_of_chain(proto, input_id, path + (i,), relay, steps)
                if i > 0 and chain:
                    relay[chain[0][0].id] = node.inputs[i - 1]
                branches.extend(chain)
            return branches + nodes
        node_id = node.inputs[0] if node.inputs else 0
    nodes.reverse()
    return nodes


def subtree_ns(proto, node, depth=0):
    """Processing time of the nodes under `node`'s second and later inputs."""
    total = 0
    for input_id in list(node.inputs)[1:]:
        child = proto.nodes.get(input_id)
        if child is None or depth > 20:
            continue
        total += child.processing_time + subtree_ns(proto, child, depth + 1)
        for grand in list(child.inputs)[:1]:
            g = proto.nodes.get(grand)
            if g is not None:
                total += g.processing_time
    return total


def parameter(node, name):
    for p in node.parameters:
        if p.name == name:
            return p
    return None


def match(ops, chain):
    """[(op index or None, node, role)] for every node of model_chain's
    chain, each input of a join matched on its own (ops and nodes of one
    path), so that an op TensorFlow removed in one input never takes a
    node of the next."""
    out = []
    for path in dict.fromkeys(p for _, p in chain):
        indices = [i for i, op in enumerate(ops) if op.get("path", ()) == path]
        nodes = [n for n, p in chain if p == path]
        for index, node, role in _match_chain([ops[i] for i in indices], nodes):
            out.append((indices[index] if index is not None else None, node, role))
    return out


def _match_chain(ops, chain):
    """match() on one chain: role "own" (the op's node), "fused" (the node
    the op shares with the op before it), "part" (a second node of the op:
    a cache's, list_files' shuffle) or "added" (TensorFlow's own: op index
    is the op it follows)."""
    out = []
    i = 0
    last = None
    pending_parts = []
    for node in chain:
        kinds = node_kinds(node.name)
        if kinds == ("cache-impl",):
            pending_parts.append(node)
            continue
        if (kinds == ("shuffle",) and last is not None and ops[last]["method"] == "list_files"
                and not (i < len(ops) and ops[i]["method"] == "shuffle")):
            out.append((last, node, "part"))
            continue
        found = None
        if kinds is not None:
            for j in range(i, min(i + LOOKAHEAD, len(ops))):
                kind = "source" if ops[j]["method"] in SOURCES else ops[j]["method"]
                if kind == kinds[0]:
                    found = j
                    break
        if found is None:
            out.append((last, node, "added"))
            continue
        out.append((found, node, "own"))
        out.extend((found, part, "part") for part in pending_parts)
        pending_parts = []
        last = found
        i = found + 1
        if len(kinds) == 2 and i < len(ops) and ops[i]["method"] == kinds[1]:
            out.append((i, node, "fused"))
            last = i
            i += 1
    return out


def describe(op):
    """The op's row name: file:line, the method and what tells it apart."""
    if op.get("untagged"):
        return op["untagged"]
    method = op["method"]
    what = op.get("fn") or ""
    args = op.get("args", {})
    if method in ("batch", "padded_batch") and "batch_size" in args:
        what = str(args["batch_size"])
    if method == "list_files" and "file_pattern" in args:
        what = repr(args["file_pattern"])
    label = "%s(%s)" % (method, what) if what else method
    if op.get("added"):
        label += " (plan)"
    return "%s:%d %s" % (op["file"], op["line"], label)


def stage_config(op, name, knobs):
    """The engine stage that stands for a user op (models/config.h): the
    model prices it like any stage; `call_site` is how a plan finds it."""
    method = op["method"]
    args = op.get("args", {})
    stage = {"name": name, "call_site": op["key"]}
    if any(i > 0 for i in op.get("path", ())):
        stage["join_input"] = True  # a cache after it would not replay the other inputs (models/profile.h)
    if method in JOINS or op.get("relay"):
        # A join, and the source that begins a join's second or later input,
        # take from the op before them in the one chain what the sampler
        # records as consumed (Sampler.consumed): a ratio the model measures
        # as it does a filter's, so that each input's ops are priced for
        # their share of the outputs (docs/tfdata.md, "zip and concatenate").
        stage.update(op="filter", fn=method)
    elif method in SOURCES:
        # A range of the source's cardinality, list_files' too: the model
        # needs the epoch's size to price a cache, and a list_files stage
        # would have it only from globbing its pattern.
        count = args.get("elements")
        stage.update(op="range", args={"count": count} if isinstance(count, int) else {})
    elif method in ("batch", "padded_batch"):
        stage.update(op="batch", args={"size": int(args.get("batch_size", 1)),
                                       "drop_remainder": bool(args.get("drop_remainder", False))})
    elif method == "prefetch":
        stage.update(op="prefetch", buffer=max(1, int(knobs.get("buffer") or 1)))
    elif method == "cache":
        location = args.get("location", args.get("filename", "")) or "memory"
        stage.update(op="cache", location=location)
    elif method == "shuffle":
        stage.update(op="shuffle", args={"buffer": int(args.get("buffer_size", 1))}, random=True)
    elif method == "repeat":
        count = args.get("count")
        stage.update(op="repeat", args={"count": count} if isinstance(count, int) and count >= 0 else {})
    elif method == "take":
        stage.update(op="take", args={"count": int(args.get("count", 0))})
    elif method in ("filter", "skip"):
        stage.update(op="filter", fn=op.get("fn") or method)
    else:  # map, interleave, flat_map, unbatch: one element in, some out
        stage.update(op="map", fn=op.get("fn") or method, parallelism=max(1, int(knobs.get("parallelism") or 1)))
        if op.get("random"):
            stage["random"] = True
    return stage


def notes_for(op, names, fused_with, removed):
    """Sentences on what TensorFlow did to the op, for the report."""
    where = "%s:%d" % (op["file"], op["line"]) if op.get("file") else op.get("untagged", "the source")
    method = op["method"]
    notes = []
    if removed:
        notes.append("%s %s: TensorFlow removed it (no node in its model); its cost is in its neighbours'"
                     % (where, method))
    if method == "map" and "ParallelMapV2" in names and "num_parallel_calls" not in op.get("args", {}):
        notes.append("%s map: written sequential; TensorFlow made it parallel (map_parallelization, autotuned)"
                     % where)
    if fused_with is not None:
        notes.append("%s %s: TensorFlow fused it into the %s at %s (%s); its time is counted in that row"
                     % (where, method, fused_with[0], fused_with[1], fused_with[2]))
    if op.get("python"):
        notes.append("%s %s: runs Python (py_function, numpy_function or a generator): its time is "
                     "Python's, under the GIL, and more parallel calls will not run it faster" % (where, method))
    return notes
