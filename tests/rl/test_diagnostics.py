"""RAGEN-2's reasoning mutual information, on hand-made cross log-prob matrices."""

import math

import pytest
import torch

from ragen_rllib.rl.diagnostics import reasoning_mutual_information


def test_input_independent_reasoning_has_zero_information():
    same = torch.full((4, 4), -3.0)  # every reasoning equally likely under every prompt
    mi, acc = reasoning_mutual_information(same)
    assert mi == pytest.approx(0.0) and acc == 0.25  # ties go to column 0


def test_perfectly_prompt_specific_reasoning_reaches_log_k():
    cross = torch.full((4, 4), -1000.0)
    cross.fill_diagonal_(-2.0)
    mi, acc = reasoning_mutual_information(cross)
    assert mi == pytest.approx(math.log(4)) and acc == 1.0


def test_by_hand_two_prompts():
    # row 0: log p = log .5 own, log .25 other; row 1: log .1 own, log .4 other
    cross = torch.log(torch.tensor([[0.5, 0.25], [0.4, 0.1]]))
    expected = ((math.log(0.5) - math.log(0.375)) + (math.log(0.1) - math.log(0.25))) / 2
    mi, acc = reasoning_mutual_information(cross)
    assert mi == pytest.approx(expected) and acc == 0.5
    with pytest.raises(ValueError, match="K >= 2"):
        reasoning_mutual_information(torch.zeros(1, 1))
