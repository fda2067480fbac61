"""RAGEN's rollout metrics over a step's trajectories (``result["env_runners"]``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ragen_rllib.agent import episode as E
from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.core import keys as K


def rollout_metrics(trajectories: Sequence[Trajectory], rollout_seconds: float) -> dict[str, float]:
    """Means over trajectories, pass@k and in-group reward std over groups, tokens/s over the step.

    ``pass_at_k``: share of groups with at least one success (k = the group size). With several env ids
    in the batch (a multi-env run's tags) or agents' sides of multi-agent episodes (env id ``<agent>`` or
    ``<tag>/<agent>``), every metric is also reported per env id as ``"<env id>/<metric>"``.
    """
    ok = [t for t in trajectories if t.error is None]
    out = {K.RUNNER_ERRORS: float(len(trajectories) - len(ok))}
    if not ok:
        return out
    out.update(_summary(ok))
    tokens = sum(t.metrics.get(E.M_RESPONSE_LENGTH, 0.0) * t.metrics.get(E.M_NUM_TURNS, 0.0) for t in ok)
    out[K.GENERATED_TOKENS_PER_S] = tokens / max(rollout_seconds, 1e-9)
    env_ids = sorted({t.env_id for t in ok})
    if len(env_ids) > 1 or any(t.agent is not None for t in ok):
        for env_id in env_ids:
            for key, value in _summary([t for t in ok if t.env_id == env_id]).items():
                out[f"{env_id}/{key}"] = value
    return out


def _summary(trajs: Sequence[Trajectory]) -> dict[str, float]:
    def mean(key: str) -> float:
        return float(np.mean([t.metrics.get(key, 0.0) for t in trajs]))

    groups: dict[int, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        groups[t.group_id].append(t)
    return {
        K.SUCCESS_RATE: mean(E.M_SUCCESS),
        K.EPISODE_RETURN_MEAN: float(np.mean([t.score for t in trajs])),
        K.ACTION_VALID_RATE: mean(E.M_VALID),
        K.EFFECTIVE_ACTION_RATE: mean(E.M_EFFECTIVE),
        K.TURNS_MEAN: mean(E.M_NUM_TURNS),
        K.RESPONSE_TOKENS_MEAN: mean(E.M_RESPONSE_LENGTH),
        K.PASS_AT_K: float(np.mean([any(t.metrics.get(E.M_SUCCESS, 0.0) > 0 for t in g) for g in groups.values()])),
        K.IN_GROUP_REWARD_STD_MEAN: float(np.mean([np.std([t.score for t in g]) for g in groups.values()])),
        K.IN_GROUP_REWARD_MEAN: float(np.mean([np.mean([t.score for t in g]) for g in groups.values()])),
    }
