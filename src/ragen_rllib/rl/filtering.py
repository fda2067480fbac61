"""StarPO-S / RAGEN-2 rollout filtering: keep whole groups chosen by a per-group score (pure functions).

A group is the set of trajectories that share one env seed. Each group gets a score (by default its
in-group reward std: a group whose trajectories all score the same carries no GRPO signal), and a
strategy picks the groups to train on. Everything here works on ``[G]`` per-group tensors.
"""

from __future__ import annotations

import math

import torch

from ragen_rllib.rl.tokens import group_stats

FILTER_STRATEGIES = ("top_p", "top_k", "top_k_abs", "min_p")
TOP_P_MODES = ("linear", "softmax")
KEEP = ("largest", "smallest")
FILTER_METRICS = ("reward_std", "reward_mean", "response_length")


def _check(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key}={value!r} is not supported: use one of {allowed}")


def group_scores(values: torch.Tensor, group_ids: torch.Tensor, metric: str = "reward_std"):
    """Score each group by ``metric`` over its trajectories.

    Args:
        values: ``[B]`` per-trajectory rewards (``reward_std`` / ``reward_mean``) or response lengths
            (``response_length``: the group's mean length).
        group_ids: ``[B]`` long.

    Returns:
        ``(unique_ids [G] sorted, inverse [B], scores [G], reward_std [G])``; ``reward_std`` is the
        in-group std of ``values`` whatever the metric (used for the zero-variance rule).
    """
    _check("filter_metric", metric, FILTER_METRICS)
    uniq, inv, _, mean, std = group_stats(values, group_ids)
    return uniq, inv, (std if metric == "reward_std" else mean), std


def select_groups(
    scores: torch.Tensor,
    strategy: str = "top_p",
    value: float = 0.9,
    *,
    keep: str = "largest",
    top_p_mode: str = "linear",
    zero_variance: torch.Tensor | None = None,
) -> torch.Tensor:
    """Which groups to keep.

    The rule ranks groups by preference ``x``: ``x = score`` (``keep="largest"``) or
    ``x = max(score) - score`` (``"smallest"``), so both directions use the same rules:

    - ``top_p`` linear: the fewest best groups whose summed ``x`` reaches ``value * sum(x)`` (``x``
      shifted to be >= 0 first); softmax: the fewest best groups whose ``softmax(x)`` mass reaches ``value``.
    - ``top_k``: the best ``round(value * G)`` groups (at least 1); ``top_k_abs``: the best ``int(value)``.
    - ``min_p``: groups with ``x >= value * max(x)``.

    Ties at the cut keep the earlier group (stable sort). ``zero_variance`` ``[G]`` bool marks groups to
    drop before the rule (RAGEN's ``include_zero=False``); if every group is dropped, nothing is kept.

    Args:
        scores: ``[G]`` per-group scores (:func:`group_scores`).

    Returns:
        ``[G]`` bool mask of kept groups.
    """
    _check("filter_strategy", strategy, FILTER_STRATEGIES)
    _check("filter_keep", keep, KEEP)
    _check("filter_top_p_mode", top_p_mode, TOP_P_MODES)
    if scores.dim() != 1:
        raise ValueError(f"scores must be [G]; got {tuple(scores.shape)}")
    G = scores.numel()
    alive = torch.ones(G, dtype=torch.bool) if zero_variance is None else ~zero_variance.to(torch.bool)
    out = torch.zeros(G, dtype=torch.bool)
    if not bool(alive.any()):
        return out
    idx = alive.nonzero().squeeze(-1)
    s = scores[idx].double()
    x = s if keep == "largest" else s.max() - s
    if strategy == "min_p":
        chosen = x >= value * x.max()
    else:
        order = torch.sort(x, descending=True, stable=True).indices
        n = len(order)
        if strategy == "top_k":
            count = max(1, min(n, int(math.floor(value * n + 0.5))))
        elif strategy == "top_k_abs":
            count = max(0, min(n, int(value)))
        else:  # top_p
            ranked = x[order]
            if top_p_mode == "softmax":
                mass = torch.softmax(ranked, dim=0)
            else:
                shifted = ranked - min(0.0, float(ranked.min()))
                total = float(shifted.sum())
                mass = shifted / total if total > 0 else torch.full_like(shifted, 1.0 / n)
            reached = torch.cumsum(mass, dim=0) >= value - 1e-12
            count = int(reached.nonzero()[0]) + 1 if bool(reached.any()) else n
        chosen = torch.zeros(n, dtype=torch.bool)
        chosen[order[:count]] = True
    out[idx] = chosen
    return out
