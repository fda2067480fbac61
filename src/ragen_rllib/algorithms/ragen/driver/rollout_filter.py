"""StarPO-S rollout filtering on the driver: keep whole groups of a step's trajectories (see rl.filtering)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ragen_rllib.agent import episode as E
from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.core import keys as K
from ragen_rllib.rl.filtering import group_scores, select_groups


def filter_trajectories(trajectories: Sequence[Trajectory], cfg) -> tuple[list[Trajectory], dict[str, float]]:
    """The trajectories of the groups ``cfg.filter_strategy`` keeps, and the filter's metrics.

    Groups are scored by ``cfg.filter_metric`` (in-group reward std by default); with
    ``cfg.filter_include_zero=False`` groups whose rewards are all equal (in-group reward std at most
    ``cfg.filter_min_std``) are dropped first. Failed
    trajectories (``error``) are never trained and do not count.
    """
    ok = [t for t in trajectories if t.error is None]
    if cfg.filter_strategy is None or not ok:
        return ok, {}
    rewards = torch.tensor([t.score for t in ok], dtype=torch.float64)
    groups = torch.tensor([t.group_id for t in ok], dtype=torch.long)
    if cfg.filter_metric == "response_length":
        values = torch.tensor([t.metrics.get(E.M_RESPONSE_LENGTH, 0.0) for t in ok], dtype=torch.float64)
        uniq, inv, scores, _ = group_scores(values, groups, "response_length")
        _, _, _, std = group_scores(rewards, groups)
    else:
        uniq, inv, scores, std = group_scores(rewards, groups, cfg.filter_metric)
    zero = std <= cfg.filter_min_std
    keep = select_groups(scores, cfg.filter_strategy, cfg.filter_value, keep=cfg.filter_keep,
                         top_p_mode=cfg.filter_top_p_mode, zero_variance=None if cfg.filter_include_zero else zero)
    kept = [t for t, g in zip(ok, inv.tolist()) if bool(keep[g])]
    metrics = {
        K.FILTER_KEPT_RATIO: float(keep.double().mean()),
        K.FILTER_KEPT_GROUPS: float(keep.sum()),
        K.FILTER_ZERO_VARIANCE_GROUPS: float(zero.sum()),
        K.FILTER_KEPT_REWARD_STD_MEAN: float(std[keep].mean()) if bool(keep.any()) else 0.0,
    }
    return kept, metrics


def varied_groups(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """The healthy trajectories of groups whose rewards are not all equal (DAPO's dynamic sampling)."""
    ok = [t for t in trajectories if t.error is None]
    scores: dict[int, set[float]] = {}
    for t in ok:
        scores.setdefault(t.group_id, set()).add(t.score)
    return [t for t in ok if len(scores[t.group_id]) > 1]
