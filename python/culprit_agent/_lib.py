"""The agent library (libculprit_agent, agent/agent.h) through ctypes.

Found, in this order: $CULPRIT_AGENT_LIB (a path: only that one is tried); the library
beside this file (the wheel carries it there); where `cmake --install` put it
(_location.py, written at install); the system's loader (ld.so.conf, $LD_LIBRARY_PATH);
the build trees of a source checkout this package sits in (build/*/agent/). When none
loads, load() raises naming every path it tried and why each failed.
"""
import ctypes
import glob
import os

u8, u32, i32, i64, u64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
size_t, c_char_p, c_void_p, c_bool = ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_bool

OK, EFULL, EINVAL, ETIMEDOUT, ENOMEM = 0, -1, -2, -3, -4
NO_WAIT = -2
NO_START = -(1 << 63)  # RECORD_NO_START

KINDS = {"compute": 0, "comm": 1, "host": 2, "mixed": 3}
GROUPS = {None: 0, "": 0, "none": 0, "tp": 1, "cp": 2, "ep": 3, "dp": 4, "pp": 5}


class Topology(ctypes.Structure):
    _fields_ = [("world", u32), ("tp", u32), ("cp", u32), ("pp", u32), ("dp", u32), ("ep", u32),
                ("gpus_per_node", u32), ("order", c_char_p), ("device", c_char_p)]


class Config(ctypes.Structure):
    _fields_ = [("server", c_char_p), ("job", c_char_p), ("topo", Topology), ("agent_id", c_char_p),
                ("host", c_char_p), ("ranks", ctypes.POINTER(u32)), ("n_ranks", size_t),
                ("token", c_char_p), ("tls", c_bool), ("tls_ca", c_char_p),
                ("flush_interval_ms", u32), ("max_batch_records", u32), ("max_unacked_bytes", size_t),
                ("append_timeout_ms", ctypes.c_int), ("backoff_min_ms", u32), ("backoff_max_ms", u32),
                ("heartbeat_ms", u32), ("give_up_refused", u32), ("loop", c_void_p), ("log", c_void_p),
                ("log_arg", c_void_p)]


class Iter(ctypes.Structure):
    _fields_ = [("rank", u32), ("iter", u32), ("start_us", i64), ("dur_us", i64)]


class Phase(ctypes.Structure):
    _fields_ = [("rank", u32), ("iter", u32), ("name", u32), ("kind", u8), ("group", u8),
                ("start_us", i64), ("dur_us", i64)]


class Kernel(ctypes.Structure):
    _fields_ = [("rank", u32), ("iter", u32), ("name", u32), ("kind", u8), ("count", u32),
                ("sum_us", i64), ("min_us", i64), ("max_us", i64), ("p50_us", i64), ("p99_us", i64),
                ("sketch", ctypes.POINTER(u8)), ("sketch_len", u32)]


class RawKernel(ctypes.Structure):
    _fields_ = [("rank", u32), ("iter", u32), ("name", u32), ("kind", u8), ("stream", u32), ("start_us", i64),
                ("dur_us", i64)]


class Command(ctypes.Structure):
    _fields_ = [("id", u64), ("kind", u32), ("iterations", u32), ("max_events", u32), ("n_ranks", size_t),
                ("ranks", ctypes.POINTER(u32))]


CAPTURE = 1  # Command.kind


class Stats(ctypes.Structure):
    _fields_ = [(n, u64) for n in ("records_appended", "records_dropped", "records_rejected",
                                   "batches_sealed", "batches_acked", "batches_rejected", "batches_sent",
                                   "batches_resent", "connects", "disconnects", "durable_seq", "next_seq")] + \
               [("unacked_bytes", size_t), ("unacked_batches", size_t), ("connected", c_bool),
                ("refused", c_bool), ("refusal", ctypes.c_char * 200)]


def _candidates():
    env = os.environ.get("CULPRIT_AGENT_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libculprit_agent.so.0")
    try:
        from ._location import LIBRARY
        yield LIBRARY
    except ImportError:
        pass
    yield "libculprit_agent.so.0"
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    yield from sorted(glob.glob(os.path.join(top, "build", "*", "agent", "libculprit_agent.so.0")))


_loaded = None


def load():
    """The library with its prototypes set (loaded once), or raises OSError naming every
    path tried and why it failed."""
    global _loaded
    if _loaded is None:
        _loaded = _load()
    return _loaded


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append(f"{path}: {e}")
    else:
        raise OSError("could not load the agent library libculprit_agent; tried:\n  " + "\n  ".join(tried) +
                      "\n(install the culprit-agent wheel, which carries it, or set CULPRIT_AGENT_LIB to its path;"
                      " docs/agent.md, \"Installing\")")
    P = ctypes.POINTER
    protos = {
        "agent_new": (c_void_p, [P(Config)]),
        "agent_intern": (i32, [c_void_p, c_char_p]),
        "agent_add_iteration": (ctypes.c_int, [c_void_p, P(Iter), P(Phase), size_t, P(Kernel), size_t]),
        "agent_flush": (ctypes.c_int, [c_void_p, ctypes.c_int]),
        "agent_close": (ctypes.c_int, [c_void_p, ctypes.c_int]),
        "agent_get_stats": (None, [c_void_p, P(Stats)]),
        "agent_add_raw_kernels": (ctypes.c_int, [c_void_p, P(RawKernel), size_t]),
        "agent_command": (c_bool, [c_void_p, P(Command)]),
        "agent_strerror": (c_char_p, [ctypes.c_int]),
        "kernel_summary_create": (c_void_p, []),
        "kernel_summary_destroy": (None, [c_void_p]),
        "kernel_summary_make": (ctypes.c_int, [c_void_p, P(Kernel), P(i64), size_t, P(c_char_p)]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    # the structs declared here must be the library's: a mismatch would write past them
    for name, struct in (("agent_config_size", Config), ("agent_stats_size", Stats)):
        f = getattr(lib, name)
        f.restype, f.argtypes = size_t, []
        if f() != ctypes.sizeof(struct):
            raise OSError("%s: %s is %d bytes in the library, %d here (a library of another version)"
                          % (path, struct.__name__, f(), ctypes.sizeof(struct)))
    lib.free = ctypes.CDLL(None).free  # agent_command's ranks are the caller's to free()
    lib.free.restype, lib.free.argtypes = None, [c_void_p]
    return lib
