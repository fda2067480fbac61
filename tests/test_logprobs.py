import math

import torch

from ragen_rllib.logprobs import gather_token_logprobs, masked_mean


def test_gather_token_logprobs_by_hand():
    # vocab 2; logits at t=0 favour token 1 by log(3): p(1) = 3/4
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0], [5.0, 5.0]]])
    ids = torch.tensor([[0, 1, 0]])
    out = gather_token_logprobs(logits, ids)
    assert out.shape == (1, 3)
    assert torch.allclose(out, torch.tensor([[0.0, math.log(0.75), math.log(0.5)]]))
    # temperature 2 halves the logit gap: p(1) = sqrt(3) / (1 + sqrt(3))
    t2 = gather_token_logprobs(logits, ids, temperature=2.0)
    assert torch.isclose(t2[0, 1], torch.tensor(math.log(math.sqrt(3) / (1 + math.sqrt(3)))))


def test_masked_mean():
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = torch.tensor([[0, 1, 1], [1, 0, 0]])
    assert masked_mean(v, m).item() == (2 + 3 + 4) / 3
    assert masked_mean(v, torch.zeros_like(m)).item() == 0.0
