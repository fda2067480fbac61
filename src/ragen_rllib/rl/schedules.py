"""Learning-rate schedules as pure functions of the training step (verl/RAGEN style: warm-up, then decay)."""

from __future__ import annotations

import math

LR_DECAYS = ("constant", "linear", "cosine")


def lr_multiplier(step: int, *, warmup_steps: int = 0, decay: str = "constant", decay_steps: int | None = None,
                  min_ratio: float = 0.0) -> float:
    """Factor on the base learning rate for the update of training step ``step`` (0-based).

    Linear warm-up: ``(step + 1) / warmup_steps`` for the first ``warmup_steps`` updates (so the first update
    already moves). Then ``decay``: ``constant`` stays at 1; ``linear`` / ``cosine`` go from 1 right after the
    warm-up to ``min_ratio`` at step ``decay_steps`` (counted from step 0, warm-up included) and stay there.

    >>> [round(lr_multiplier(s, warmup_steps=2, decay="linear", decay_steps=6), 2) for s in range(8)]
    [0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    """
    if decay not in LR_DECAYS:
        raise ValueError(f"lr_decay={decay!r} is unknown: use one of {LR_DECAYS}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if decay == "constant":
        return 1.0
    if decay_steps is None or decay_steps <= warmup_steps:
        raise ValueError(f"lr_decay_steps={decay_steps!r} must be an integer > lr_warmup_steps={warmup_steps} "
                         f"with lr_decay={decay!r}")
    progress = min((step - warmup_steps) / (decay_steps - warmup_steps), 1.0)
    shape = 1.0 - progress if decay == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_ratio + (1.0 - min_ratio) * shape
