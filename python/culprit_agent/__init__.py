"""culprit_agent: stream a training job's timings to culpritd (docs/agent.md).

    from culprit_agent import Agent
    a = Agent("culprit:7433", "my-job", rank, world)
    for i in range(steps):
        a.begin_iteration(i)
        with a.phase("forward", "compute"):
            ...
        a.end_iteration()
    a.close()

The job, rank, world and node come from the launcher when not given (culprit_agent.identity:
Slurm, torchrun, MPI, Kubernetes). For PyTorch, culprit_agent.torch.Monitor(model, optimizer,
dataloader) does all of this itself; culprit_agent.client reads culpritd's REST API.

Importing the package loads the agent library (the wheel carries it); when it cannot be
loaded the import fails with ImportError naming every path tried.
"""
from . import _lib

try:
    _lib.load()
except OSError as e:
    raise ImportError(f"culprit_agent: {e}") from None

from .agent import Agent  # noqa: E402

__all__ = ["Agent"]
