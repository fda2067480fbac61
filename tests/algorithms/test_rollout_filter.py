"""Driver-side rollout filtering: whole groups survive, metrics count what was kept and dropped."""

from types import SimpleNamespace

import pytest

from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.algorithms.ragen.driver.rollout_filter import filter_trajectories
from ragen_rllib.core import keys as K


def cfg(**kw):
    base = dict(filter_strategy="top_k", filter_value=0.5, filter_keep="largest", filter_top_p_mode="linear",
                filter_include_zero=True, filter_metric="reward_std", filter_min_std=0.0)
    return SimpleNamespace(**{**base, **kw})


def trajectories():
    # group 1: rewards 0, 1 (std .71); group 2: 1, 1 (std 0); group 3: 0, .5 (std .35); group 4: 0, 0 + an error
    rewards = {1: [0.0, 1.0], 2: [1.0, 1.0], 3: [0.0, 0.5], 4: [0.0, 0.0]}
    out = [Trajectory(env_id="e", group_id=g, seed=g, score=r) for g, rs in rewards.items() for r in rs]
    out.append(Trajectory(env_id="e", group_id=3, seed=3, score=9.0, error="ValueError: boom"))
    return out


def test_top_half_by_std_keeps_whole_groups():
    kept, m = filter_trajectories(trajectories(), cfg())
    assert sorted(t.group_id for t in kept) == [1, 1, 3, 3]
    assert m[K.FILTER_KEPT_GROUPS] == 2 and m[K.FILTER_KEPT_RATIO] == 0.5 and m[K.FILTER_ZERO_VARIANCE_GROUPS] == 2
    assert m[K.FILTER_KEPT_REWARD_STD_MEAN] == pytest.approx((0.5 ** 0.5 + 0.125 ** 0.5) / 2)


def test_dropping_zero_variance_groups_first():
    kept, m = filter_trajectories(trajectories(), cfg(filter_strategy="top_k_abs", filter_value=4,
                                                      filter_include_zero=False))
    assert sorted({t.group_id for t in kept}) == [1, 3] and m[K.FILTER_KEPT_GROUPS] == 2


def test_a_std_floor_drops_groups_that_differ_by_less():
    """filter_min_std=0.4: group 3 (std .35, e.g. step penalties only) counts as zero-variance too; group 1
    (std .71, outcomes differ) stays."""
    kept, m = filter_trajectories(trajectories(), cfg(filter_strategy="top_k_abs", filter_value=4,
                                                      filter_include_zero=False, filter_min_std=0.4))
    assert {t.group_id for t in kept} == {1} and m[K.FILTER_ZERO_VARIANCE_GROUPS] == 3
    kept, _ = filter_trajectories(trajectories(), cfg(filter_strategy="top_k_abs", filter_value=4,
                                                      filter_include_zero=False, filter_min_std=0.8))
    assert kept == []  # nothing left: the update is skipped, not made on noise


def test_off_keeps_every_healthy_trajectory_and_reports_nothing():
    kept, m = filter_trajectories(trajectories(), cfg(filter_strategy=None))
    assert len(kept) == 8 and m == {}
