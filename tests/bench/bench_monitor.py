"""bench_monitor.py: what culprit_agent.torch.Monitor costs a training loop (docs/agent.md).

One process trains two identical copies of the same job, one step of each in turn, so that
every step with the Monitor has a step without it next to it, under the same load (the order
within a pair alternates): one rank of a gloo DDP job (world 1), an MLP on CPU whose step
takes about --step-ms (the batch sized before the pairs), fed by a DataLoader. Copy A has
culprit_agent.torch.Monitor attached with its defaults (profile_every 100: A's steps 100,
200, ... run torch.profiler), streaming to a culpritd started here with --storage false
(records acknowledged at once, nothing stored); copy B has nothing. A step: next() of its
loader, zero_grad, forward, backward, optimizer step. Prints the median step of each, the
median of the pairs' differences (A - B) relative to B's median, the same for the means (the
profiled steps included), and the main thread's CPU time per step of each (user + system:
the Monitor's hooks run on it; this barely depends on what else runs on the machine).

    cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2 --target culpritd culprit_agent
    /usr/bin/python3 tests/bench/bench_monitor.py [--build build/rel] [--steps 300] [--step-ms 100]

(A python3 that imports torch: Debian's python3-torch is /usr/bin/python3's.)"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


HANDED = set()


def free_port():
    """a port not handed out before here: the kernel may give one twice in a row"""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in HANDED:
            HANDED.add(port)
            return port


def start_culpritd(build, tmp):
    """culpritd without storage on free ports; its agent address."""
    aport, hport = free_port(), free_port()
    log = open(os.path.join(tmp, "culpritd.log"), "w")
    d = subprocess.Popen([os.path.join(build, "server", "culpritd"), "--storage", "false", "--data-dir", tmp,
                          "--agent-listen", f"127.0.0.1:{aport}", "--http-listen", f"127.0.0.1:{hport}",
                          "--log-level", "warning"], stdout=log, stderr=log)
    for _ in range(400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{hport}/healthz", timeout=1)
            return d, f"127.0.0.1:{aport}"
        except OSError:
            if d.poll() is not None:
                sys.exit("bench_monitor: culpritd exited: " + open(log.name).read())
            time.sleep(0.05)
    sys.exit("bench_monitor: culpritd did not answer /healthz")


def bench(args, server, tmp):
    import torch
    import torch.distributed as dist
    from torch import nn

    from culprit_agent.torch import Monitor

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "store"), rank=0, world_size=1)
    w, batch = args.width, [64]

    class Batches(torch.utils.data.Dataset):
        def __len__(self):
            return args.steps

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return torch.randn(batch[0], w, generator=g), torch.randint(0, 10, (batch[0],), generator=g)

    def copy():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 10))
        model = nn.parallel.DistributedDataParallel(net)
        return model, torch.optim.SGD(model.parameters(), lr=0.01), torch.utils.data.DataLoader(Batches(), batch_size=None)

    def step(model, opt, it):
        t0, c0 = time.perf_counter(), time.thread_time()
        x, y = next(it)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        return time.perf_counter() - t0, time.thread_time() - c0

    # the batch whose step takes --step-ms here
    probe = copy()
    it = iter(probe[2])
    t = statistics.median([step(*probe[:2], it)[0] for _ in range(11)][3:])
    batch[0] = max(1, round(64 * args.step_ms / 1000 / t))
    a, b = copy(), copy()
    mon = Monitor(*a, server=server, job="bench-monitor")
    ita, itb = iter(a[2]), iter(b[2])
    sa, sb = [], []
    load0 = os.getloadavg()[0]
    print(f"width {w}, batch {batch[0]} (64 took {t * 1000:.1f} ms), {args.steps} pairs of steps "
          f"({args.warmup} not counted)", flush=True)
    for i in range(args.steps):
        if i % 2 == 0:
            ra, rb = step(*a[:2], ita), step(*b[:2], itb)
        else:
            rb, ra = step(*b[:2], itb), step(*a[:2], ita)
        if i >= args.warmup:
            sa.append(ra)
            sb.append(rb)
    ok = mon.close(timeout_s=30)
    st = mon.agent.stats()
    if not ok or st["errors"] or st["records_dropped"] or st["records_appended"] < args.steps:
        sys.exit(f"bench_monitor: the Monitor did not deliver everything: acknowledged {ok}, {st}")
    wa, wb = [s[0] for s in sa], [s[0] for s in sb]
    mb = statistics.median(wb)
    diff = statistics.median(x - y for x, y in zip(wa, wb))
    ca, cb = statistics.median(s[1] for s in sa), statistics.median(s[1] for s in sb)
    print(f"median step: with Monitor {statistics.median(wa) * 1000:.2f} ms, without {mb * 1000:.2f} ms; "
          f"median of the pairs' differences {diff * 1000:+.3f} ms = {diff / mb * 100:+.2f}%")
    print(f"mean step (A's profiled steps included): with {statistics.mean(wa) * 1000:.2f} ms, without "
          f"{statistics.mean(wb) * 1000:.2f} ms: {(statistics.mean(wa) / statistics.mean(wb) - 1) * 100:+.2f}%")
    print(f"main thread CPU per step (median): with {ca * 1000:.2f} ms, without {cb * 1000:.2f} ms: "
          f"{(ca - cb) * 1e6:+.0f} us = {(ca / cb - 1) * 100:+.2f}%")
    print(f"records sent: {st['records_appended']}, acknowledged; load average {load0:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(TOP, "build", "rel"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--step-ms", type=float, default=100)
    p.add_argument("--width", type=int, default=1024)
    args = p.parse_args()
    lib = os.path.join(args.build, "agent", "libculprit_agent.so.0")
    if not os.path.exists(lib):
        sys.exit(f"bench_monitor: no {lib} (build it first, see the header)")
    os.environ["CULPRIT_AGENT_LIB"] = lib
    sys.path.insert(0, os.path.join(TOP, "python"))
    with tempfile.TemporaryDirectory(prefix="bench_monitor.") as tmp:
        d, server = start_culpritd(args.build, tmp)
        try:
            bench(args, server, tmp)
        finally:
            d.terminate()
            d.wait()
    sys.stdout.flush()
    os._exit(0)  # torch 1.13's gloo threads sometimes end the interpreter's teardown in std::terminate


if __name__ == "__main__":
    main()
