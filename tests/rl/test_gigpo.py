"""GiGPO: episode-level GRPO plus step-level advantages over identical anchor states (hand-computed)."""

import random
import statistics

import pytest
import torch

from ragen_rllib.rl.advantages import discounted_returns, gigpo
from ragen_rllib.rl.tokens import steps_to_tokens


def episodes():
    """Group 0: a, b, c (shared start state 0); group 1: d (state 0 too, but another group)."""
    states = torch.tensor([[0, 1, 0], [0, 2, 0], [0, 1, 3], [0, 0, 0]])
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    return torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 0, 1]), rewards, mask, states


def test_discounted_returns_skip_padding():
    _, _, rewards, mask, _ = episodes()
    expected = torch.tensor([[0.5, 1.0, 0.0], [0.0, 0.0, 0.0], [0.25, 0.5, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(discounted_returns(rewards, mask, 0.5), expected, check_dtype=False)


def test_gigpo_mean_centred_by_hand():
    scores, groups, rewards, mask, states = episodes()
    out = gigpo(scores, groups, rewards, mask, states, gamma=0.5, norm_by_std=False)
    # episode level: group 0 mean 2/3 -> a, c: +1/3, b: -2/3; d is alone -> 0.
    # steps: state 0 in group 0 has returns a .5, b 0, c .25 (mean .25); state 1: a 1, c .5 (mean .75);
    # states 2 and 3 are met once -> 0; d's state 0 is another group's -> alone -> 0.
    e = 1 / 3
    expected = torch.tensor([[e + 0.25, e + 0.25, 0.0], [-2 * e - 0.25, -2 * e, 0.0], [e, e - 0.25, e],
                             [0.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(out, expected, check_dtype=False)
    half = gigpo(scores, groups, rewards, mask, states, gamma=0.5, norm_by_std=False, step_weight=0.5)
    torch.testing.assert_close(half[0, 0], torch.tensor(e + 0.125), check_dtype=False)


def reference(scores, groups, rewards, mask, states, gamma, weight, eps=1e-6):
    """Plain-Python GiGPO with std normalisation (sample std, like torch.std), for comparison."""
    def norm(values):
        if len(values) < 2:
            return [0.0] * len(values)
        mean, std = statistics.fmean(values), statistics.stdev(values)
        return [0.0 if std == 0 else (v - mean) / (std + eps) for v in values]

    B, N = len(scores), len(rewards[0])
    out = [[0.0] * N for _ in range(B)]
    by_group = {}
    for b in range(B):
        by_group.setdefault(groups[b], []).append(b)
    returns = [[0.0] * N for _ in range(B)]
    for b in range(B):
        g = 0.0
        for t in reversed(range(N)):
            if mask[b][t]:
                g = rewards[b][t] + gamma * g
                returns[b][t] = g
    anchors = {}
    for b in range(B):
        for t in range(N):
            if mask[b][t]:
                anchors.setdefault((groups[b], states[b][t]), []).append((b, t))
    for members in by_group.values():
        for b, a in zip(members, norm([scores[b] for b in members])):
            for t in range(N):
                if mask[b][t]:
                    out[b][t] += a
    for members in anchors.values():
        for (b, t), a in zip(members, norm([returns[b][t] for b, t in members])):
            out[b][t] += weight * a
    return out


@pytest.mark.parametrize("seed", range(5))
def test_gigpo_matches_a_plain_python_loop(seed):
    rng = random.Random(seed)
    B, N = 12, 4
    groups = [rng.randrange(3) for _ in range(B)]
    lengths = [rng.randint(1, N) for _ in range(B)]
    mask = [[t < lengths[b] for t in range(N)] for b in range(B)]
    rewards = [[float(rng.choice([0, 0, 1, -0.1])) if mask[b][t] else 0.0 for t in range(N)] for b in range(B)]
    states = [[rng.randrange(4) for _ in range(N)] for _ in range(B)]
    scores = [sum(r) for r in rewards]
    f64 = torch.float64
    out = gigpo(torch.tensor(scores, dtype=f64), torch.tensor(groups), torch.tensor(rewards, dtype=f64),
                torch.tensor(mask), torch.tensor(states), gamma=0.9, step_weight=0.7)
    torch.testing.assert_close(out, torch.tensor(reference(scores, groups, rewards, mask, states, 0.9, 0.7),
                                                 dtype=torch.float64), atol=1e-9, rtol=1e-9)


def test_gigpo_without_repeated_states_is_grpo():
    scores, groups, rewards, mask, _ = episodes()
    unique = torch.arange(12).reshape(4, 3)
    out = gigpo(scores, groups, rewards, mask, unique, gamma=0.5, norm_by_std=False)
    expected = torch.tensor([1 / 3, -2 / 3, 1 / 3, 0.0], dtype=torch.float64)[:, None] * mask
    torch.testing.assert_close(out, expected, check_dtype=False)


def test_steps_to_tokens_assigns_each_token_its_turn():
    adv = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    ends = torch.tensor([[2, 5], [3, -1]])
    mask = torch.tensor([[0, 1, 1, 0, 1, 1, 0], [0, 0, 1, 1, 0, 0, 0]])
    expected = torch.tensor([[0, 1, 1, 0, 2, 2, 0], [0, 0, 3, 3, 0, 0, 0]], dtype=torch.float32)
    torch.testing.assert_close(steps_to_tokens(adv, ends, mask), expected)


def test_gigpo_rejects_mismatched_shapes():
    scores, groups, rewards, mask, states = episodes()
    with pytest.raises(ValueError, match="gigpo needs"):
        gigpo(scores, groups, rewards[:, :2], mask, states)
