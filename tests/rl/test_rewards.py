"""DAPO overlong shaping and reward normalisation, by hand."""

import pytest
import torch

from ragen_rllib.rl.rewards import normalize_scores, overlong_penalty


def test_overlong_penalty_ramps_over_the_buffer():
    lengths = torch.tensor([10, 300, 350, 400, 500])
    out = overlong_penalty(lengths, max_len=400, buffer_len=100, penalty=1.0)
    assert out.tolist() == [0.0, 0.0, -0.5, -1.0, -1.0]
    assert overlong_penalty(torch.tensor([375]), 400, 100, penalty=0.5).item() == pytest.approx(-0.375)
    with pytest.raises(ValueError, match="buffer_len=0"):
        overlong_penalty(lengths, 400, 0)


def test_normalize_scores_per_group_and_batch():
    scores = torch.tensor([1.0, 0.0, 3.0, 5.0])
    groups = torch.tensor([0, 0, 1, 2])
    assert normalize_scores(scores, groups, "identity").tolist() == [1.0, 0.0, 3.0, 5.0]
    assert normalize_scores(scores, groups, "mean").tolist() == [0.5, -0.5, 0.0, 0.0]
    batch = normalize_scores(scores, groups, "mean_std", scope="batch")
    std = torch.tensor([1.0, 0.0, 3.0, 5.0], dtype=torch.float64).std()
    torch.testing.assert_close(batch, (scores.double() - 2.25) / (std + 1e-6), check_dtype=False)
    with pytest.raises(ValueError, match="reward_norm='zscore'"):
        normalize_scores(scores, groups, "zscore")
