"""Which healthy runner samples which block of env groups when runners are down."""

import pytest

from ragen_rllib.algorithms.ragen.driver.runner_failures import assign_blocks


def test_every_healthy_runner_samples_its_own_block():
    assert assign_blocks([0, 1, 2], [1, 2, 3]) == {1: [0], 2: [1], 3: [2]}


def test_a_dead_runners_block_goes_to_the_least_loaded_healthy_runner():
    assert assign_blocks([0, 1, 2], [1, 3]) == {1: [0, 1], 3: [2]}
    assert assign_blocks([1, 3], [1, 2]) == {2: [1], 1: [3]}  # only the lost blocks, spread over the living
    assert assign_blocks([0, 1, 2, 3], [4]) == {4: [3, 0, 1, 2]}


def test_each_block_is_planned_exactly_once():
    plan = assign_blocks(list(range(7)), [2, 5])
    assert sorted(b for blocks in plan.values() for b in blocks) == list(range(7))
    assert sorted(len(blocks) for blocks in plan.values()) == [3, 4]


def test_nothing_to_sample_and_no_healthy_runner():
    assert assign_blocks([], []) == {}
    with pytest.raises(RuntimeError, match=r"no env runner is healthy.*runner\(s\) \[1, 2\].*restart_failed"):
        assign_blocks([0, 1], [])
