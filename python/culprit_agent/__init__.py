"""culprit_agent: stream a training job's timings to culpritd (docs/agent.md).

    from culprit_agent import Agent
    a = Agent("culprit:7433", "my-job", rank, world)
    for i in range(steps):
        a.begin_iteration(i)
        with a.phase("forward", "compute"):
            ...
        a.end_iteration()
    a.close()

For PyTorch, culprit_agent.torch.Monitor(model, optimizer, dataloader) does this itself.
"""
from .agent import Agent

__all__ = ["Agent"]
