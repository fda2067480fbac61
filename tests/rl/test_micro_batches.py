"""Token-budget micro-batches: hand-computed packings, the budget bound, and row lengths of right-padded rows."""

import pytest
import torch

from ragen_rllib.rl.micro_batches import pack_by_tokens, padded_tokens, row_lengths


def as_lists(parts):
    return [p.tolist() for p in parts]


def test_row_lengths_are_one_past_the_last_real_token():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    assert row_lengths(mask, 4, 4).tolist() == [3, 1, 0, 4]
    assert row_lengths(None, 3, 7).tolist() == [7, 7, 7]


def test_rows_are_packed_longest_first_within_the_budget():
    lengths = torch.tensor([5, 3, 8, 2, 8, 1])
    # longest first: rows 2, 4 (8 each: 2 x 8 = 16 fits), then 0 (3 x 8 = 24 does not) opens the next one:
    # 0, 1, 3 (3 x 5 = 15 fits), 5 would make 4 x 5 = 20 > 16
    parts = pack_by_tokens(lengths, max_tokens=16, max_rows=4)
    assert as_lists(parts) == [[2, 4], [0, 1, 3], [5]]
    assert padded_tokens(lengths, parts) == [16, 15, 1]


def test_micro_batch_size_caps_the_rows_and_none_means_no_token_limit():
    lengths = torch.tensor([5, 3, 8, 2, 8, 1])
    assert as_lists(pack_by_tokens(lengths, None, max_rows=2)) == [[2, 4], [0, 1], [3, 5]]
    assert as_lists(pack_by_tokens(lengths, None, max_rows=6)) == [[0, 1, 2, 3, 4, 5]]


def test_a_row_longer_than_the_budget_goes_alone():
    assert as_lists(pack_by_tokens(torch.tensor([10, 3, 3]), max_tokens=6, max_rows=8)) == [[0], [1, 2]]
    assert as_lists(pack_by_tokens(torch.tensor([3, 10, 10]), max_tokens=6, max_rows=8)) == [[1], [2], [0]]


@pytest.mark.parametrize("seed", range(20))
def test_packing_covers_every_row_once_and_never_exceeds_the_budget_except_single_rows(seed):
    gen = torch.Generator().manual_seed(seed)
    rows = int(torch.randint(1, 40, (1,), generator=gen))
    lengths = torch.randint(0, 300, (rows,), generator=gen)
    budget = int(torch.randint(1, 1200, (1,), generator=gen))
    max_rows = int(torch.randint(1, 9, (1,), generator=gen))
    parts = pack_by_tokens(lengths, budget, max_rows)
    assert sorted(torch.cat(parts).tolist()) == list(range(rows))
    for part, size in zip(parts, padded_tokens(lengths, parts)):
        assert len(part) <= max_rows
        assert size <= budget or len(part) == 1


def test_bad_limits_are_rejected():
    with pytest.raises(ValueError, match="max_rows=0"):
        pack_by_tokens(torch.tensor([1, 2]), 10, 0)
    with pytest.raises(ValueError, match="max_tokens=0"):
        pack_by_tokens(torch.tensor([1, 2]), 0, 2)
    assert pack_by_tokens(torch.zeros(0, dtype=torch.int64), 10, 2) == []
