"""culprit_agent.identity and culprit_agent.layout: who a process is from its launcher's
variables, in the documented order, and the parallel layout from Megatron's parallel_state or
a DeviceMesh. Megatron is not installed here and Debian's torch (1.13) has no DeviceMesh:
their stand-ins carry the same attributes and getters the real ones do."""
import sys
import unittest

from culprit_agent import identity, layout

SRUN = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "llm", "SLURM_PROCID": "9", "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "16", "SLURM_TASKS_PER_NODE": "8(x2)", "SLURMD_NODENAME": "gpu-17"}
TORCHRUN = {"TORCHELASTIC_RUN_ID": "run-7", "RANK": "12", "LOCAL_RANK": "4", "WORLD_SIZE": "64",
            "LOCAL_WORLD_SIZE": "8"}


class Identity(unittest.TestCase):
    def test_slurm(self):
        ident, src = identity.identity(SRUN)
        self.assertEqual(ident, {"job": "llm-4242", "rank": 9, "local_rank": 1, "world": 16, "local_world": 8,
                                 "node": "gpu-17"})
        self.assertEqual(set(src.values()), {"slurm"})
        ident, _ = identity.identity(dict(SRUN, SLURM_NTASKS_PER_NODE="4"))
        self.assertEqual(ident["local_world"], 4)
        ident, _ = identity.identity({"SLURM_JOB_ID": "5"})
        self.assertEqual(ident["job"], "5")

    def test_torchrun_under_slurm(self):
        # srun torchrun: Slurm's task is torchrun's agent; RANK is the process's own
        ident, src = identity.identity(dict(SRUN, **TORCHRUN))
        self.assertEqual((ident["job"], ident["rank"], ident["world"], ident["local_rank"]), ("run-7", 12, 64, 4))
        self.assertEqual(src["rank"], "torchrun")
        self.assertEqual((ident["node"], src["node"]), ("gpu-17", "slurm"))  # torchrun names no node
        ident, src = identity.identity(dict(SRUN, **dict(TORCHRUN, TORCHELASTIC_RUN_ID="none")))
        self.assertEqual((ident["job"], src["job"]), ("llm-4242", "slurm"))

    def test_culprit_and_arguments_first(self):
        env = dict(SRUN, **TORCHRUN, CULPRIT_JOB="mine", CULPRIT_NODE="n1", CULPRIT_RANK="2")
        ident, src = identity.identity(env)
        self.assertEqual((ident["job"], ident["node"], ident["rank"]), ("mine", "n1", 2))
        ident, src = identity.identity(env, job="given", rank=5)
        self.assertEqual((ident["job"], ident["rank"], src["job"]), ("given", 5, "argument"))

    def test_mpi(self):
        ident, src = identity.identity({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
                                        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
        self.assertEqual((ident["rank"], ident["world"], ident["local_rank"], ident["local_world"]), (3, 4, 1, 2))
        ident, _ = identity.identity({"PMI_RANK": "7", "PMI_SIZE": "8", "MPI_LOCALRANKID": "3"})
        self.assertEqual((ident["rank"], ident["world"], ident["local_rank"]), (7, 8, 3))
        # Slurm's job around an MPI step; Slurm's rank first (srun --mpi sets both alike)
        ident, src = identity.identity(dict(PMI_RANK="7", PMI_SIZE="8", SLURM_JOB_ID="11"))
        self.assertEqual((ident["job"], ident["rank"], src["rank"]), ("11", 7, "mpi"))

    def test_kubernetes(self):
        env = {"JOBSET_NAME": "js", "NODE_NAME": "ip-10-0-0-7", "RANK": "1", "WORLD_SIZE": "2"}
        ident, src = identity.identity(env)
        self.assertEqual((ident["job"], ident["node"], src["node"], ident["rank"]), ("js", "ip-10-0-0-7",
                                                                                      "kubernetes", 1))

    def test_defaults_and_errors(self):
        ident, src = identity.identity({})
        self.assertEqual((ident["job"], ident["rank"], ident["world"], src["rank"]), (None, 0, 1, "default"))
        with self.assertRaisesRegex(ValueError, "rank from slurm: 'x' is not a number"):
            identity.identity({"SLURM_PROCID": "x"})


class Mesh:
    """torch.distributed.device_mesh.DeviceMesh's attributes: mesh (a tensor) and its names"""

    def __init__(self, names, shape):
        self.mesh_dim_names = names
        self.mesh = type("T", (), {"shape": shape})()


class Megatron:
    """megatron.core.parallel_state's getters"""

    @staticmethod
    def get_tensor_model_parallel_world_size():
        return 8

    @staticmethod
    def get_pipeline_model_parallel_world_size():
        return 4

    @staticmethod
    def get_context_parallel_world_size():
        return 2

    @staticmethod
    def get_expert_model_parallel_world_size():
        return 4

    @staticmethod
    def get_data_parallel_world_size(with_context_parallel=False):
        return 16 if with_context_parallel else 8


class Layout(unittest.TestCase):
    def test_device_mesh(self):
        self.assertEqual(layout.from_device_mesh(Mesh(("pp", "dp", "tp"), (4, 16, 8))),
                         {"tp": 8, "cp": 1, "ep": 1, "dp": 16, "pp": 4, "order": "tp-dp-pp-cp-ep"})
        # HSDP: replicate and shard are both data parallel, and neighbours
        self.assertEqual(layout.from_device_mesh(Mesh(("dp_replicate", "dp_shard", "tp"), (2, 4, 8)))["dp"], 8)
        with self.assertRaisesRegex(ValueError, "not neighbours"):
            layout.from_device_mesh(Mesh(("dp_replicate", "tp", "dp_shard"), (2, 8, 4)))
        with self.assertRaisesRegex(ValueError, "no mesh_dim_names"):
            layout.from_device_mesh(Mesh(None, (8,)))
        with self.assertRaisesRegex(ValueError, "'xyz'"):
            layout.from_device_mesh(Mesh(("xyz",), (8,)))
        m = layout.from_device_mesh(Mesh(("dp", "ep", "tp"), (2, 4, 8)))
        self.assertEqual((m["dp"], m["ep"], m["order"]), (8, 4, "tp-ep-dp-cp-pp"))

    def test_megatron(self):
        self.assertEqual(layout.from_megatron(Megatron),
                         {"tp": 8, "cp": 2, "ep": 4, "dp": 8, "pp": 4, "order": "tp-cp-ep-dp-pp"})

    def test_agent_takes_layout(self):
        from culprit_agent import agent
        self.assertEqual(agent._resolve_layout(Megatron)["tp"], 8)
        self.assertEqual(agent._resolve_layout(Mesh(("dp", "tp"), (2, 4)))["order"], "tp-dp-cp-ep-pp")
        with self.assertRaises(ValueError):
            agent._resolve_layout(42)


if __name__ == "__main__":
    sys.exit(unittest.main())
