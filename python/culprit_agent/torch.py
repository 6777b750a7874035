"""Monitor: a PyTorch training loop's iterations as culprit phases, attached in two lines.

    mon = Monitor(model, optimizer, loader, server="culprit:7433", job="my-job")
    for x, y in loader: ...                 # unchanged; mon.close() at the end (or at exit)

Per iteration (one optimizer step) it records:
  data_wait  host     time blocked in the data loader's next()
  forward    compute  the model's forward (all micro-batches of the step summed)
  backward   compute  from the end of forward to the last gradient bucket ready (DDP), or to
                      the optimizer step
  allreduce  comm dp  DDP's gradient all-reduce (a communication hook around DDP's own),
                      from the first bucket launched to the last one done; without DDP, the
                      time in torch.distributed collectives called by the loop
  optimizer  compute  optimizer.step()
An iteration runs from the end of the previous one to the end of its optimizer step.

On CPU, times are read from the monotonic clock. On GPU, forward, backward and optimizer are
CUDA events recorded on the current stream and read one iteration late (no synchronisation
on the hot path); an iteration goes to culpritd when the next one ends.

Every `profile_every` iterations (0: never) torch.profiler runs for one iteration and its
operators (ATen operators on CPU, kernels on GPU) are summarised per name into the
library's sketches and sent with that iteration.

On a capture (POST /api/v1/jobs/{job}/capture, a Command CAPTURE for this rank, read at every
iteration's end) torch.profiler runs for the next `iterations` iterations, and their raw
executions go to culpritd as well (Batch.raw_kernels): on GPU every kernel with its stream, on
CPU every top-level ATen operator (stream 0), at most the capture's max_events in all.
"""
import threading
import time

import torch
import torch.distributed as dist

from .agent import Agent, _guarded

_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier")


def _now_us():
    return time.perf_counter_ns() // 1000


def _rank_world():
    """torch.distributed's rank and world once initialised, else None (the launcher's)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None, None


class _Step:
    """What one iteration measured: marks are host µs, or CUDA events on GPU."""

    def __init__(self, i, t0):
        self.i, self.t0, self.ref = i, t0, None
        self.spans = {}   # name -> [kind, group, first start mark, total µs or [(start, end) marks]]
        self.comm = None  # [first launch, last done] (host µs)
        self.kernels = None
        self.raw = None
        self.end = None


class Monitor:
    """Times model, optimizer and data loader of one rank and streams them through an Agent.

    server, job: culpritd's "host:port" (default $CULPRIT_SERVER) and the job name (default:
    the launcher's, culprit_agent.identity). Rank and world come from torch.distributed, else
    the launcher; layout= (Megatron's parallel_state or a DeviceMesh), or tp, pp, dp, ep, cp
    and order, describe a job that is not plain data parallel. Other keyword arguments go to
    Agent. Errors are logged once and never raised."""

    def __init__(self, model, optimizer, dataloader=None, *, server=None, job=None, agent=None, profile_every=100,
                 start_iteration=0, **agent_args):
        self.agent = agent
        self.i = int(start_iteration)
        self.profile_every = int(profile_every)
        self._lock = threading.Lock()
        self._cur = None
        self._pending = None   # GPU: the previous step, its events not read yet
        self._last_end = None
        self._fwd0 = None
        self._prof = None
        self._capture = None    # [command id, first iteration, end iteration, events left]
        self._capture_id = None
        self.raw_kernels_sent = 0
        self._hooks = []
        self._wrapped = []
        self._cuda = False
        self._fwd_end = self._bwd_end = self._opt0 = None
        try:
            self._attach(model, optimizer, dataloader, server, job, agent_args)
        except Exception as e:
            (self.agent._error if self.agent else _print_error)("Monitor", e)

    # --- attaching -------------------------------------------------------------------------
    def _attach(self, model, optimizer, dataloader, server, job, agent_args):
        p = next(iter(model.parameters()), None)
        self._cuda = p is not None and p.is_cuda
        if self.agent is None:
            rank, world = _rank_world()
            args = dict(agent_args)
            args.setdefault("device", "gpu" if self._cuda else "cpu")  # what the actions speak of
            self.agent = Agent(server, job, rank, world, **args)
        self._hooks.append(model.register_forward_pre_hook(self._forward_pre))
        self._hooks.append(model.register_forward_hook(self._forward_post))
        step = optimizer.step

        def timed_step(*args, **kw):
            self._step_begin()
            try:
                return step(*args, **kw)
            finally:
                self._step_end()
        optimizer.step = timed_step
        self._wrapped.append((optimizer, "step", None))
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            try:
                self._ddp_hook(model)
            except Exception as e:  # a hook of the user's own: keep it
                self.agent._error("DDP communication hook", e)
        elif dist.is_available():
            self._wrap_collectives()
        if dataloader is not None:
            self._wrap_loader(dataloader)

    def _ddp_hook(self, model):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        def hook(state, bucket):
            self._comm_mark(launch=True)
            return default_hooks.allreduce_hook(state, bucket).then(self._comm_done)
        model.register_comm_hook(None, hook)

    def _comm_done(self, fut):
        self._comm_mark(launch=False)
        return fut.value()

    def _wrap_collectives(self):
        for name in _COLLECTIVES:
            f = getattr(dist, name, None)
            if f is None:
                continue

            def timed(*args, _f=f, **kw):
                if kw.get("async_op"):
                    return _f(*args, **kw)
                self._comm_mark(launch=True)
                try:
                    return _f(*args, **kw)
                finally:
                    self._comm_mark(launch=False)
            setattr(dist, name, timed)
            self._wrapped.append((dist, name, f))

    def _wrap_loader(self, loader):
        """Times next() on the loader's iterators: its class becomes a subclass whose
        __iter__ wraps the iterator."""
        mon, base = self, type(loader)

        class Timed(base):
            def __iter__(self):
                return mon.wrap(base.__iter__(self))
        Timed.__name__ = base.__name__
        loader.__class__ = Timed

    def wrap(self, iterable):
        """Iterates iterable, timing each next() as this rank's data wait."""
        it = iter(iterable)
        while True:
            t0 = _now_us()
            try:
                item = next(it)
            except StopIteration:
                return
            self._span("data_wait", "host", None, t0, _now_us())
            yield item

    # --- the hot path ----------------------------------------------------------------------
    def _open(self, t=None):
        """The current step, opened at the end of the previous one."""
        if self._cur is None:
            t0 = self._last_end if self._last_end is not None else (t if t is not None else _now_us())
            self._cur = _Step(self.i, t0)
            if self._cuda:
                self._cur.ref = self._event()
            if self.profile_every and self.i % self.profile_every == 0 and self.i > 0 or self._capturing(self.i):
                self._profile_start()
        return self._cur

    def _event(self):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def _mark(self):
        return self._event() if self._cuda else _now_us()

    def _span(self, name, kind, group, start, end):
        """Adds start..end to the step's phase name (summed over micro-batches)."""
        with self._lock:
            s = self._open(None if self._cuda else start)
            sp = s.spans.get(name)
            if sp is None:
                s.spans[name] = sp = [kind, group, start, [] if self._cuda else 0]
            if self._cuda:
                sp[3].append((start, end))
            else:
                sp[3] += max(0, end - start)

    def _forward_pre(self, module, inputs):
        try:
            with self._lock:
                self._open()
            self._fwd0 = self._mark()
        except Exception as e:
            self.agent._error("forward", e)

    def _forward_post(self, module, inputs, output):
        try:
            t = self._mark()
            if self._fwd0 is not None:
                self._span("forward", "compute", None, self._fwd0, t)
            self._fwd0 = None
            self._fwd_end = t
            self._bwd_end = None
        except Exception as e:
            self.agent._error("forward", e)

    def _comm_mark(self, launch):
        try:
            t = _now_us()
            with self._lock:
                s = self._open()
                if launch:
                    if s.comm is None:
                        s.comm = [t, t]
                    if self._fwd_end is not None:
                        self._bwd_end = self._mark()  # the last bucket ready ends backward
                else:
                    s.comm[1] = max(s.comm[1], t)
        except Exception as e:
            self.agent._error("allreduce", e)

    def _step_begin(self):
        try:
            t = self._mark()
            fwd_end = self._fwd_end
            if fwd_end is not None:
                self._span("backward", "compute", None, fwd_end, self._bwd_end if self._bwd_end is not None else t)
            self._fwd_end = self._bwd_end = None
            self._opt0 = t
        except Exception as e:
            self.agent._error("step", e)

    def _step_end(self):
        try:
            t = self._mark()
            self._span("optimizer", "compute", None, self._opt0, t)
            with self._lock:
                s, self._cur = self._open(), None
            s.end = _now_us()
            if self._prof is not None:
                s.kernels, s.raw = self._profile_stop(s.i, self._capturing(s.i))
            self._last_end = s.end
            self.i += 1
            self._poll_command()
            if self._cuda:
                prev, self._pending = self._pending, s
                if prev is not None:
                    self._send(prev)
            else:
                self._send(s)
        except Exception as e:
            self.agent._error("step", e)

    # --- sending ---------------------------------------------------------------------------
    def _us(self, s, mark):
        """A mark as host µs: CUDA events relative to the step's reference event."""
        if isinstance(mark, int):
            return mark
        return s.t0 + int(s.ref.elapsed_time(mark) * 1000)

    def _send(self, s):
        a = self.agent
        a.begin_iteration(s.i, start_us=s.t0)
        for name, (kind, group, first, total) in s.spans.items():
            if isinstance(total, list):  # CUDA events, read now (the step before the last)
                if not isinstance(total[-1][1], int):
                    total[-1][1].synchronize()
                dur = sum(self._us(s, e) - self._us(s, b) for b, e in total)
            else:
                dur = total
            a.add_phase(name, kind, dur, start_us=self._us(s, first), group=group)
        if s.comm is not None:
            a.add_phase("allreduce", "comm", s.comm[1] - s.comm[0], start_us=s.comm[0], group="dp")
        for name, (kind, durs) in (s.kernels or {}).items():
            a.add_kernel_summary(name, durs, kind=kind)
        a.end_iteration(end_us=s.end)
        if s.raw:
            a.add_raw_kernels(s.raw)
            self.raw_kernels_sent += len(s.raw)

    # --- kernel summaries ------------------------------------------------------------------
    def _profile_start(self):
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self._cuda else [])
        self._prof = profile(activities=acts)
        self._prof.__enter__()

    def _profile_stop(self, i, capture):
        """The profiled iteration's summaries {name: (kind, [µs])} and, when captured, its raw
        executions (for Agent.add_raw_kernels, within the capture's budget)."""
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        out, raw = {}, []
        for name, kind, stream, start, dur in self._executions(prof):
            out.setdefault(name, (kind, []))[1].append(dur)
            raw.append((i, name, kind, stream, start, dur))
        if not capture:
            return out, None
        raw = raw[:self._capture[3]]
        self._capture[3] -= len(raw)
        return out, raw

    def _executions(self, prof):
        """(name, kind, stream, start µs since the epoch, µs) of what ran: GPU kernels, or the
        top-level ATen operators on CPU."""
        if self._cuda:
            from torch.autograd import DeviceType
            for e in prof.profiler.kineto_results.events():
                if e.device_type() == DeviceType.CUDA:
                    name = e.name()[:255]
                    yield (name, "comm" if "nccl" in name.lower() else "compute", e.device_resource_id(),
                           e.start_us(), e.duration_us())
            return
        t0 = prof.profiler.kineto_results.trace_start_us()  # events are relative to it
        for ev in prof.events():
            if ev.cpu_parent is None and ev.name.startswith("aten::"):
                yield ev.name[:255], "compute", 0, t0 + int(ev.time_range.start), int(ev.cpu_time_total)

    # --- on-demand capture -----------------------------------------------------------------
    def _poll_command(self):
        """At an iteration's end: a capture Command for this rank not acted on yet profiles
        the next `iterations` iterations."""
        c = self.agent.command()
        if not c or c["id"] == self._capture_id or c["kind"] != "capture":
            return
        self._capture_id = c["id"]
        if self.agent.rank in c["ranks"] and c["iterations"] > 0:
            self._capture = [c["id"], self.i, self.i + c["iterations"], c["max_events"]]

    def _capturing(self, i):
        c = self._capture
        return c is not None and c[1] <= i < c[2] and c[3] > 0

    @property
    def capturing(self):
        """True from a capture's Command until its last iteration is profiled."""
        c = self._capture
        return c is not None and self.i < c[2] and c[3] > 0

    # --- the end ---------------------------------------------------------------------------
    @_guarded
    def close(self, timeout_s=10.0):
        """Sends the last step (GPU), detaches, and closes the agent."""
        if self._pending is not None:
            p, self._pending = self._pending, None
            self._send(p)
        for h in self._hooks:
            h.remove()
        for obj, name, f in self._wrapped:
            if f is not None:
                setattr(obj, name, f)
            else:
                obj.__dict__.pop(name, None)
        self._hooks, self._wrapped = [], []
        return self.agent.close(timeout_s)

    def _error(self, where, e):  # for @_guarded
        self.agent._error(where, e)


def _print_error(where, e):
    import logging
    logging.getLogger("culprit_agent").error("culprit agent: %s: %s", where, e)
