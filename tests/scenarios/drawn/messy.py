#!/usr/bin/env python3
"""messy.py: the drawn suite's messy jobs, drawn the way real clusters misbehave.

Each kind is written from the description of a class of job, not from any one case: several
faults at once, noisy healthy jobs, imbalance that is not hardware, ambiguity the timings
cannot settle, and jobs that are not GPU jobs. The timing model is gen.py's Job; a kind
here sets its faults and the features gen.py leaves off by default (a NIC model where a
ring runs at its slowest link, a MoE expert phase, per-step data-dependent work, phases
from the iteration's start, out-of-band events, CPU jobs, jobs without host names).

`python3 messy.py --seed S --index I --out DIR` writes DIR/<case>.jsonl and
DIR/<case>.truth.json; `make_case(seed, index, dir, max_world, kinds)` from Python.

The truth holds what gen.py's does, and `lost_ms`: the step the job lost per iteration from
the onset on, measured by simulating it again with the same noise and the fault left out
(`lost_ms_each` per fault when there are two).
"""
import math
import os
import random

import gen

KINDS = [
    # name, weight, the class it stands for
    ("nic_compute", 10, "a compute fault and a slow NIC at once, on two nodes"),
    ("nic_alone", 10, "a slow NIC alone"),
    ("noisy_healthy", 10, "healthy: checkpoints and pauses on all ranks, GC and one-off host pauses"),
    ("hot_expert", 10, "a hot MoE expert: one expert index gets more tokens in every EP group"),
    ("seq_imbalance", 10, "data-dependent sequence-length imbalance among DP replicas"),
    ("compute_event", 10, "a small compute fault and an unrelated out-of-band NIC event"),
    ("periodic", 10, "a GPU slow on every 6th-8th iteration only"),
    ("node_dp", 10, "a whole node 1.15-1.3x slower in a data-parallel job"),
    ("untimed_gap", 10, "a loader stall before the first phase, the peers' lead at 0"),
    ("long_shift", 10, "a sustained shift on a few ranks, longer than the window store"),
    ("wide_stage", 10, "a stage grown 1.12-1.24x across many hosts"),
    ("node_stage", 10, "a slow node that is exactly one pipeline stage"),
    ("hidden", 10, "a straggler hidden by contention: its own phase slower, the step not"),
    ("cpu_job", 10, "a CPU-only job, or one without host names"),
]

EVENT_KINDS = ["port_flap", "link_down", "nic_error", "ib_port_down", "eth_crc_errors"]


def fits(job, kind):
    """Whether the drawn layout suits the kind (16-1,024 ranks for all)."""
    W, gpn, nodes = job.world, job.gpn, job.nodes
    if W < 16:
        return False
    if kind in ("nic_compute", "nic_alone"):
        return nodes >= 2 and job.dp * job.pp > 1
    if kind == "hot_expert":  # the expert's ranks on two hosts or more
        return job.ep > 1 and len({job.node[r] for r in range(W) if job.c_dp[r] % job.ep == 0}) >= 2
    if kind == "seq_imbalance":
        return job.dp >= 4
    if kind == "node_dp":
        return job.pp == 1 and nodes >= 4
    if kind == "untimed_gap":
        return job.tp <= 2
    if kind == "wide_stage":
        return job.pp >= 2 and job.tp * job.dp >= 16 and job.tp * job.dp >= 2 * gpn
    if kind == "node_stage":
        return job.pp >= 2 and job.tp * job.dp == gpn
    if kind == "hidden":
        return job.pp >= 2 and job.tp * job.dp >= 4
    if kind == "cpu_job":
        return W <= 64
    if kind == "long_shift":
        return W <= 64
    if kind == "periodic":
        return W <= 256
    return True


def ring_tells(job, n):
    """Whether a NIC on node n that slows whole rings (and its pipeline hops) can be told
    from every other node by the collectives across nodes (data-parallel or expert groups,
    pipeline hops): for each other node, an instance that holds one of the two and not the
    other. A ring slows every member alike, so two nodes in the same instances only are one
    to the timings."""
    W = job.world
    insts = []
    for ids, g in ((job.g_dp, "dp"), (job.g_ep, "ep")):
        if not job.xfer[g] or not job.internode[g]:
            continue
        nodes = {}
        for r in range(W):
            nodes.setdefault(ids[r], set()).add(job.node[r])
        insts += [s for s in nodes.values() if len(s) > 1]
    if job.pp > 1:
        for r in range(W):  # a hop between two stages, on two nodes
            q = r + job.tp * job.dp
            if q < W and job.node[r] != job.node[q]:
                insts.append({job.node[r], job.node[q]})
    return all(any((n in s) != (m in s) for s in insts) for m in range(job.nodes) if m != n)


def new_job(rng, kind, max_world):
    for _ in range(400):
        job = gen.Job(rng, kind, max_world)
        if fits(job, kind):
            return job
    raise RuntimeError("no layout for " + kind)


def inject(job):
    """The fault of job.kind; returns the truth."""
    rng, W, kind = job.rng, job.world, job.kind
    n_it = job.iters
    onset = rng.randint(int(n_it * 0.45), int(n_it * 0.7))
    T = {"category": "none", "ranks": [], "hosts": [], "match": "ranks", "onset": onset}

    def after(f, start=onset):
        return lambda it: f if it >= start else 1.0

    def nodes_apart(k):
        return rng.sample(range(job.nodes), k)

    if kind == "nic_compute":
        a, b = nodes_apart(2)
        job.nic_model = rng.choice(["share", "ring"]) if ring_tells(job, b) else "share"
        fa = math.exp(rng.uniform(math.log(1.3), math.log(4)))
        fb = math.exp(rng.uniform(math.log(1.5), math.log(5)))
        culprits = [rng.choice(job.ranks_of_node(a))]
        if rng.random() < 0.3:
            culprits = job.ranks_of_node(a)  # the whole node's GPUs
        for q in culprits:
            job.comp[q] = after(fa)
        for q in job.ranks_of_node(b):
            job.nic[q] = after(fb, rng.randint(onset, max(onset, min(n_it - 12, onset + 4))))
        T.update(category="compute_degradation", also="communication_degradation",
                 ranks=sorted(culprits + job.ranks_of_node(b)), match="hosts", factor=fa, factor2=fb,
                 nic_model=job.nic_model)
        return T
    if kind == "nic_alone":
        n = rng.randrange(job.nodes)
        job.nic_model = rng.choice(["share", "ring"]) if ring_tells(job, n) else "share"
        f = math.exp(rng.uniform(math.log(1.5), math.log(5)))
        for q in job.ranks_of_node(n):
            job.nic[q] = after(f)
        T.update(category="communication_degradation", ranks=job.ranks_of_node(n), match="hosts", factor=f,
                 nic_model=job.nic_model)
        return T
    if kind == "noisy_healthy":
        T["onset"] = None
        job.ckpt_every = rng.randint(5, 16)
        job.ckpt_cost = rng.uniform(1, 8) * job.fwd[0] / 0.22
        step = job.fwd[0] / 0.22
        paused = rng.sample(range(W), min(W, rng.randint(3, 12)))
        for r in paused:  # GC and host pauses: one iteration, each on a rank of its own
            at = rng.randrange(3, n_it)
            x = rng.uniform(0.3, 3.0) * step
            how = rng.choice(["gap", "data", "comp"])
            if how == "gap":
                prev = job.gapx.get(r, lambda it: 0.0)
                job.gapx[r] = lambda it, p=prev, at=at, x=x: p(it) + (x if it == at else 0.0)
            elif how == "data" and job.track_data:
                prev = job.datax.get(r, lambda it: 0.0)
                job.datax[r] = lambda it, p=prev, at=at, x=x: p(it) + (x if it == at else 0.0)
            else:
                prev = job.comp.get(r, lambda it: 1.0)
                m = rng.uniform(1.5, 4.0)
                job.comp[r] = lambda it, p=prev, at=at, m=m: p(it) * (m if it == at else 1.0)
        if rng.random() < 0.5:  # every rank pauses alike in a few iterations (a storage hiccup)
            ats = set(rng.sample(range(3, n_it), 2))
            x = rng.uniform(0.3, 1.0) * step
            for r in range(W):
                prev = job.gapx.get(r, lambda it: 0.0)
                job.gapx[r] = lambda it, p=prev: p(it) + (x if it in ats else 0.0)
        return T
    if kind == "hot_expert":
        step = job.fwd[0] / 0.22
        job.expert = step * rng.uniform(0.06, 0.15)
        hot = rng.randrange(job.ep)
        f = rng.uniform(1.5, 2.5)
        rest = max(0.2, (job.ep - f) / (job.ep - 1))  # the tokens the hot expert takes
        ranks = [r for r in range(W) if job.c_dp[r] % job.ep == hot]
        for r in range(W):
            job.expert_mult[r] = after(f if r in ranks else rest)
        T.update(category="load_imbalance", ranks=ranks, factor=f, expert=hot)
        return T
    if kind == "seq_imbalance":
        sigma = rng.uniform(0.15, 0.35)
        seq = random.Random(rng.random())  # its own draws: a second simulation sees the same
        draws = {}

        def mult(it, r):
            if it < onset:
                return 1.0
            key = (it, job.c_dp[r])
            if key not in draws:
                draws[key] = math.exp(abs(seq.gauss(0, sigma)))
            return draws[key]
        job.iter_mult = mult
        T.update(category="load_imbalance", ranks=[], sigma=round(sigma, 3))
        return T
    if kind == "compute_event":
        r = rng.randrange(W)
        f = rng.uniform(1.15, 1.5)
        job.comp[r] = after(f)
        others = [n for n in range(job.nodes) if n != job.node[r]]
        if not others:
            others = [job.node[r]]
        n = rng.choice(others)
        at = rng.randint(onset, n_it - 1)
        job.events.append((gen.host_name(job.prefix, n), rng.choice(EVENT_KINDS), at, "eth%d" % rng.randrange(8)))
        T.update(category="compute_degradation", ranks=[r], factor=f, event_host=gen.host_name(job.prefix, n))
        return T
    if kind == "periodic":
        r = rng.randrange(W)
        f = rng.uniform(1.8, 3.0)
        k = rng.randint(6, 8)
        job.iters = n_it = rng.randint(60, 90)
        onset = T["onset"] = rng.randint(20, 30)
        job.comp[r] = lambda it: f if it >= onset and (it - onset) % k == 0 else 1.0
        T.update(category="compute_degradation", ranks=[r], factor=f, every=k)
        return T
    if kind == "node_dp":
        n = rng.randrange(job.nodes)
        f = rng.uniform(1.15, 1.3)
        for q in job.ranks_of_node(n):
            job.comp[q] = after(f)
        T.update(category="compute_degradation", ranks=job.ranks_of_node(n), match="hosts", factor=f)
        return T
    if kind == "untimed_gap":
        job.gap_zero = True
        job.track_data = True
        r = rng.choice([q for q in range(W) if job.c_pp[q] == 0])
        rs = [r]
        if rng.random() < 0.3:
            rs = [q for q in job.ranks_of_node(job.node[r]) if job.c_pp[q] == 0]
            if len(rs) * 2 > W:
                rs = [r]
        x = rng.uniform(0.25, 2.0) * (job.fwd[0] / 0.22)
        for q in rs:
            job.gapx[q] = lambda it, x=x: x * job.rng.uniform(0.8, 1.2) if it >= onset else 0.0
        T.update(category="host_delay", ranks=sorted(rs), gap=True, match="hosts" if len(rs) > 1 else "ranks")
        return T
    if kind == "long_shift":
        job.iters = n_it = rng.randint(150, 260)
        onset = T["onset"] = rng.randint(int(n_it * 0.3), int(n_it * 0.5))
        job.noise = rng.uniform(0.03, 0.07)
        k = rng.randint(2, 4)
        culprits = sorted(rng.sample(range(W), k))
        f = rng.uniform(1.2, 1.32)
        for q in culprits:
            job.comp[q] = after(f, onset)
        if rng.random() < 0.6 and onset + 30 <= n_it - 60:
            # a later job-wide slowdown (slow storage, a noisy neighbour) on top of the
            # shift, over before the end: the window after it still compares with the level
            # before the shift
            b0 = rng.randint(onset + 30, n_it - 60)
            b1 = b0 + rng.randint(15, 35)
            g = rng.uniform(1.3, 1.5)
            job.iter_mult = lambda it, r: g if b0 <= it < b1 else 1.0
            T["burst"] = [b0, b1, round(g, 3)]
        T.update(category="compute_degradation", ranks=culprits, factor=f)
        return T
    if kind == "wide_stage":
        s = rng.randrange(job.pp)
        f = rng.uniform(1.12, 1.24)
        for q in range(W):
            if job.c_pp[q] == s:
                job.comp[q] = after(f)
        T.update(category="stage_imbalance", stage=s, factor=f)
        return T
    if kind == "node_stage":
        s = rng.randrange(job.pp)
        f = rng.uniform(1.3, 3.0)
        ranks = [q for q in range(W) if job.c_pp[q] == s]
        for q in ranks:
            job.comp[q] = after(f)
        T.update(category="compute_degradation", ranks=ranks, match="hosts", stage=s, factor=f, ambiguous=True)
        return T
    if kind == "hidden":
        light = rng.randrange(job.pp)
        job.fwd[light] *= 0.55
        job.bwd[light] *= 0.55
        r = rng.choice([q for q in range(W) if job.c_pp[q] == light])
        f = rng.uniform(1.4, 1.6)
        job.comp[r] = after(f)
        job.fwd_only.add(r)  # its own forward: the slack of its light stage takes it
        T.update(onset=None, advisory=True, advisory_ranks=[r], factor=f)
        return T
    if kind == "cpu_job":
        job.device = "cpu"
        job.prefix = rng.choice(["cpu", "worker", "c6i-node"])
        job.write_hosts = rng.random() < 0.5
        r = rng.randrange(W)
        f = math.exp(rng.uniform(math.log(1.5), math.log(4)))
        job.comp[r] = after(f)
        T.update(category="compute_degradation", ranks=[r], factor=f, device="cpu", hosts_known=job.write_hosts)
        return T
    raise ValueError(kind)


def make_case(seed, index, out_dir, max_world=1024, kinds=None):
    rng = random.Random(seed * 1_000_033 + index + 7)
    pool = [k for k in KINDS if not kinds or k[0] in kinds]
    if not pool:
        raise ValueError("no such messy kind: %s" % ",".join(kinds))
    kind = rng.choices([k[0] for k in pool], [k[1] for k in pool])[0]
    for attempt in range(6):
        job = new_job(rng, kind, max_world)
        truth = inject(job)
        before = rng.getstate()
        sim = job.simulate()
        onset = truth.get("onset")
        if truth["category"] == "none" or truth.get("ambiguous"):
            break
        rise = gen.step_rise(sim, onset)
        truth["step_rise"] = round(rise, 3)
        # a fault must cost the job something a person would call a slowdown; a stage that
        # grew a little, a little less
        if rise >= (1.06 if kind == "wide_stage" else 1.08) or kind in ("periodic", "long_shift", "compute_event"):
            break
    truth["lost_ms"], truth["lost_ms_each"] = gen.lost(job, sim, truth.get("onset"), before)
    case = "m%05d" % index
    job_id = "messy-%d-%d" % (seed, index)
    path = os.path.join(out_dir, case + ".jsonl")
    gen.write_case(job, sim, path, job_id)
    truth.update(case=case, kind=kind, patterns="messy", job=job_id, world=job.world, tp=job.tp,
                 pp=job.pp, dp=job.dp, ep=job.ep, gpus_per_node=job.gpn, iters=job.iters,
                 noise=round(job.noise, 4), tracked_data=job.track_data, nic_model=job.nic_model)
    return gen.save_truth(job, truth, out_dir, case)


def main():
    gen.cli(make_case, "draw one messy case of the drawn suite", 37, 1024)


if __name__ == "__main__":
    main()
