"""ctypes binding of the tracer's C API (tracer/include/pipetune/tracer/tracer_c.h)
in libpipetune_tracer.so. ctypes rather than an extension module: nothing to
compile against Python's headers, one binary serves every Python version, and
the calls made per sample (a few) cost about a microsecond each, small beside
a sample's milliseconds of decoding and transforms."""
import ctypes
import os

_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64
_ptr = ctypes.c_void_p


class _Options(ctypes.Structure):
    _fields_ = [
        ("path", ctypes.c_char_p),
        ("pipeline_name", ctypes.c_char_p),
        ("config_json", ctypes.c_char_p),
        ("snapshot_interval_ms", _u32),
        ("spans_per_stage_per_second", _u32),
        ("consumer_steps_per_second", _u32),
    ]


def find_library(name, env=None):
    """The path of pipetune's shared library `name` (libpipetune_X.so): the
    environment variable `env` when set, beside this package (the build
    tree), the library directory an install recorded in _paths.py, or
    <prefix>/lib/ for the bootstrap's copy in <prefix>/lib/pipetune/python."""
    explicit = os.environ.get(env) if env else None
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    beside = os.path.join(here, name)  # the build tree
    if os.path.exists(beside):
        return beside
    dirs = []
    try:
        from pipetune import _paths  # written by cmake --install

        dirs.append(_paths.LIBRARY_DIR)
    except ImportError:
        pass
    dirs.append(os.path.normpath(os.path.join(here, "..", "..", "..")))  # lib/pipetune/python/pipetune/
    for lib_dir in dirs:
        for entry in sorted(os.listdir(lib_dir)) if os.path.isdir(lib_dir) else []:
            if entry.startswith(name):
                return os.path.join(lib_dir, entry)
    return beside


def library_path():
    return find_library("libpipetune_tracer.so", "PIPETUNE_TRACER_LIBRARY")


class Tracer:
    """The process's tracer: one session at a time (the C API's rule)."""

    def __init__(self, path=None):
        lib = ctypes.CDLL(path or library_path())
        signatures = {
            "pipetune_session_options_init": (None, [ctypes.POINTER(_Options)]),
            "pipetune_trace_start": (ctypes.c_int, [ctypes.POINTER(_Options)]),
            "pipetune_trace_stop": (ctypes.c_int, []),
            "pipetune_trace_enabled": (ctypes.c_int, []),
            "pipetune_trace_set_pipeline_info": (None, [ctypes.c_char_p, ctypes.c_char_p]),
            "pipetune_trace_last_error": (ctypes.c_char_p, []),
            "pipetune_register_stage": (_u32, [ctypes.c_char_p, ctypes.c_char_p, _u32]),
            "pipetune_set_parallelism": (None, [_u32, _u32]),
            "pipetune_set_buffer_occupancy": (None, [_u32, ctypes.c_int64, ctypes.c_int64]),
            "pipetune_attach_worker": (_ptr, [_u32]),
            "pipetune_detach_worker": (None, [_ptr]),
            "pipetune_produced": (None, [_ptr, _u64, _u64]),
            "pipetune_consumed": (None, [_ptr, _u64]),
            "pipetune_work": (None, [_ptr, _u64, _u64, _u64]),
            "pipetune_element": (None, [_ptr, _u64, _u64, _u64, _u64, _u64]),
            "pipetune_wait_input": (None, [_ptr, _u64]),
            "pipetune_consumer_step": (None, [_u64, _u64, _u64]),
        }
        # The calls made per element take the GIL with them (PyDLL): each
        # is tens of nanoseconds of C that never blocks, and releasing the
        # GIL around it (CDLL's way) costs more than the call and lets
        # another thread (a worker's queue feeder) take the GIL in between.
        # Starting and stopping a session write files and join a thread, so
        # those release it.
        hot = ctypes.PyDLL(lib._name)
        per_element = {"pipetune_produced", "pipetune_consumed", "pipetune_work", "pipetune_element",
                       "pipetune_wait_input", "pipetune_consumer_step"}
        for name, (restype, argtypes) in signatures.items():
            function = getattr(hot if name in per_element else lib, name)
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, name[len("pipetune_"):], function)
        self.lib = lib
        self.hot = hot

    def start(self, path, name, config_json, interval_ms, spans_per_second=None):
        options = _Options()
        self.session_options_init(ctypes.byref(options))
        if spans_per_second is not None:
            options.spans_per_stage_per_second = spans_per_second
        options.path = path.encode()
        options.pipeline_name = name.encode()
        options.config_json = config_json.encode()
        options.snapshot_interval_ms = interval_ms
        if self.trace_start(ctypes.byref(options)) != 0:
            raise OSError("pipetune tracer: %s" % self.trace_last_error().decode(errors="replace"))

    def stop(self):
        if self.trace_stop() != 0:
            raise OSError("pipetune tracer: %s" % self.trace_last_error().decode(errors="replace"))

    def set_info(self, name, config_json):
        self.trace_set_pipeline_info(name.encode(), config_json.encode())


_shared = []


def shared():
    """The process's binding, made once (about 1.6 ms of CPU: the library's
    load and each function's signature) and kept across fork(), so that a
    DataLoader worker forked from a traced program starts its session
    without making it again (docs/benchmarks-pytorch.md)."""
    if not _shared:
        _shared.append(Tracer())
    return _shared[0]
