"""Driver-side collapse diagnostics: RAGEN-2's prompt/reasoning mutual information on a few trajectories."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.core import keys as K
from ragen_rllib.rl.diagnostics import reasoning_mutual_information

THINK_END = "</think>"


def first_turn(traj: Trajectory, decode: Callable[[list[int]], str]) -> tuple[list[int], list[int]] | None:
    """``(prompt ids, reasoning ids)`` of a trajectory's first turn; the reasoning is the response up to and
    including ``</think>`` (the whole response when it has none). None when the turn is missing."""
    if not traj.samples or not traj.response_ids or not traj.response_ids[0]:
        return None
    sample = traj.samples[0]
    start = next((i for i, m in enumerate(sample.loss_mask) if m), None)
    if start is None:
        return None
    response = traj.response_ids[0]
    for k in range(1, len(response) + 1):
        if THINK_END in decode(response[:k]):
            return list(sample.input_ids[:start]), list(response[:k])
    return list(sample.input_ids[:start]), list(response)


def reasoning_mi_metrics(trajectories: Sequence[Trajectory], samples: int, decode: Callable[[list[int]], str],
                         score: Callable[[list[list[int]], list[list[int]]], list[list[float]]]) -> dict[str, float]:
    """Score every sampled reasoning under every sampled prompt (one trajectory per group, up to
    ``samples``) with ``score`` (an engine's ``score``) and estimate the mutual information."""
    picked, seen = [], set()
    for t in trajectories:
        if t.error is None and t.group_id not in seen and (pair := first_turn(t, decode)) is not None:
            seen.add(t.group_id)
            picked.append(pair)
        if len(picked) == samples:
            break
    if len(picked) < 2:
        return {}
    prompts = [p for _ in picked for p, _ in picked]
    conts = [z for _, z in picked for _ in picked]  # row i (reasoning i) x column j (prompt j)
    sums = [sum(lp) for lp in score(prompts, conts)]
    cross = torch.tensor(sums, dtype=torch.float64).reshape(len(picked), len(picked))
    mi, retrieval = reasoning_mutual_information(cross)
    return {K.REASONING_MI: mi, K.REASONING_MI_UPPER: float(torch.log(torch.tensor(float(len(picked))))),
            K.REASONING_RETRIEVAL: retrieval}
