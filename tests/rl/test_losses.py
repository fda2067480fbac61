"""Policy/value losses, aggregation and KL estimators on hand-computed tensors."""

import math

import pytest
import torch

from ragen_rllib.rl.losses import (
    AGG_MODES,
    aggregate,
    entropy_from_logits,
    kl_penalty,
    micro_batch_weights,
    policy_loss,
    value_loss,
)
from ragen_rllib.rl.micro_batches import pack_by_tokens


def test_aggregation_modes():
    loss = torch.tensor([[1.0, 3.0, 100.0], [2.0, 100.0, 100.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx(2.0)  # (1+3+2)/3
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx(2.0)  # (2 + 2)/2
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx(3.0)  # (4 + 2)/2
    assert aggregate(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(2.0)  # (4 + 2)/T, verl
    with pytest.raises(ValueError, match="mode=.mean."):
        aggregate(loss, mask, "mean")


def test_clipped_surrogate_decoupled_and_dual_clip():
    old = torch.zeros(1, 4)
    # ratios: e^0.5 (>1.28), e^-0.5 (<0.8), 1, e^2 (dual-clip region for A<0)
    new = torch.tensor([[0.5, -0.5, 0.0, 2.0]])
    adv = torch.tensor([[1.0, -1.0, 2.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, m = policy_loss(new, old, adv, mask, clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    # token 0: max(-1*1.6487, -1*1.28) = -1.28 (clipped); token 1: max(0.6065, 0.8) = 0.8 (clipped)
    # token 2: -2; token 3: max(7.389, 1.28) = 7.389 capped by dual clip at 3
    per_token = [-1.28, 0.8, -2.0, 3.0]
    assert loss.item() == pytest.approx(sum(per_token) / 4, abs=1e-5)
    assert m["clip_fraction"].item() == pytest.approx(0.5)
    assert m["dual_clip_fraction"].item() == pytest.approx(0.25)
    assert m["approx_kl"].item() == pytest.approx(-(0.5 - 0.5 + 0 + 2) / 4)
    no_dual, _ = policy_loss(new, old, adv, mask, dual_clip=None)
    assert no_dual.item() == pytest.approx((-1.28 + 0.8 - 2.0 + math.exp(2)) / 4, abs=1e-5)


def test_policy_gradient_points_along_the_advantage():
    logp = torch.zeros(1, 2, requires_grad=True)
    loss, _ = policy_loss(logp, torch.zeros(1, 2), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    loss.backward()
    assert logp.grad[0, 0] < 0 < logp.grad[0, 1]  # descent raises logp where A > 0


def test_value_loss_clipping():
    v, old, ret = torch.tensor([[2.0, 0.1]]), torch.zeros(1, 2), torch.tensor([[0.0, 1.0]])
    loss, m = value_loss(v, old, ret, torch.ones(1, 2), clip=0.5)
    # token 0: max(4, (0.5-0)^2) = 4; token 1: max(0.81, (0.1-1)^2 = 0.81) = 0.81
    assert loss.item() == pytest.approx(0.5 * (4 + 0.81) / 2)
    assert m["vf_clip_fraction"].item() == 0.0


def test_kl_estimators_and_entropy():
    logp, ref = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    d = math.log(2)
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(d)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5 * d * d)
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(0.5 + d - 1)
    assert kl_penalty(ref, logp, "abs").item() == pytest.approx(d)
    with pytest.raises(ValueError, match="kind='k9'"):
        kl_penalty(logp, ref, "k9")
    ent = entropy_from_logits(torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, -float("inf"), 0.0, -float("inf")]]]))
    torch.testing.assert_close(ent, torch.tensor([[math.log(4), math.log(2)]]))


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("micro", [1, 2, 3, 5])
def test_micro_batch_weights_make_micro_losses_add_up_to_the_minibatch_loss(mode, micro):
    torch.manual_seed(0)
    loss_mat = torch.randn(5, 7, dtype=torch.float64)
    mask = (torch.rand(5, 7) > 0.4).float()
    mask[3] = 0  # a row without trained tokens
    weights = micro_batch_weights(mask, micro, mode)
    assert len(weights) == -(-5 // micro)
    parts = [aggregate(loss, m, mode) for loss, m in zip(loss_mat.split(micro), mask.split(micro))]
    total = sum(float(w) * float(p) for w, p in zip(weights, parts))
    assert total == pytest.approx(float(aggregate(loss_mat, mask, mode)), abs=1e-9)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_token_packed_trimmed_micro_batches_add_up_to_the_minibatch_loss_and_gradient(mode):
    """An uneven packing by tokens (pack_by_tokens), each micro-batch cut to its longest row: the weighted
    micro-batch losses and their gradients equal the whole minibatch's, for every aggregation mode."""
    torch.manual_seed(1)
    lengths = torch.tensor([5, 3, 8, 2, 8, 1])
    real = torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)  # right-padded rows of width 9
    mask = (real & (torch.rand(6, 9) > 0.3)).float()
    mask[1] = 0  # a row without trained tokens
    logp = (-torch.rand(6, 9, dtype=torch.float64)).requires_grad_()
    old, adv = -torch.rand(6, 9, dtype=torch.float64), torch.randn(6, 9, dtype=torch.float64)
    parts = pack_by_tokens(lengths, max_tokens=16, max_rows=4)
    assert [p.tolist() for p in parts] == [[2, 4], [0, 1, 3], [5]]  # uneven: 2, 3 and 1 rows
    widths = [int(lengths[p].max()) for p in parts]
    weights = micro_batch_weights(mask, parts, mode, widths=widths)
    whole, _ = policy_loss(logp, old, adv, mask, agg=mode)
    (expected_grad,) = torch.autograd.grad(whole, logp)
    summed = 0.0
    for w, idx, width in zip(weights, parts, widths):
        part, _ = policy_loss(logp[idx, :width], old[idx, :width], adv[idx, :width], mask[idx, :width], agg=mode)
        summed = summed + float(w) * part
    (grad,) = torch.autograd.grad(summed, logp)
    # the weights are float32 (as the learner's MICRO_WEIGHT column): equal up to their rounding
    assert float(summed) == pytest.approx(float(whole), rel=1e-6)
    torch.testing.assert_close(grad, expected_grad, atol=1e-7, rtol=1e-6)
    assert torch.count_nonzero(expected_grad) > 0


def test_micro_batch_weights_check_their_widths():
    with pytest.raises(ValueError, match="2 widths for 1 micro-batches"):
        micro_batch_weights(torch.ones(2, 3), [torch.tensor([0, 1])], "token-mean", widths=[3, 3])


def test_micro_batch_weights_of_an_all_masked_batch_are_zero():
    assert torch.all(micro_batch_weights(torch.zeros(4, 3), 2, "token-mean") == 0)
