"""test_monitor_ddp: Monitor on a DDP model that has a communication hook of its own (one
gloo rank, 3 steps): the model's hook keeps running and Monitor logs no error (it registers
no communication hook; one that did failed beside the model's: DDP takes a single hook), and
every step carries the allreduce phase, timed from the first parameter's gradient. The agent
points at a port nobody listens on: its records wait in the library's buffer."""
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
from torch import nn

from culprit_agent.torch import Monitor

with tempfile.TemporaryDirectory() as tmp:
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=0, world_size=1)
    with socket.socket() as s:  # a free port, closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))
    calls = []

    def own_hook(state, bucket):
        calls.append(1)
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda f: f.value()[0])
    model.register_comm_hook(None, own_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = Monitor(model, opt, server=f"127.0.0.1:{port}", job="ddp-hook", profile_every=0)
    sent = []
    add_phase = mon.agent.add_phase
    mon.agent.add_phase = lambda name, *a, **k: (sent.append(name), add_phase(name, *a, **k))[1]
    for i in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    errors = mon.agent.stats()["errors"]
    mon.close(timeout_s=0)
    dist.destroy_process_group()
    print(f"model's hook called {len(calls)} times, Monitor errors {errors}, phases sent {sent}")
    ok = len(calls) >= 3 and errors == 0 and sent.count("allreduce") == 3 and sent.count("backward") == 3
    sys.stdout.flush()
    os._exit(0 if ok else 1)
