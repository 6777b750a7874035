"""A small data-parallel job (gloo, CPU) with culprit_agent.torch.Monitor attached; run by
test_torch_job under python3 -m torch.distributed.run.

    train.py [--server HOST:PORT] [--job JOB] --steps N [--slow-rank R --slow-from I]
             [--loader-sleep-rank R --loader-sleep-from I --loader-sleep-ms MS] [--until-captured]
             [--kineto DIR] [--slurm]

Without --server and --job, Monitor takes them from $CULPRIT_SERVER and the launcher
(culprit_agent.identity). --slurm: the process group from Slurm's variables as srun sets
them (SLURM_PROCID, SLURM_NTASKS; MASTER_ADDR and MASTER_PORT given), not torchrun's.

The model is a small MLP followed by an accelerator stand-in: an autograd function that
waits --device-ms in forward and twice that in backward, as a rank waits on its GPU. On a
2-core machine shared with other work, CPU compute times of 6 processes swing by 2-3x from
one step to the next; time spent waiting does not. --slow-rank: that rank computes its
forward and backward three times (the MLP and the device) from iteration --slow-from on. --loader-sleep-rank: that rank's data loader sleeps before every
batch from --loader-sleep-from on. --until-captured: the job stops (at most --steps) at the
end of the first step after which some rank has sent the raw kernels of a capture and
finished it (an all_reduce of that flag each step keeps the ranks in step). --kineto: each
rank's torch.profiler writes its own Kineto trace of the 20 steps around --slow-from into DIR
(tensorboard_trace_handler, one file per rank; ProfilerStep#N is iteration N)."""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn

from culprit_agent.torch import Monitor

p = argparse.ArgumentParser()
p.add_argument("--server")
p.add_argument("--job")
p.add_argument("--slurm", action="store_true")
p.add_argument("--steps", type=int, default=100)
p.add_argument("--width", type=int, default=64)
p.add_argument("--device-ms", type=float, default=25)
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--slow-from", type=int, default=40)
p.add_argument("--loader-sleep-rank", type=int, default=-1)
p.add_argument("--loader-sleep-from", type=int, default=40)
p.add_argument("--loader-sleep-ms", type=float, default=60)
p.add_argument("--until-captured", action="store_true")
p.add_argument("--kineto")
args = p.parse_args()

torch.set_num_threads(1)
if args.slurm:
    dist.init_process_group("gloo", rank=int(os.environ["SLURM_PROCID"]), world_size=int(os.environ["SLURM_NTASKS"]))
else:
    dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)


class Batches(torch.utils.data.Dataset):
    """Batch i of this rank (random data); sleeps first on the sleeping rank."""

    def __len__(self):
        return args.steps

    def __getitem__(self, i):
        if rank == args.loader_sleep_rank and i >= args.loader_sleep_from:
            time.sleep(args.loader_sleep_ms / 1000)
        g = torch.Generator().manual_seed(i * 1000 + rank)
        return torch.randn(32, args.width, generator=g), torch.randint(0, 10, (32,), generator=g)


class Device(torch.autograd.Function):
    """Waits as a GPU kernel would take: ms in forward, 2 ms in backward."""

    @staticmethod
    def forward(ctx, x, ms):
        ctx.ms = ms
        time.sleep(ms / 1000)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        time.sleep(2 * ctx.ms / 1000)
        return g, None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, args.width),
                                  nn.ReLU(), nn.Linear(args.width, 10))
        self.repeat = 1

    def forward(self, x):
        # the slow rank computes the same thing three times (same value, three times the work)
        return sum(Device.apply(self.body(x), args.device_ms) for _ in range(self.repeat)) / self.repeat


net = Net()
model = nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(Batches(), batch_size=None)
mon = Monitor(model, opt, loader, server=args.server, job=args.job, profile_every=0)

prof = None
if args.kineto:
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    first = max(1, args.slow_from - 10)
    prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=first - 1, warmup=1, active=20, repeat=1),
                   on_trace_ready=tensorboard_trace_handler(args.kineto, worker_name=f"rank{rank}"))
    prof.start()

for i, (x, y) in enumerate(loader):
    if rank == args.slow_rank and i >= args.slow_from:
        net.repeat = 3
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if prof is not None:
        prof.step()
    if args.until_captured:
        done = torch.tensor([float(mon.raw_kernels_sent > 0 and not mon.capturing)])
        dist.all_reduce(done, op=dist.ReduceOp.MAX)
        if done.item():
            break

if prof is not None:
    prof.stop()
ok = mon.close(timeout_s=30)
st = mon.agent.stats()
print(f"rank {rank}: {st['records_appended']} records, {st['records_dropped']} dropped, "
      f"{st['errors']} errors, {mon.raw_kernels_sent} raw kernels, acknowledged: {ok}", flush=True)
dist.destroy_process_group()
# out without the interpreter's teardown: torch 1.13's gloo threads sometimes end it in
# std::terminate ("terminate called without an active exception", SIGABRT) after all is done
os._exit(0 if ok and st["errors"] == 0 else 1)
