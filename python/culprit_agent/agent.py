"""Agent: one rank's timings to culpritd, through the C agent library.

Nothing here blocks or raises into the training loop: records go into the library's
bounded buffer without waiting (append_timeout_ms = AGENT_NO_WAIT); while culpritd is away
the library keeps them and resends, and counts what its bound makes it drop
(stats()["records_dropped"]). An error in this package is logged once (per call and
error type) on the "culprit_agent" logger and counted (stats()["errors"]); an agent that
could not start (a bad configuration, no job name) says so once and does nothing. A library
that does not load fails the import of culprit_agent itself.
"""
import atexit
import ctypes
import functools
import logging
import os
import threading
import time
import weakref

from . import _lib, identity, layout as _layout

log = logging.getLogger("culprit_agent")

# close() waits at most this long for acknowledgements when culpritd is not connected
CLOSE_DISCONNECTED_S = 1.0


def _now_us():
    return time.perf_counter_ns() // 1000


def _kind(kind):
    if kind not in _lib.KINDS:
        raise ValueError(f"unknown kind {kind!r} (compute, comm, host, mixed)")
    return _lib.KINDS[kind]


def _group(group):
    if group not in _lib.GROUPS:
        raise ValueError(f"unknown group {group!r} (tp, cp, ep, dp, pp)")
    return _lib.GROUPS[group]


def _guarded(f):
    """Runs f; an exception is logged once per (call, type), counted, and swallowed."""
    @functools.wraps(f)
    def run(self, *args, **kw):
        try:
            return f(self, *args, **kw)
        except Exception as e:  # never into the training loop
            self._error(f.__name__, e)
            return None
    return run


class _PhaseTimer:
    """A phase timed on the host's monotonic clock: `with agent.phase(...)`, or start()/end()."""
    __slots__ = ("_agent", "_name", "_kind", "_group", "_t0")

    def __init__(self, agent, name, kind, group):
        self._agent, self._name, self._kind, self._group, self._t0 = agent, name, kind, group, None

    def start(self):
        self._t0 = _now_us()
        return self

    def end(self):
        if self._t0 is not None:
            t1 = _now_us()
            self._agent.add_phase(self._name, self._kind, t1 - self._t0, start_us=self._t0, group=self._group)
            self._t0 = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.end()
        return False


def _resolve_layout(layout):
    """layout: None, a dict of tp/cp/ep/dp/pp/order, Megatron's parallel_state, or a DeviceMesh."""
    if layout is None or isinstance(layout, dict):
        return dict(layout or {})
    if hasattr(layout, "mesh_dim_names"):
        return _layout.from_device_mesh(layout)
    if hasattr(layout, "get_tensor_model_parallel_world_size"):
        return _layout.from_megatron(layout)
    raise ValueError(f"layout: a dict, Megatron's parallel_state or a DeviceMesh, not {type(layout).__name__}")


class Agent:
    """The agent of one rank of job `job` (a world of `world` ranks).

    job, rank, world and host default to what the launcher says (identity.py: Slurm,
    torchrun, MPI, Kubernetes; docs/agent.md, "Identity"). tp, pp, dp, ep, cp and order
    describe the parallelism (Megatron's convention, default order "tp-cp-ep-dp-pp"), or
    layout= hands over Megatron's parallel_state or a DeviceMesh; by default the job is data
    parallel (dp = world / (tp cp pp)). server is "host:port" (default $CULPRIT_SERVER); token
    defaults to $CULPRIT_TOKEN; tls_ca (a PEM file) turns TLS on, and tls=True with the
    system's CAs.
    """

    def __init__(self, server=None, job=None, rank=None, world=None, *, tp=1, pp=1, dp=None, ep=1, cp=1, order=None,
                 layout=None, token=None, tls_ca=None, tls=False, host=None, agent_id=None, gpus_per_node=None,
                 flush_interval_ms=0, max_unacked_bytes=0, device=None):
        self._a = None
        self._lib = None
        self._lock = threading.Lock()
        self._complained = set()
        self._errors = 0
        self._names = {}
        self._iter = None
        self._t0 = 0
        self._phases = []
        self._kernels = []
        self._ks = None
        self._final = {}
        self.rank, self.world, self.job, self.host = int(rank or 0), int(world or 1), job, host
        self.identity, self.sources = {}, {}
        try:
            self.identity, self.sources = identity.identity(job=job, rank=rank, world=world, node=host)
            ident = self.identity
            self.rank, self.world, self.job, self.host = ident["rank"], ident["world"], ident["job"], ident["node"]
            if gpus_per_node is None:
                gpus_per_node = ident["local_world"]
            lay = dict(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, order=order)
            lay.update(_resolve_layout(layout))
            self._start(server or os.environ.get("CULPRIT_SERVER"), self.job, lay["tp"], lay["pp"], lay["dp"],
                        lay["ep"], lay["cp"], lay["order"], token, tls_ca, tls, self.host, agent_id, gpus_per_node,
                        flush_interval_ms, max_unacked_bytes, device)
        except Exception as e:
            self._error("Agent", e)

    def _start(self, server, job, tp, pp, dp, ep, cp, order, token, tls_ca, tls, host, agent_id, gpus_per_node,
               flush_interval_ms, max_unacked_bytes, device):
        if not server:
            raise ValueError("no culpritd address: give server= or set $CULPRIT_SERVER")
        if not job:
            raise ValueError("no job name: give job=, or set $CULPRIT_JOB (no launcher variable names one)")
        if dp is None:
            dp = self.world // max(1, tp * cp * pp)
        self._lib = _lib.load()
        enc = lambda s: s.encode() if s is not None else None
        self._ranks = (_lib.u32 * 1)(self.rank)
        cfg = _lib.Config()
        cfg.server, cfg.job = enc(server), enc(job)
        cfg.topo = _lib.Topology(self.world, tp, cp, pp, dp, ep, gpus_per_node, enc(order), enc(device))
        cfg.agent_id = enc(agent_id or f"{host}/rank-{self.rank}")
        cfg.host = enc(host)
        cfg.ranks, cfg.n_ranks = self._ranks, 1
        cfg.token = enc(token)
        cfg.tls, cfg.tls_ca = bool(tls or tls_ca), enc(tls_ca)
        cfg.flush_interval_ms, cfg.max_unacked_bytes = flush_interval_ms, max_unacked_bytes
        cfg.append_timeout_ms = _lib.NO_WAIT
        a = self._lib.agent_new(ctypes.byref(cfg))
        if not a:
            raise ValueError("agent_new refused the configuration (see the line above)")
        self._a = a
        atexit.register(_close_at_exit, weakref.ref(self))

    def _error(self, where, e):
        with self._lock:
            self._errors += 1
            key = (where, type(e))
            if key in self._complained:
                return
            self._complained.add(key)
        log.error("culprit agent: %s: %s (counted, logged once)", where, e)

    @property
    def enabled(self):
        """False when the agent could not start: every call then does nothing."""
        return self._a is not None

    def _name(self, name):
        i = self._names.get(name)
        if i is None:
            i = self._lib.agent_intern(self._a, name.encode())
            if i < 0:
                raise ValueError(f"name {name!r} refused (empty, over 255 bytes, or too many names)")
            self._names[name] = i
        return i

    @_guarded
    def begin_iteration(self, i, start_us=None):
        """Starts iteration i (now, or at start_us on the monotonic clock of phase())."""
        with self._lock:
            self._iter = int(i)
            self._t0 = _now_us() if start_us is None else int(start_us)
            self._wall0 = time.time_ns() // 1000 - (_now_us() - self._t0)
            self._phases, self._kernels = [], []

    def phase(self, name, kind="compute", group=None):
        """A phase of the current iteration: `with agent.phase("forward", "compute"):`, or
        `p = agent.phase(...); p.start(); ...; p.end()`. kind: compute, comm, host; group
        (a collective's): tp, cp, ep, dp, pp."""
        return _PhaseTimer(self, name, kind, group)

    @_guarded
    def add_phase(self, name, kind, dur_us, start_us=None, group=None):
        """A phase timed elsewhere: dur_us long, starting at start_us on the monotonic clock
        (time.perf_counter_ns() // 1000), or with no start."""
        if self._a is None:
            return
        rec = (self._name(name), _kind(kind), _group(group), start_us, int(dur_us))
        with self._lock:
            if self._iter is not None:
                self._phases.append(rec)

    @_guarded
    def add_kernel_summary(self, name, durations_us, kind="compute"):
        """The calls of one kernel (or operator) name in the current iteration: their
        durations in microseconds, summarised into a sketch by the library."""
        if self._a is None or not durations_us:
            return
        n = len(durations_us)
        durs = (_lib.i64 * n)(*[max(0, int(d)) for d in durations_us])
        k = _lib.Kernel(rank=self.rank, name=self._name(name), kind=_kind(kind))
        why = _lib.c_char_p()
        with self._lock:
            if self._iter is None:
                return
            if self._ks is None:
                self._ks = self._lib.kernel_summary_create()
            if self._lib.kernel_summary_make(self._ks, ctypes.byref(k), durs, n, ctypes.byref(why)) != 0:
                raise ValueError(f"kernel summary of {name!r}: {why.value.decode()}")
            if k.sketch_len:
                buf = (_lib.u8 * k.sketch_len).from_buffer_copy(ctypes.string_at(k.sketch, k.sketch_len))
                k.sketch = ctypes.cast(buf, ctypes.POINTER(_lib.u8))
            else:
                buf = None
            self._kernels.append((k, buf))

    @_guarded
    def end_iteration(self, end_us=None):
        """Ends the current iteration (now, or at end_us) and hands it with its phases and
        kernels to the library, which sends it in the background."""
        if self._a is None:
            return
        t1 = _now_us() if end_us is None else int(end_us)
        with self._lock:
            if self._iter is None:
                return
            i, t0, wall0, phases, kernels = self._iter, self._t0, self._wall0, self._phases, self._kernels
            self._iter, self._phases, self._kernels = None, [], []
        it = _lib.Iter(self.rank, i, wall0, max(0, t1 - t0))
        ph = (_lib.Phase * max(1, len(phases)))()
        for j, (name, kind, group, start, dur) in enumerate(phases):
            ph[j] = _lib.Phase(self.rank, i, name, kind, group,
                               _lib.NO_START if start is None else max(0, start - t0), max(0, dur))
        ks = (_lib.Kernel * max(1, len(kernels)))()
        for j, (k, _buf) in enumerate(kernels):
            k.iter = i
            ks[j] = k
        rc = self._lib.agent_add_iteration(self._a, ctypes.byref(it), ph, len(phases), ks, len(kernels))
        if rc not in (_lib.OK, _lib.EFULL):  # EFULL: the library counted the drop
            raise ValueError(f"iteration {i} refused: {self._lib.agent_strerror(rc).decode()}")

    @_guarded
    def command(self):
        """The latest Command culpritd sent (docs/protocol.md, "Command"), or None: a dict with
        id, kind ("capture"), ranks, iterations and max_events. It stays the latest until the
        next one: act on an id once."""
        if self._a is None:
            return None
        c = _lib.Command()
        if not self._lib.agent_command(self._a, ctypes.byref(c)):
            return None
        try:
            ranks = [c.ranks[i] for i in range(c.n_ranks)]
        finally:
            self._lib.free(c.ranks)
        return {"id": c.id, "kind": "capture" if c.kind == _lib.CAPTURE else c.kind, "ranks": ranks,
                "iterations": c.iterations, "max_events": c.max_events}

    @_guarded
    def add_raw_kernels(self, kernels):
        """Raw kernel executions of a capture: (iteration, name, kind, stream, start_us, dur_us)
        tuples of this rank, start_us in microseconds since the epoch. Sent with the next batch."""
        if self._a is None or not kernels:
            return
        rk = (_lib.RawKernel * len(kernels))()
        for j, (i, name, kind, stream, start, dur) in enumerate(kernels):
            rk[j] = _lib.RawKernel(self.rank, int(i), self._name(name), _kind(kind), int(stream), int(start),
                                   max(0, int(dur)))
        rc = self._lib.agent_add_raw_kernels(self._a, rk, len(kernels))
        if rc not in (_lib.OK, _lib.EFULL):
            raise ValueError(f"raw kernels refused: {self._lib.agent_strerror(rc).decode()}")

    @_guarded
    def flush(self, timeout_s=10.0):
        """Waits until everything handed over so far is acknowledged; True when it was."""
        if self._a is None:
            return False
        return self._lib.agent_flush(self._a, int(timeout_s * 1000)) == 0

    def stats(self):
        """The library's counters (agent_stats) and this package's errors."""
        out = dict(self._final)
        out["errors"] = self._errors
        if self._a is not None:
            st = _lib.Stats()
            self._lib.agent_get_stats(self._a, ctypes.byref(st))
            out.update({n: getattr(st, n) for n, _ in _lib.Stats._fields_})
        return out

    @_guarded
    def close(self, timeout_s=10.0):
        """Waits for everything handed over to be acknowledged, says Goodbye, frees the agent;
        True when everything was acknowledged. Returns within timeout_s, and within
        CLOSE_DISCONNECTED_S (1 s) when culpritd is not connected: a culpritd that is down
        does not hold up the job's exit. stats() keeps the last counters."""
        with self._lock:
            a = self._a
        if a is None:
            return False
        if not self.stats().get("connected"):
            timeout_s = min(timeout_s, CLOSE_DISCONNECTED_S)
        ok = self._lib.agent_flush(a, int(timeout_s * 1000)) == 0
        self._final = self.stats()
        with self._lock:
            self._a = None
            ks, self._ks = self._ks, None
        ok = self._lib.agent_close(a, 0) == 0 and ok
        self._lib.kernel_summary_destroy(ks)
        return ok

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _close_at_exit(ref):
    a = ref()
    if a is not None:
        a.close(timeout_s=5.0)
