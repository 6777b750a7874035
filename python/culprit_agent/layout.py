"""The parallel layout (tp, cp, ep, dp, pp and their rank order) from the groups a training
script already has: Megatron's parallel_state, or a torch DeviceMesh (docs/agent.md,
"Parallel layout"). The result is the keyword arguments of Agent and Monitor.

culprit's order names the dimensions fastest first, as Megatron's does ("tp-cp-ep-dp-pp");
expert parallelism is carved out of data parallelism (dp counts every data-parallel rank,
ep divides it).
"""
import math

_ALIASES = {
    "tp": "tp", "tensor": "tp", "tensor_parallel": "tp",
    "cp": "cp", "context": "cp", "context_parallel": "cp",
    "ep": "ep", "expert": "ep", "expert_parallel": "ep",
    "dp": "dp", "data": "dp", "data_parallel": "dp", "dp_replicate": "dp", "dp_shard": "dp", "fsdp": "dp",
    "ddp": "dp", "replicate": "dp", "shard": "dp",
    "pp": "pp", "pipeline": "pp", "pipe": "pp", "pipeline_parallel": "pp",
}
_ALL = ("tp", "cp", "ep", "dp", "pp")


def from_megatron(parallel_state, order=None):
    """From megatron.core.parallel_state (the module, once initialize_model_parallel ran):
    the sizes its getters return; order is the one given to initialize_model_parallel
    (default Megatron's "tp-cp-ep-dp-pp")."""
    ps = parallel_state

    def size(getter, **kw):
        f = getattr(ps, getter, None)
        return int(f(**kw)) if f is not None else 1

    tp = size("get_tensor_model_parallel_world_size")
    pp = size("get_pipeline_model_parallel_world_size")
    cp = size("get_context_parallel_world_size")
    ep = size("get_expert_model_parallel_world_size")
    try:  # Megatron's data-parallel size leaves context parallelism out by default
        dp = size("get_data_parallel_world_size", with_context_parallel=False)
    except TypeError:
        dp = size("get_data_parallel_world_size")
    return {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp, "order": order or "tp-cp-ep-dp-pp"}


def from_device_mesh(mesh):
    """From a torch DeviceMesh with named dimensions (mesh_dim_names, e.g. ("pp", "dp", "tp")):
    its last dimension varies fastest, so culprit's order is the names reversed. Names: tp or
    tensor, cp or context, ep or expert, pp or pipeline, dp or data (dp_replicate and dp_shard
    of HSDP are data parallel too, and must be neighbours). Raises ValueError on a mesh
    without names, or with a name culprit cannot place."""
    names = getattr(mesh, "mesh_dim_names", None)
    if not names:
        raise ValueError("the DeviceMesh has no mesh_dim_names: name its dimensions (tp, dp, pp, ...)")
    shape = tuple(getattr(getattr(mesh, "mesh", None), "shape", None) or mesh.shape)
    if len(shape) != len(names):
        raise ValueError(f"the mesh has {len(shape)} dimensions and {len(names)} names")
    sizes, order = {d: 1 for d in _ALL}, []
    for name, n in zip(reversed(names), reversed(shape)):
        d = _ALIASES.get(str(name).lower())
        if d is None:
            raise ValueError(f"mesh dimension {name!r}: not one of tp, cp, ep, dp, pp (or their long names)")
        if d in order and order[-1] != d:
            raise ValueError(f"mesh dimensions of {d} are not neighbours: {names}")
        if d not in order:
            order.append(d)
        sizes[d] *= int(n)
    order += [d for d in _ALL if d not in order]
    sizes["dp"] *= sizes["ep"]  # culprit's dp counts every data-parallel rank; ep divides it
    if math.prod(sizes[d] for d in ("tp", "cp", "dp", "pp")) != math.prod(int(n) for n in shape):
        raise ValueError(f"mesh {names} {shape}: sizes do not multiply to its size")
    return dict(sizes, order="-".join(order))
