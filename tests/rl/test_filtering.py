"""Rollout filtering (StarPO-S): whole groups kept by in-group reward std; expected sets worked out by hand."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_rllib.rl.filtering import group_scores, select_groups

SCORES = torch.tensor([0.5, 0.0, 0.3, 0.2])


def kept(mask: torch.Tensor) -> list[int]:
    return mask.nonzero().squeeze(-1).tolist()


@pytest.mark.parametrize("strategy, value, kwargs, expected", [
    ("top_p", 0.6, {}, [0, 2]),  # sorted .5 .3 .2 0: cumsum .5, .8 >= .6 * 1.0
    ("top_p", 0.9, {}, [0, 2, 3]),  # .5 .8 1.0 >= .9
    ("top_p", 0.5, {"top_p_mode": "softmax"}, [0, 2]),  # softmax .316 .259 ...: .316 + .259 >= .5
    ("top_k", 0.25, {}, [0]),
    ("top_k", 0.5, {}, [0, 2]),
    ("top_k_abs", 3, {}, [0, 2, 3]),
    ("min_p", 0.5, {}, [0, 2]),  # >= .25
    ("top_k", 0.5, {"keep": "smallest"}, [1, 3]),  # preference .5 - s = 0 .5 .2 .3
    ("min_p", 0.5, {"keep": "smallest"}, [1, 3]),  # preference >= .25
    ("top_k_abs", 4, {"zero_variance": SCORES == 0}, [0, 2, 3]),
])
def test_select_groups_by_hand(strategy, value, kwargs, expected):
    assert kept(select_groups(SCORES, strategy, value, **kwargs)) == expected


def test_all_zero_variance_keeps_nothing():
    assert kept(select_groups(torch.zeros(3), "top_p", 0.9, zero_variance=torch.ones(3, dtype=torch.bool))) == []


def test_group_scores_use_the_in_group_std():
    values = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    groups = torch.tensor([4, 4, 4, 9, 9, 9, 7])
    uniq, inv, scores, std = group_scores(values, groups)
    assert uniq.tolist() == [4, 7, 9] and inv.tolist() == [0, 0, 0, 2, 2, 2, 1]
    torch.testing.assert_close(scores, torch.tensor([math.sqrt(1 / 3), 0.0, 0.0]))
    _, _, means, _ = group_scores(values, groups, "reward_mean")
    torch.testing.assert_close(means, torch.tensor([2 / 3, 2.0, 1.0]))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12), st.floats(0.01, 1.0))
def test_top_k_keeps_the_requested_fraction_of_the_best(values, fraction):
    scores = torch.tensor(values)
    mask = select_groups(scores, "top_k", fraction)
    count = max(1, min(len(values), int(math.floor(fraction * len(values) + 0.5))))
    assert int(mask.sum()) == count
    if mask.any() and (~mask).any():
        assert scores[mask].min() >= scores[~mask].max()


def test_bad_strategy_is_named():
    with pytest.raises(ValueError, match="filter_strategy='top_q'"):
        select_groups(SCORES, "top_q", 0.5)
