#!/usr/bin/env python3
"""gen.py: draws one synthetic training job with a known answer (the drawn suite).

Written apart from `culprit sim`: its own topology rules, names and timing model.
`python3 gen.py --seed S --index I --out DIR` writes DIR/<case>.jsonl and
DIR/<case>.truth.json; `make_case(seed, index, dir)` does the same from Python.

Timing model (one iteration, every rank; all times in microseconds):
  gap (untracked, before forward) -> [data phase, host] -> forward compute ->
  tp all-reduce -> MoE all-to-all -> pipeline p2p -> backward compute ->
  dp gradient sync -> grad-norm all-reduce (whole job) -> optimizer step.
At each collective a rank arrives when its previous work ends; every member leaves at the
latest arrival of its group plus its own transfer time, so the recorded duration of a
comm phase is wait + transfer. A rank late at a collective therefore has a short comm
phase (a late arriver) and its peers a long one (victims). Groups: tp = same (pp, dp),
ep = same (pp, tp, dp // EP), pipeline chain = same (tp, dp), dp = same (pp, tp).
A slow NIC makes its node's transfers over inter-node groups f times longer; the peers of
those groups see only a share (kappa < 1/2) of that extra in the same collective (the part
of the traffic that crosses the node) and wait for the rest at the next synchronisation.
"""
import argparse
import json
import math
import os
import random

KINDS = [
    # name, weight, the fault patterns the scorer prints (0 = healthy)
    ("healthy", 9, "0"),
    ("healthy_bimodal", 4, "0,11"),
    ("compute_rank", 7, "2,3"),
    ("compute_node", 6, "1,2,4"),
    ("compute_small_dp", 7, "2"),
    ("compute_subtle", 7, "3"),
    ("comm_nic", 9, "1"),
    ("intermittent", 6, "5"),
    ("gradual", 6, "6"),
    ("two_faults", 5, "7"),
    ("loader_stall", 6, "8"),
    ("host_phase", 3, "8"),
    ("stage_regression", 4, "2"),
    ("standing_stage", 3, "10"),
    ("standing_rank", 3, "10"),
    ("whole_trace_slow", 4, "9"),
    ("bimodal_jump", 5, "11"),
    ("kernel_stall", 3, "-"),
    ("hang", 3, "-"),
]

STYLES = [
    {"data": "data.next_batch", "fwd": ["fwd.attention", "fwd.mlp"], "bwd": ["bwd.attention", "bwd.mlp"],
     "tp": "tp.all_reduce", "ep": "moe.all_to_all", "pp": "pp.send_recv", "dp": "dp.reduce_scatter",
     "gn": "optimizer.grad_norm", "opt": "optimizer.step", "eval": "eval.forward",
     "exp": "moe.expert_ffn", "epc": "moe.combine"},
    {"data": "dataloader_wait", "fwd": ["forward_compute"], "bwd": ["backward_compute"],
     "tp": "tensor_parallel_allreduce", "ep": "expert_alltoall", "pp": "pipeline_p2p",
     "dp": "grad_allreduce", "gn": "clip_grad_norm_allreduce", "opt": "optim_step", "eval": "eval_step",
     "exp": "expert_mlp", "epc": "expert_combine_alltoall"},
    {"data": "input_pipeline", "fwd": ["forward.embed_attn", "forward.ffn"],
     "bwd": ["backward.ffn", "backward.embed_attn"], "tp": "nccl.tp_allreduce", "ep": "nccl.ep_alltoall",
     "pp": "nccl.pp_isend_irecv", "dp": "nccl.dp_reduce_scatter", "gn": "nccl.global_norm",
     "opt": "adam_update", "eval": "validation",
     "exp": "forward.experts", "epc": "nccl.ep_combine"},
]


def kernel_names(rng, n):
    """n distinct kernel names like a PyTorch/Megatron profile: (name, kind, phase kind)."""
    out, seen = [], set()
    comm = [("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "tp"),
            ("ncclDevKernel_AllToAll_RING_LL128", "ep"),
            ("ncclDevKernel_SendRecv", "pp"),
            ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", "dp"),
            ("ncclDevKernel_AllGather_RING_LL", "dp"),
            ("ncclDevKernel_AllReduce_Sum_f32_TREE_LL", "gn")]
    for name, g in comm:
        out.append((name, "comm", g))
        seen.add(name)
    ops = ["gelu", "silu", "add", "mul", "bias_dropout_add", "softmax", "cast_bf16", "fill", "copy",
           "rsqrt", "div_true", "where", "masked_fill", "exp", "neg"]
    while len(out) < n:
        t = rng.randrange(6)
        ph = rng.choice(["fwd", "bwd", "opt"]) if t == 5 else rng.choice(["fwd", "bwd"])
        if t == 0:
            a, b = rng.choice([64, 128, 256]), rng.choice([64, 128, 256])
            name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_%s_n_tilesize%dx%dx64_warpgroupsize%dx1x1_execute_kernel" % (
                rng.choice(["tn", "nt", "nn"]), a, b, rng.choice([1, 2]))
        elif t == 1:
            name = "ampere_bf16_s16816gemm_bf16_%dx%d_ldg8_f2f_stages_%dx%d_%s" % (
                rng.choice([64, 128, 256]), rng.choice([64, 128]), rng.choice([32, 64]),
                rng.choice([3, 4, 5]), rng.choice(["tn", "nt", "nn"]))
        elif t == 2:
            name = "flash_%s_kernel<Flash_%s_kernel_traits<%d, %d, %d, 4>>" % (
                "fwd" if ph == "fwd" else "bwd_dq_dk_dv_loop_seqk_parallel", ph, rng.choice([64, 128, 256]),
                rng.choice([64, 128]), rng.choice([32, 64, 128]))
        elif t == 3:
            name = "at::native::vectorized_elementwise_kernel<%d, %s_kernel_cuda_%d>" % (
                rng.choice([2, 4, 8]), rng.choice(ops), rng.randrange(1000))
        elif t == 4:
            name = "%s_%s_kernel_%d" % (rng.choice(["layer_norm", "rms_norm", "fused_rope", "cross_entropy"]),
                                         ph, rng.randrange(100))
        else:
            name = "multi_tensor_apply_kernel<TensorListMetadata<%d>, %s<float>>_%d" % (
                rng.choice([2, 3, 4]), rng.choice(["AdamFunctor", "L2NormFunctor", "ScaleFunctor"]),
                rng.randrange(100))
        if name in seen:
            continue
        seen.add(name)
        out.append((name, "compute", ph))
    return out


def host_name(prefix, node):
    return "%s-r%02d-n%02d" % (prefix, node // 16, node % 16)


def draw_size(rng, kind, max_world):
    """(tp, pp, dp, ep, gpn): world 8..4096 (at most max_world), most jobs small."""
    gpn = 8 if rng.random() < 0.85 else 4
    for _ in range(1000):
        e = 3 + int(9.99 * rng.random() ** 4)  # world 2^3 .. 2^12, biased small
        world = 2 ** e
        if rng.random() < 0.2 and world >= 24:
            world = world * 3 // 4  # 24, 48, 96, ... (pp of 3 or 6)
        tp = rng.choice([t for t in (1, 2, 4, 8) if t <= gpn and world % t == 0])
        pps = [p for p in (1, 2, 3, 4, 6, 8) if (world // tp) % p == 0]
        pp = rng.choice(pps)
        dp = world // (tp * pp)
        if kind == "compute_small_dp":
            if not 2 <= dp <= 8:
                continue
        if kind in ("stage_regression", "standing_stage") and pp < 2:
            continue
        if kind == "stage_regression" and tp * dp < 2 * gpn:
            continue  # a stage spanning one node is that node's fault, not the stage's
        if kind == "whole_trace_slow" and dp != 4:
            continue
        if kind in ("comm_nic", "two_faults") and world < 2 * gpn:
            continue
        if kind in ("comm_nic", "two_faults") and dp * pp == 1:
            continue
        if kind in ("loader_stall", "host_phase") and tp > 2 and rng.random() < 0.5:
            continue
        if kind == "compute_node" and world < 2 * gpn:
            continue
        if dp < 1 or world < 8 or world > max_world:
            continue
        ep = 1
        if dp >= 2 and rng.random() < 0.3:
            ep = rng.choice([e for e in (2, 4, 8) if dp % e == 0] or [1])
        return tp, pp, dp, ep, gpn
    raise RuntimeError("no layout for " + kind)


class Job:
    def __init__(self, rng, kind, max_world=4096):
        self.rng = rng
        self.kind = kind
        self.tp, self.pp, self.dp, self.ep, self.gpn = draw_size(rng, kind, max_world)
        self.world = self.tp * self.pp * self.dp
        W = self.world
        # rank = tp + TP * (dp + DP * pp): Megatron order, tensor-parallel fastest
        self.c_tp = [r % self.tp for r in range(W)]
        self.c_dp = [(r // self.tp) % self.dp for r in range(W)]
        self.c_pp = [r // (self.tp * self.dp) for r in range(W)]
        self.node = [r // self.gpn for r in range(W)]
        self.nodes = (W + self.gpn - 1) // self.gpn
        self.prefix = rng.choice(["h100", "a100-pod", "gpu", "dgx"])
        self.style = rng.choice(STYLES)
        self.track_data = rng.random() < 0.5
        big = W >= 1024
        self.iters = rng.randint(30, 34) if big else rng.randint(30, 60)
        # groups as ids
        self.g_tp = [self.c_pp[r] * self.dp + self.c_dp[r] for r in range(W)]
        self.g_ep = [(self.c_pp[r] * self.tp + self.c_tp[r]) * self.dp + self.c_dp[r] // self.ep for r in range(W)]
        self.g_pp = [self.c_tp[r] * self.dp + self.c_dp[r] for r in range(W)]
        self.g_dp = [self.c_pp[r] * self.tp + self.c_tp[r] for r in range(W)]
        # does a group of this kind span more than one node (is its traffic inter-node)?
        self.internode = {}
        for g, ids in (("tp", self.g_tp), ("ep", self.g_ep), ("pp", self.g_pp), ("dp", self.g_dp)):
            seen = {}
            for r in range(W):
                seen.setdefault(ids[r], set()).add(self.node[r])
            self.internode[g] = any(len(s) > 1 for s in seen.values())
        self.internode["gn"] = self.nodes > 1
        # base work per iteration (us): compute per stage +-4% by design, step 0.2-3 s
        step = math.exp(rng.uniform(math.log(200e3), math.log(3e6)))
        self.noise = rng.uniform(0.01, 0.05)
        self.fwd = [step * 0.22 * rng.uniform(0.96, 1.04) for _ in range(self.pp)]
        self.bwd = [2 * f * rng.uniform(0.97, 1.03) for f in self.fwd]
        self.opt = step * 0.04
        self.data = step * rng.uniform(0.01, 0.04)
        self.gap = step * 0.005
        share = rng.uniform(0.05, 0.2)
        self.xfer = {"tp": step * 0.04 if self.tp > 1 else 0, "ep": step * 0.05 if self.ep > 1 else 0,
                     "pp": step * 0.03 if self.pp > 1 else 0, "dp": step * share if self.dp > 1 else 0,
                     "gn": step * 0.004}
        self.rank_mult = [1.0] * W
        # faults: functions of (rank, iter)
        self.comp = {}      # rank -> f(iter) compute multiplier
        self.gapx = {}      # rank -> f(iter) extra untracked gap (us)
        self.datax = {}     # rank -> f(iter) extra data-phase time (us)
        self.nic = {}       # rank -> f(iter) transfer multiplier on inter-node groups
        self.stall = {}     # rank -> f(iter) one stalled kernel call (us)
        self.hang = None    # (rank, iter)
        self.kappa = rng.uniform(0.1, 0.4)
        self.ckpt_every = rng.randint(12, 40)
        self.ckpt_cost = rng.uniform(2, 12) * step
        self.eval_every = rng.randint(10, 30) if rng.random() < 0.6 else 0
        self.eval_cost = rng.uniform(0.5, 2.5) * step
        # the messy suite's features (messy.py); none draws from rng here, so the classic
        # suite's cases stay what they were
        self.nic_model = "share"  # "ring": every member of a collective through the NIC slows
        self.expert = 0.0         # MoE expert compute between dispatch and combine (us)
        self.expert_mult = {}     # rank -> f(iter) multiplier of its expert compute
        self.iter_mult = None     # f(iter, rank) multiplier of all its compute (data-dependent)
        self.gap_zero = False     # phases start at the iteration's start: no untracked lead
        self.events = []          # (host, kind, iter, detail): out-of-band events
        self.device = None        # "cpu": a CPU-only job
        self.write_hosts = True   # False: no host lines (hosts not reported)
        self.disabled = set()     # fault tables left out (the what-if for the true time lost)
        self.fwd_only = set()     # ranks whose compute fault slows their forward only

    def host(self, r):
        return host_name(self.prefix, self.node[r])

    def ranks_of_node(self, n):
        return [r for r in range(n * self.gpn, min(self.world, (n + 1) * self.gpn))]

    def simulate(self):
        """Per iteration: dict phase -> list per rank, and the step time."""
        rng, W, st = self.rng, self.world, self.style
        nz = self.noise
        out = []
        gm = lambda vals, ids: _gmax(vals, ids)
        for it in range(self.iters):
            ph = {}
            A = [0.0] * W
            gap = [0.0] * W
            for r in range(W):
                g = self.gap * rng.uniform(0.5, 1.5)
                if self.gap_zero:
                    g = 0.0
                if r in self.gapx:
                    g += self._on("gapx", self.gapx[r](it), 0.0)
                gap[r] = g
                d = self.data * _n(rng, nz)
                if r in self.datax:
                    d += self._on("datax", self.datax[r](it), 0.0)
                if self.track_data:
                    ph.setdefault(st["data"], [0.0] * W)[r] = d
                else:
                    gap[r] += d
                A[r] = gap[r] + (d if self.track_data else 0)
            cm = [self.rank_mult[r] * (self._on("comp", self.comp[r](it), 1.0) if r in self.comp else 1.0)
                  for r in range(W)]
            if self.iter_mult:
                cm = [cm[r] * self._on("iter_mult", self.iter_mult(it, r), 1.0) for r in range(W)]
            stallx = [self._on("stall", self.stall[r](it), 0.0) if r in self.stall else 0.0 for r in range(W)]
            fw = [self.fwd[self.c_pp[r]] * cm[r] * _n(rng, nz) + stallx[r] for r in range(W)]
            ph["_fwd"] = fw
            A = [A[r] + fw[r] for r in range(W)]

            def sync(g, ids, A, key=None):
                x = self.xfer[g]
                if x == 0:
                    return A
                xr = [x * _n(rng, nz) for r in range(W)]
                if self.internode[g] and self.nic:
                    extra = {}
                    for r, f in self.nic.items():
                        m = self._on("nic", f(it), 1.0)
                        if m != 1.0:
                            extra[r] = (m - 1.0) * x
                            xr[r] += extra[r]
                    if extra:
                        gx = {}
                        for r, e in extra.items():
                            gx[ids[r]] = max(gx.get(ids[r], 0.0), e)
                        # a ring runs at its slowest link: every member waits for the whole
                        # extra; a pipeline hop too, and a stage next to the NIC's has one of
                        # its hops with it (both, at an end of the pipeline); else the
                        # others see a share of it
                        share = 1.0 if self.nic_model == "ring" else self.kappa
                        near = {}
                        for q in extra:
                            near.setdefault(ids[q], set()).add(self.c_pp[q])
                        for r in range(W):
                            if r in extra or ids[r] not in gx:
                                continue
                            part = share
                            if self.nic_model == "ring" and g == "pp":
                                hop = {self.c_pp[r] - 1, self.c_pp[r] + 1} & near[ids[r]]
                                ends = self.c_pp[r] in (0, self.pp - 1)
                                part = 0.0 if not hop else 1.0 if ends else 0.5
                            xr[r] += part * gx[ids[r]]
                m = gm(A, ids)
                ph[key or "_" + g] = [m[ids[r]] - A[r] + xr[r] for r in range(W)]
                return [m[ids[r]] + xr[r] for r in range(W)]

            A = sync("tp", self.g_tp, A)
            A = sync("ep", self.g_ep, A)
            if self.expert:
                ex = [self.expert * (self._on("expert", self.expert_mult[r](it), 1.0) if r in self.expert_mult
                                     else 1.0) * _n(rng, nz) for r in range(W)]
                ph["_exp"] = ex
                A = [A[r] + ex[r] for r in range(W)]
                A = sync("ep", self.g_ep, A, "_epc")
            A = sync("pp", self.g_pp, A)
            bw = [self.bwd[self.c_pp[r]] * (1.0 if r in self.fwd_only else cm[r]) * _n(rng, nz) for r in range(W)]
            ph["_bwd"] = bw
            A = [A[r] + bw[r] for r in range(W)]
            A = sync("dp", self.g_dp, A)
            A = sync("gn", [0] * W, A)
            op = [self.opt * (1.0 if r in self.fwd_only else cm[r]) * _n(rng, nz) for r in range(W)]
            ph["_opt"] = op
            E = [A[r] + op[r] for r in range(W)]
            ev = 0.0
            if self.eval_every and it % self.eval_every == self.eval_every - 1:
                ev = self.eval_cost
                ph["_eval"] = [ev * _n(rng, nz) for r in range(W)]
                E = [E[r] + ph["_eval"][r] for r in range(W)]
            T = max(E)
            if it % self.ckpt_every == self.ckpt_every - 1:
                T += self.ckpt_cost  # checkpoint save: untracked time at the end of the step
            out.append((ph, gap, cm, stallx, T))
        return out

    def _on(self, table, value, neutral):
        """value, or neutral when the fault table is disabled (what-if without it); the
        fault's function is called either way, so the noise drawn stays the same"""
        return neutral if table in self.disabled else value


def _n(rng, s):
    return max(0.5, rng.gauss(1.0, s))


def _gmax(vals, ids):
    m = {}
    for v, g in zip(vals, ids):
        if v > m.get(g, -1.0):
            m[g] = v
    return m


def step_rise(sim, onset):
    """Mean step after onset over mean step before (checkpoints excluded)."""
    def mean(a):
        return sum(a) / len(a) if a else 0.0
    pre = [s[4] for i, s in enumerate(sim) if i < onset]
    post = [s[4] for i, s in enumerate(sim) if i >= onset]
    pre.sort()
    post.sort()
    pre, post = pre[: max(1, len(pre) * 3 // 4)], post[: max(1, len(post) * 3 // 4)]
    return mean(post) / mean(pre) if pre else 1.0


def inject(job):
    """Draw the fault of job.kind; returns the truth (expected verdict, culprits)."""
    rng, W, kind = job.rng, job.world, job.kind
    n_it = job.iters
    onset = rng.randint(int(n_it * 0.45), int(n_it * 0.7))
    T = {"category": "none", "ranks": [], "hosts": [], "match": "ranks", "onset": onset}

    def rank_pick(stage=None):
        c = [r for r in range(W) if stage is None or job.c_pp[r] == stage]
        return rng.choice(c)

    def after(f, start=onset):
        return lambda it: f if it >= start else 1.0

    if kind in ("healthy", "healthy_bimodal"):
        T["onset"] = None
        if kind == "healthy_bimodal":
            slow = rng.uniform(1.08, 1.3)
            for n in range(job.nodes):
                if rng.random() < 0.5:
                    for r in job.ranks_of_node(n):
                        job.rank_mult[r] = slow
        return T
    if kind in ("compute_rank", "compute_subtle", "compute_small_dp", "bimodal_jump"):
        r = rank_pick()
        if kind == "compute_subtle":
            f = rng.uniform(1.15, 1.3)
        elif kind == "bimodal_jump":
            f = rng.uniform(3, 5)
            slow = rng.uniform(1.1, 1.3)
            for n in range(job.nodes):
                if rng.random() < 0.5:
                    for q in job.ranks_of_node(n):
                        job.rank_mult[q] = slow
        else:
            f = math.exp(rng.uniform(math.log(1.15), math.log(5)))
        culprits = [r]
        if kind == "compute_small_dp" and rng.random() < 0.6:
            # half or all of the node's GPUs (half a small DP group or more), never the
            # whole job (a job that slows everywhere has no culprit to name)
            rs = job.ranks_of_node(job.node[r])
            div = rng.choice([1, 2]) if job.nodes > 1 else 2
            culprits = sorted(rng.sample(rs, max(1, len(rs) // div)))
        for q in culprits:
            job.comp[q] = after(f)
        T.update(category="compute_degradation", ranks=culprits, factor=f)
        return T
    if kind == "compute_node":
        n = rng.randrange(job.nodes)
        f = math.exp(rng.uniform(math.log(1.15), math.log(4)))
        for q in job.ranks_of_node(n):
            job.comp[q] = after(f)
        T.update(category="compute_degradation", ranks=job.ranks_of_node(n), match="hosts", factor=f)
        return T
    if kind == "comm_nic":
        n = rng.randrange(job.nodes)
        f = math.exp(rng.uniform(math.log(1.5), math.log(5)))
        for q in job.ranks_of_node(n):
            job.nic[q] = after(f)
        T.update(category="communication_degradation", ranks=job.ranks_of_node(n), match="hosts", factor=f)
        return T
    if kind == "two_faults":
        a, b = rng.sample(range(job.nodes), 2)
        fa = math.exp(rng.uniform(math.log(1.3), math.log(4)))
        fb = math.exp(rng.uniform(math.log(1.5), math.log(5)))
        ra = rng.choice(job.ranks_of_node(a))
        job.comp[ra] = after(fa)
        for q in job.ranks_of_node(b):
            job.nic[q] = after(fb, rng.randint(onset, max(onset, min(n_it - 12, onset + 5))))
        T.update(category="compute_degradation", also="communication_degradation",
                 ranks=sorted([ra] + job.ranks_of_node(b)), match="hosts", factor=fa, factor2=fb)
        return T
    if kind == "intermittent":
        r = rank_pick()
        f = rng.uniform(1.8, 3.0)
        k = rng.randint(2, 5)
        job.comp[r] = lambda it: f if it >= onset and (it - onset) % k == 0 else 1.0
        T.update(category="compute_degradation", ranks=[r], factor=f, every=k)
        return T
    if kind == "gradual":
        r = rank_pick()
        rate = rng.uniform(0.008, 0.02) if W < 1024 else rng.uniform(0.02, 0.03)
        cap = rng.uniform(1.3, 1.6)
        onset = min(onset, int(n_it - (cap - 1) / rate - 6))
        onset = max(onset, 8)
        need = onset + int((cap - 1) / rate) + 6
        job.iters = n_it = max(n_it, need)
        T["onset"] = onset
        job.comp[r] = lambda it: min(cap, 1.0 + rate * (it - onset)) if it >= onset else 1.0
        T.update(category="compute_degradation", ranks=[r], factor=cap, gradual=True)
        return T
    if kind in ("loader_stall", "host_phase"):
        if kind == "host_phase":
            job.track_data = True
        stage = 0
        r = rank_pick(stage)
        rs = [r]
        if rng.random() < 0.3:  # the host's CPU: every rank of the node that loads data
            rs = [q for q in job.ranks_of_node(job.node[r]) if job.c_pp[q] == stage]
            if len(rs) == W:
                rs = [r]  # not the whole job: a job slow everywhere has no culprit to name
        x = rng.uniform(0.25, 2.0) * (job.fwd[0] / 0.22)
        for q in rs:
            if kind == "host_phase":
                job.datax[q] = lambda it, x=x: x * job.rng.uniform(0.8, 1.2) if it >= onset else 0.0
            else:
                job.gapx[q] = lambda it, x=x: x * job.rng.uniform(0.8, 1.2) if it >= onset else 0.0
        T.update(category="host_delay", ranks=sorted(rs), gap=kind == "loader_stall",
                 match="hosts" if len(rs) > 1 else "ranks")
        return T
    if kind == "stage_regression":
        s = rng.randrange(job.pp)
        f = rng.uniform(1.25, 2.0)
        for q in range(W):
            if job.c_pp[q] == s:
                job.comp[q] = after(f)
        T.update(category="stage_imbalance", stage=s, factor=f)
        return T
    if kind == "standing_stage":
        s = rng.randrange(job.pp)
        f = rng.uniform(1.3, 1.8)
        for q in range(W):
            if job.c_pp[q] == s:
                job.rank_mult[q] = f
        T.update(onset=None, advisory=True, stage=s, factor=f)
        return T
    if kind == "standing_rank":
        r = rank_pick()
        job.rank_mult[r] = rng.uniform(1.3, 2.0)
        T.update(onset=None, advisory=True, advisory_ranks=[r])
        return T
    if kind == "whole_trace_slow":
        job.iters = rng.randint(4, 10)
        job.ckpt_every = 1000
        job.eval_every = 0
        r = rank_pick()
        job.rank_mult[r] = rng.uniform(1.5, 4.0)
        T.update(category="compute_degradation", ranks=[r], onset=0, whole_trace=True)
        return T
    if kind == "kernel_stall":
        r = rank_pick()
        x = rng.uniform(0.4, 1.5) * (job.fwd[0] / 0.22)
        job.stall[r] = lambda it: x if it >= onset else 0.0
        T.update(category="kernel_stall", ranks=[r])
        return T
    if kind == "hang":
        r = rank_pick()
        job.hang = (r, rng.randint(n_it - 15, n_it - 6))
        T.update(category="hang", ranks=[r], onset=job.hang[1])
        return T
    raise ValueError(kind)


def write_case(job, sim, path, job_id):
    W, st = job.world, job.style
    rng = job.rng
    t0 = 1_700_000_000_000_000 + rng.randrange(10 ** 12)
    lines = []
    add = lines.append
    order = rng.choice(["tp-cp-ep-dp-pp", "tp-cp-dp-pp"]) if job.ep > 1 else "tp-cp-dp-pp"
    if job.ep > 1:
        order = "tp-cp-ep-dp-pp"
    jid = json.dumps(job_id)
    dev = ',"device":"%s"' % job.device if job.device else ""
    add('{"type":"job","job":%s,"world":%d,"tp":%d,"cp":1,"pp":%d,"dp":%d,"ep":%d,"order":"%s","gpus_per_node":%d%s}'
        % (jid, W, job.tp, job.pp, job.dp, job.ep, order, job.gpn, dev))
    for r in range(W if job.write_hosts else 0):
        add('{"type":"host","job":%s,"rank":%d,"host":"%s"}' % (jid, r, job.host(r)))
    comm_names = {g: st[g] for g in ("tp", "ep", "pp", "dp", "gn")}
    comm_group = {"tp": "tp", "ep": "ep", "pp": "pp", "dp": "dp", "gn": "dp"}
    fw_split = [0.4, 0.6] if len(st["fwd"]) == 2 else [1.0]
    bw_split = [0.6, 0.4] if len(st["bwd"]) == 2 else [1.0]
    hang_r, hang_it = job.hang if job.hang else (-1, 1 << 30)
    t = t0
    for it, (ph, gap, cm, stallx, T) in enumerate(sim):
        for r in range(W):
            if r == hang_r and it >= hang_it:
                continue
            jit = rng.randrange(50)
            add('{"type":"iter","job":%s,"rank":%d,"iter":%d,"start_us":%d,"dur_us":%d}'
                % (jid, r, it, t + jit, max(1, int(T) - jit)))
            off = gap[r]
            if job.track_data:
                d = ph[job.style["data"]][r]
                add('{"type":"phase","job":%s,"rank":%d,"iter":%d,"name":"%s","kind":"host","group":"","start_us":%d,"dur_us":%d}'
                    % (jid, r, it, st["data"], off, max(1, d)))
                off += d

            def P(name, kind, group, dur):
                nonlocal off
                add('{"type":"phase","job":%s,"rank":%d,"iter":%d,"name":"%s","kind":"%s","group":"%s","start_us":%d,"dur_us":%d}'
                    % (jid, r, it, name, kind, group, off, max(1, dur)))
                off += dur
            for name, s in zip(st["fwd"], fw_split):
                P(name, "compute", "", ph["_fwd"][r] * s)
            for g in ("tp", "ep", "pp"):
                if "_" + g in ph:
                    P(comm_names[g], "comm", comm_group[g], ph["_" + g][r])
                if g == "ep" and "_exp" in ph:
                    P(st["exp"], "compute", "", ph["_exp"][r])
                    P(st["epc"], "comm", "ep", ph["_epc"][r])
            for name, s in zip(st["bwd"], bw_split):
                P(name, "compute", "", ph["_bwd"][r] * s)
            for g in ("dp", "gn"):
                if "_" + g in ph:
                    P(comm_names[g], "comm", comm_group[g], ph["_" + g][r])
            P(st["opt"], "compute", "", ph["_opt"][r])
            if "_eval" in ph:
                P(st["eval"], "compute", "", ph["_eval"][r])
        for host, kind, at, detail in job.events:
            if at == it:
                add('{"type":"event","job":%s,"host":"%s","kind":"%s","ts_us":%d,"source":"oob","detail":"%s"}'
                    % (jid, host, kind, t + int(T) // 2, detail))
        t += int(T) + 200
    write_kernels(job, sim, add, jid)
    with open(path, "w") as f:
        f.write("\n".join(lines))
        f.write("\n")


def write_kernels(job, sim, add, jid):
    """One kernel summary line per (rank, kernel, block of 8 iterations); none for a CPU job."""
    rng, W = job.rng, job.world
    if job.device == "cpu":
        return
    blocks = (job.iters + 7) // 8
    want = rng.randint(20, 200)
    n = max(20, min(want, 150_000 // max(1, W * blocks)))
    names = kernel_names(rng, n)
    present = {"tp": job.tp > 1, "ep": job.ep > 1, "pp": job.pp > 1, "dp": job.dp > 1, "gn": True}
    names = [k for k in names if k[1] == "compute" or present[k[2]]]
    base = {k[0]: (rng.uniform(20, 2000), rng.randint(1, 60)) for k in names}
    stall_k = next(k[0] for k in names if k[1] == "compute" and k[2] == "fwd") if job.stall else None
    if stall_k:  # one call in 20 or more stalls: the kernel's median stays normal
        base[stall_k] = (base[stall_k][0], rng.randint(20, 60))
    hang_r, hang_it = job.hang if job.hang else (-1, 1 << 30)
    for b in range(blocks):
        its = [i for i in range(b * 8, min(job.iters, b * 8 + 8))]
        for r in range(W):
            itr = [i for i in its if not (r == hang_r and i >= hang_it)]
            if not itr:
                continue
            cs = [sim[i][2][r] for i in itr]
            for name, kind, g in names:
                d, c = base[name]
                if kind == "compute":
                    sc = cs
                else:
                    x = job.xfer[g] or 1.0
                    sc = [max(0.05, sim[i][0]["_" + g][r] / x) for i in itr]
                s_sorted = sorted(sc)
                cnt = c * len(itr)
                p50 = d * s_sorted[(len(s_sorted) - 1) // 2]
                mn = d * s_sorted[0] * 0.97
                mx = d * s_sorted[-1] * 1.05
                p99 = mx * 0.99
                tot = d * c * sum(sc)
                if name == stall_k and r in job.stall:
                    st = [sim[i][3][r] for i in itr if sim[i][3][r] > 0]
                    if st:
                        mx = max(mx, max(st))
                        tot += sum(st)
                        if len(st) > 0.01 * cnt:
                            p99 = max(p99, min(st))
                add('{"type":"kernel","job":%s,"rank":%d,"iter":%d,"name":%s,"kind":"%s","count":%d,'
                    '"sum_us":%d,"min_us":%d,"max_us":%d,"p50_us":%d,"p99_us":%d}'
                    % (jid, r, its[0], json.dumps(name), kind, cnt, tot, max(1, mn), max(1, mx),
                       max(1, p50), max(1, min(p99, mx))))


def fault_tables(job):
    return {t for t in ("comp", "gapx", "datax", "nic", "expert", "iter_mult", "stall")
            if getattr(job, {"expert": "expert_mult"}.get(t, t))}


def lost(job, sim, onset, before):
    """Mean step lost per iteration from onset on, against the same job without the faults
    (all, and each when there are two); the noise drawn is the same (before: the rng's state
    before sim was simulated)."""
    if onset is None:
        return None, None
    state = job.rng.getstate()

    def again(disabled):
        job.rng.setstate(before)
        job.disabled = disabled
        s = job.simulate()
        job.disabled = set()
        return s

    tables = fault_tables(job)
    base = again(tables)
    each = {}
    if len(tables) > 1:
        for t in sorted(tables):
            s = again(tables - {t})
            each[t] = sum(s[i][4] - base[i][4] for i in range(onset, len(sim))) / 1000.0 / max(1, len(sim) - onset)
    job.rng.setstate(state)
    total = sum(sim[i][4] - base[i][4] for i in range(onset, len(sim))) / 1000.0 / max(1, len(sim) - onset)
    return round(total, 1), {k: round(v, 1) for k, v in each.items()} or None


def make_case(seed, index, out_dir, max_world=4096, kinds=None):
    """Draws case `index` of suite `seed`; writes its JSONL and truth; returns the truth.
    kinds: draw only from these kinds (names of KINDS); max_world: largest job."""
    rng = random.Random(seed * 1_000_003 + index)
    pool = [k for k in KINDS if not kinds or k[0] in kinds]
    if not pool:
        raise ValueError("no such kind: %s" % ",".join(kinds))
    kind = rng.choices([k[0] for k in pool], [k[1] for k in pool])[0]
    for attempt in range(6):
        job = Job(rng, kind, max_world)
        truth = inject(job)
        before = rng.getstate()
        sim = job.simulate()
        onset = truth.get("onset")
        if truth["category"] in ("none", "hang", "stage_imbalance") or truth.get("whole_trace"):
            break
        # a fault must cost the job something a person would call a slowdown: >= 8% step
        rise = step_rise(sim, onset)
        truth["step_rise"] = round(rise, 3)
        if rise >= 1.08:
            break
    if truth["category"] != "hang" and not truth.get("whole_trace"):
        truth["lost_ms"], truth["lost_ms_each"] = lost(job, sim, truth.get("onset"), before)
    case = "c%05d" % index
    job_id = "drawn-%d-%d" % (seed, index)
    path = os.path.join(out_dir, case + ".jsonl")
    write_case(job, sim, path, job_id)
    pattern = dict((k[0], k[2]) for k in KINDS)[kind]
    truth.update(case=case, kind=kind, patterns=pattern, job=job_id, world=job.world, tp=job.tp,
                 pp=job.pp, dp=job.dp, ep=job.ep, gpus_per_node=job.gpn, iters=job.iters,
                 noise=round(job.noise, 4), tracked_data=job.track_data)
    return save_truth(job, truth, out_dir, case)


def save_truth(job, truth, out_dir, case):
    """The truth's hosts (as the report names them: node-N without host lines) and rounded
    factors into out_dir/case.truth.json; returns it."""
    def named(r):
        return job.host(r) if job.write_hosts else "node-%d" % (r // job.gpn)
    truth["hosts"] = sorted({named(r) for r in truth["ranks"]})
    truth["rank_hosts"] = [named(r) for r in truth["ranks"]]
    if truth.get("advisory_ranks"):
        truth["advisory_hosts"] = sorted({job.host(r) for r in truth["advisory_ranks"]})
    for k in ("factor", "factor2"):
        if k in truth:
            truth[k] = round(truth[k], 3)
    with open(os.path.join(out_dir, case + ".truth.json"), "w") as f:
        json.dump(truth, f, sort_keys=True)
        f.write("\n")
    return truth


def cli(make, description, seed, max_world):
    """One case drawn by make(seed, index, out, max_world, kinds), its truth printed."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-world", type=int, default=max_world)
    ap.add_argument("--kinds", default="", help="comma-separated kinds to draw from")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    kinds = [k for k in a.kinds.split(",") if k]
    print(json.dumps(make(a.seed, a.index, a.out, a.max_world, kinds), sort_keys=True))


def main():
    cli(make_case, "draw one case of the drawn suite", 14, 4096)


if __name__ == "__main__":
    main()
