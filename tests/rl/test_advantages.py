"""Advantage estimators on tiny hand-computed tensors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_rllib.rl.advantages import bilevel_gae, gae, grpo, reinforce_pp, rloo
from ragen_rllib.rl.tokens import broadcast_to_tokens, token_rewards, turn_token_rewards


def test_token_rewards_put_scores_on_the_given_token():
    out = token_rewards(torch.tensor([1.0, -2.0]), torch.tensor([2, 0]), 4)
    assert out.tolist() == [[0, 0, 1, 0], [-2, 0, 0, 0]]
    out = turn_token_rewards(torch.tensor([[0.5, 1.0], [3.0, 9.0]]), torch.tensor([[1, 3], [2, -1]]), 4)
    assert out.tolist() == [[0, 0.5, 0, 1.0], [0, 0, 3.0, 0]]
    with pytest.raises(ValueError, match="last_index"):
        token_rewards(torch.tensor([1.0]), torch.tensor([4]), 4)


def test_gae_skips_untrained_tokens_between_turns():
    # mask: turn 1 = tokens 0,1; env tokens 2,3; turn 2 = token 4. Reward 1 on token 4.
    mask = torch.tensor([[1, 1, 0, 0, 1]])
    values = torch.tensor([[0.5, 0.25, 9.0, 9.0, 0.75]])  # values at env tokens must be ignored
    rewards = torch.tensor([[0, 0, 0, 0, 1.0]])
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=1.0, whiten=False)
    # lam = gamma = 1: A_t = R - V_t with R = 1 for every trained token
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.75, 0, 0, 0.25]]))
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 0, 0, 1.0]]))
    adv, _ = gae(rewards, values, mask, gamma=0.5, lam=0.5, whiten=False)
    # token 4: d = 1 - 0.75 = 0.25; token 1: d = 0.5*0.75 - 0.25 = 0.125, A = 0.125 + 0.25*0.25 = 0.1875
    # token 0: d = 0.5*0.25 - 0.5 = -0.375, A = -0.375 + 0.25*0.1875 = -0.328125
    torch.testing.assert_close(adv, torch.tensor([[-0.328125, 0.1875, 0, 0, 0.25]]))


def test_gae_whitening_over_the_mask():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv, _ = gae(torch.tensor([[0, 1.0, 0], [2.0, 0, 0]]), torch.zeros(2, 3), mask)
    real = adv[mask.bool()]
    assert abs(real.mean().item()) < 1e-6 and abs(real.std().item() - 1) < 1e-3 and adv[0, 2] == 0


def test_bilevel_gae_discounts_between_turns():
    # two turns: tokens 0-1 (end 1) and token 3 (end 3); token 2 is env. Values 0: G = discounted turn rewards.
    mask = torch.tensor([[1, 1, 0, 1]])
    adv, ret = bilevel_gae(torch.tensor([[0.0, 1.0]]), torch.tensor([[1, 3]]), torch.zeros(1, 4), mask,
                           high_gamma=0.5, whiten=False)
    # turn 2: G = 1; turn 1: G = 0 + 0.5 * 1 = 0.5; inside turn 1 token 0 gets the turn-end advantage (V = 0)
    torch.testing.assert_close(ret, torch.tensor([[0.5, 0.5, 0, 1.0]]))
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.5, 0, 1.0]]))


def test_grpo_and_dr_grpo_and_rloo_by_hand():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 5.0, 2.0])
    groups = torch.tensor([7, 7, 7, 7, 3, 9])  # group 7 of four, two singletons
    adv = grpo(scores, groups)
    std = torch.tensor([1.0, 0.0, 0.0, 1.0]).std().item()  # unbiased: sqrt(1/3)
    expected = [0.5 / (std + 1e-6), -0.5 / (std + 1e-6), -0.5 / (std + 1e-6), 0.5 / (std + 1e-6), 0.0, 0.0]
    torch.testing.assert_close(adv, torch.tensor(expected))
    torch.testing.assert_close(grpo(scores, groups, norm_by_std=False), torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0]))
    # RLOO: 1 - mean(0, 0, 1) = 2/3
    torch.testing.assert_close(rloo(scores, groups), torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3, 0, 0]))
    assert grpo(torch.tensor([2.0, 2.0]), torch.tensor([0, 0])).tolist() == [0.0, 0.0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-5, 5)), min_size=1, max_size=20))
def test_grpo_advantages_sum_to_zero_per_group(pairs):
    groups = torch.tensor([g for g, _ in pairs])
    adv = grpo(torch.tensor([s for _, s in pairs], dtype=torch.float64), groups)
    for g in groups.unique():
        assert abs(adv[groups == g].sum().item()) < 1e-4


def test_reinforce_pp_return_to_go_and_broadcast():
    mask = torch.tensor([[1, 0, 1, 1]])
    out = reinforce_pp(torch.tensor([[0, 0, 0, 2.0]]), mask, gamma=0.5, whiten=False)
    torch.testing.assert_close(out, torch.tensor([[0.5, 0, 1.0, 2.0]]))
    assert broadcast_to_tokens(torch.tensor([3.0]), mask).tolist() == [[3.0, 0, 3.0, 3.0]]
