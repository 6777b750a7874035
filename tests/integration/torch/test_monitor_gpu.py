#!/usr/bin/env python3
"""test_monitor_gpu: Monitor's GPU bookkeeping, on a machine without a GPU.

On GPU the Monitor marks forward, backward and the optimizer step with CUDA events and reads
them one iteration late, so that nothing on the training thread waits for the device. No GPU
is here, so torch.cuda.Event is replaced by a stand-in that records the host's monotonic
clock (what the CUDA runtime itself does is not tested), and the Monitor reports to a
recorder in place of the agent library. Checked:
  - iteration i is sent only once iteration i + 1 has ended, and close() sends the last one;
  - an event is synchronised only when its iteration is sent: never one of the iteration
    running (no wait on the hot path);
  - forward, backward and optimizer durations are the device stand-in's sleeps (80, 160 and
    20 ms here), their starts inside the iteration and in order, data_wait the loader's sleep;
  - no error reached the Monitor's error path.
Exit 77 (skipped, with the reason) when this python3 has no torch."""
import sys
import time

try:
    import torch
except ImportError:
    print("skipped: this python3 does not import torch (install the Debian package python3-torch)")
    sys.exit(77)

from culprit_agent.torch import Monitor

FWD_MS, OPT_MS, STEPS, LOADER_MS = 80, 20, 6, 30
mon = None
syncs = []  # (the event's iteration, the Monitor's iteration when it was read)


class HostEvent:
    """torch.cuda.Event's surface as Monitor uses it, on the host clock."""

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None
        self.i = mon.i if mon is not None else -1

    def record(self):
        self.t = time.monotonic_ns()

    def elapsed_time(self, end):  # ms from self to end, as CUDA's
        assert self.t is not None and end.t is not None
        return (end.t - self.t) / 1e6

    def synchronize(self):
        syncs.append((self.i, mon.i))


torch.cuda.Event = HostEvent


class Recorder:
    """What Monitor hands the agent library, as calls."""
    rank = 0

    def __init__(self):
        self.iters, self.cur, self.errors = [], None, []

    def begin_iteration(self, i, start_us=None):
        self.cur = {"i": i, "start": start_us, "phases": {}}

    def add_phase(self, name, kind, dur_us, start_us=None, group=None):
        self.cur["phases"][name] = (kind, dur_us, start_us)

    def add_kernel_summary(self, *a, **kw):
        pass

    def add_raw_kernels(self, raw):
        pass

    def end_iteration(self, end_us=None):
        self.cur["end"] = end_us
        self.iters.append(self.cur)

    def command(self):
        return None

    def close(self, timeout_s=10.0):
        return True

    def _error(self, where, e):
        self.errors.append((where, repr(e)))


class Device(torch.autograd.Function):
    """A kernel's time: FWD_MS in forward, twice that in backward."""

    @staticmethod
    def forward(ctx, x):
        time.sleep(FWD_MS / 1000)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        time.sleep(2 * FWD_MS / 1000)
        return g


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return Device.apply(self.lin(x))


class SlowOptimizer(torch.optim.SGD):
    def step(self, closure=None):
        time.sleep(OPT_MS / 1000)
        return super().step(closure)


def loader():
    while True:
        time.sleep(LOADER_MS / 1000)
        yield torch.randn(4, 8)


def near(got_us, want_ms, what):
    ok = want_ms * 1000 * 0.9 <= got_us <= want_ms * 1000 * 3
    assert ok, f"{what}: {got_us} µs, expected about {want_ms} ms"


model = Model()
opt = SlowOptimizer(model.parameters(), lr=0.01)
rec = Recorder()
mon = Monitor(model, opt, agent=rec, profile_every=0)
mon._cuda = True  # the parameters are on the CPU here; the events are HostEvent
data = mon.wrap(loader())

for step in range(STEPS):
    x = next(data)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    assert len(rec.iters) == step, f"after step {step}: {len(rec.iters)} iterations sent, expected {step} (one late)"
    assert all(ev_i < now for ev_i, now in syncs), f"an event read while its iteration ran: {syncs}"

mon.close()
assert [it["i"] for it in rec.iters] == list(range(STEPS)), [it["i"] for it in rec.iters]
assert not rec.errors, rec.errors
assert syncs, "no event was read"

for it in rec.iters:
    ph = it["phases"]
    for name in ("forward", "backward", "optimizer"):
        assert name in ph and ph[name][0] == "compute", (it["i"], ph)
    near(ph["forward"][1], FWD_MS, f"iteration {it['i']} forward")
    near(ph["backward"][1], 2 * FWD_MS, f"iteration {it['i']} backward")
    near(ph["optimizer"][1], OPT_MS, f"iteration {it['i']} optimizer")
    starts = [ph[n][2] for n in ("forward", "backward", "optimizer")]
    assert it["start"] <= starts[0] <= starts[1] <= starts[2] <= it["end"], (it, starts)
    assert it["end"] - it["start"] >= (3 * FWD_MS + OPT_MS) * 1000, it
    assert ph["data_wait"][0] == "host", ph
    near(ph["data_wait"][1], LOADER_MS, f"iteration {it['i']} data_wait")
print(f"test_monitor_gpu: {STEPS} iterations sent one late, {len(syncs)} events read, none while its "
      f"iteration ran; forward {rec.iters[-1]['phases']['forward'][1]} µs for {FWD_MS} ms")
