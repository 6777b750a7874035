"""Who this process is in its job, from the launcher that started it (docs/agent.md, "Identity").

Each field (job, rank, local_rank, world, local_world, node) is taken from the first of these
sources that sets it; the order is the same for every field:

  1. arguments given to Agent or Monitor (and, in Monitor, torch.distributed once initialised:
     rank and world)
  2. culprit's own variables: CULPRIT_JOB, CULPRIT_RANK, CULPRIT_LOCAL_RANK, CULPRIT_WORLD_SIZE,
     CULPRIT_LOCAL_WORLD_SIZE, CULPRIT_NODE
  3. torchrun / TorchElastic, and Kubeflow's PyTorchJob (the same variables): TORCHELASTIC_RUN_ID
     (not "none"), RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE
  4. Slurm: SLURM_JOB_NAME and SLURM_JOB_ID (job "NAME-ID"), SLURM_PROCID, SLURM_LOCALID,
     SLURM_NTASKS, SLURM_NTASKS_PER_NODE (or the first count of SLURM_TASKS_PER_NODE),
     SLURMD_NODENAME
  5. MPI launchers: Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), MPICH
     and Intel MPI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS), MVAPICH
     (MV2_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE)
  6. Kubernetes: JOBSET_NAME (job), NODE_NAME or KUBERNETES_NODE_NAME (the node, from the
     downward API: fieldRef spec.nodeName)
  7. defaults: rank 0, world 1, local rank = rank, the node = this host's name; no job.

torchrun comes before Slurm because under `srun torchrun ...` Slurm's task is torchrun's
agent, one per node, while RANK is the training process's own rank.
"""
import os
import re
import socket

FIELDS = ("job", "rank", "local_rank", "world", "local_world", "node")


def _slurm_job(env):
    jid = env.get("SLURM_JOB_ID")
    if not jid:
        return None
    name = env.get("SLURM_JOB_NAME")
    return f"{name}-{jid}" if name else jid


def _slurm_local_world(env):
    n = env.get("SLURM_NTASKS_PER_NODE")
    if n:
        return n
    m = re.match(r"(\d+)", env.get("SLURM_TASKS_PER_NODE", ""))  # "8(x4),7": the first node's count
    return m.group(1) if m else None


def _elastic_run_id(env):
    r = env.get("TORCHELASTIC_RUN_ID")
    return r if r and r != "none" else None


# (source, {field: function of the environment}), in the order of precedence
SOURCES = (
    ("culprit", {"job": lambda e: e.get("CULPRIT_JOB"), "rank": lambda e: e.get("CULPRIT_RANK"),
                 "local_rank": lambda e: e.get("CULPRIT_LOCAL_RANK"), "world": lambda e: e.get("CULPRIT_WORLD_SIZE"),
                 "local_world": lambda e: e.get("CULPRIT_LOCAL_WORLD_SIZE"), "node": lambda e: e.get("CULPRIT_NODE")}),
    ("torchrun", {"job": _elastic_run_id, "rank": lambda e: e.get("RANK"), "local_rank": lambda e: e.get("LOCAL_RANK"),
                  "world": lambda e: e.get("WORLD_SIZE"), "local_world": lambda e: e.get("LOCAL_WORLD_SIZE")}),
    ("slurm", {"job": _slurm_job, "rank": lambda e: e.get("SLURM_PROCID"), "local_rank": lambda e: e.get("SLURM_LOCALID"),
               "world": lambda e: e.get("SLURM_NTASKS"), "local_world": _slurm_local_world,
               "node": lambda e: e.get("SLURMD_NODENAME")}),
    ("mpi", {"rank": lambda e: e.get("OMPI_COMM_WORLD_RANK") or e.get("PMI_RANK") or e.get("MV2_COMM_WORLD_RANK"),
             "local_rank": lambda e: (e.get("OMPI_COMM_WORLD_LOCAL_RANK") or e.get("MPI_LOCALRANKID")
                                      or e.get("MV2_COMM_WORLD_LOCAL_RANK")),
             "world": lambda e: e.get("OMPI_COMM_WORLD_SIZE") or e.get("PMI_SIZE") or e.get("MV2_COMM_WORLD_SIZE"),
             "local_world": lambda e: (e.get("OMPI_COMM_WORLD_LOCAL_SIZE") or e.get("MPI_LOCALNRANKS")
                                       or e.get("MV2_COMM_WORLD_LOCAL_SIZE"))}),
    ("kubernetes", {"job": lambda e: e.get("JOBSET_NAME"),
                    "node": lambda e: e.get("NODE_NAME") or e.get("KUBERNETES_NODE_NAME")}),
)

_INTS = ("rank", "local_rank", "world", "local_world")


def identity(env=None, **given):
    """{field: value} and {field: source} for this process: given (non-None keyword arguments
    among FIELDS) first, then the sources in order. Raises ValueError on a variable that is not
    a number where one is needed, naming it."""
    env = os.environ if env is None else env
    out, src = {}, {}
    for f in FIELDS:
        if given.get(f) is not None:
            out[f], src[f] = given[f], "argument"
            continue
        for name, fields in SOURCES:
            fn = fields.get(f)
            v = fn(env) if fn else None
            if v:
                out[f], src[f] = v, name
                break
    for f in _INTS:
        if f in out:
            try:
                out[f] = int(out[f])
            except (TypeError, ValueError):
                raise ValueError(f"{f} from {src[f]}: {out[f]!r} is not a number") from None
    defaults = {"rank": 0, "world": 1, "local_rank": out.get("rank", 0), "local_world": 0,
                "node": socket.gethostname(), "job": None}
    for f, v in defaults.items():
        if f not in out:
            out[f], src[f] = v, "default"
    return out, src
