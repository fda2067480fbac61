"""The one device rule: where a learner trains, where a runner's engine generates, and which device the learner
memory estimate sizes. Every reader asks here, so that on a GPU machine they cannot disagree.

A process works on CUDA when its config gives it GPUs (``num_gpus_per_learner`` for a learner,
``num_gpus_per_env_runner`` for a runner's engine) and it sees CUDA; with no GPU count (a standalone engine,
``ragen-rllib eval``) any visible GPU counts. Everything else works on the CPU. Ray hides the GPUs from a process
it gave none, so in a Ray worker the two conditions agree; in a driver (a local learner or runner) the count
decides, as it does for RLlib's own learners.
"""

from __future__ import annotations


def device_type(num_gpus: float | None = None) -> str:
    """``"cuda"`` or ``"cpu"`` for a process given ``num_gpus`` GPUs (None: not configured), by the rule above."""
    import torch

    if num_gpus is not None and planned_device_type(num_gpus) == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def planned_device_type(num_gpus: float | None) -> str:
    """The device a process given ``num_gpus`` GPUs will work on, judged from a driver that may see no GPU itself
    (the config's memory check before any actor starts): ``"cuda"`` for a positive count, else ``"cpu"``."""
    return "cuda" if num_gpus is not None and num_gpus > 0 else "cpu"
