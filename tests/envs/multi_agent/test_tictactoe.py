"""Tic-tac-toe's held-out openings: the train and validation boards are disjoint, both non-empty, cover every
opening, and a seed always gives the same opening; bad settings are refused with the key, value and fix."""

import os
import subprocess
import sys

import pytest

from ragen_rllib.envs.multi_agent.tictactoe import TicTacToeEnv, opening_boards, validation_boards


@pytest.mark.parametrize("moves", [1, 2, 3, 4])
def test_the_splits_are_disjoint_non_empty_and_cover_every_opening(moves):
    boards = set(opening_boards(moves))
    held_out = validation_boards(moves)
    train = boards - held_out
    assert held_out and train and held_out <= boards
    assert len(held_out) == -(-len(boards) // 4)  # about a quarter
    seen = {"train": set(), "validation": set(), "all": set()}
    for split in seen:
        env = TicTacToeEnv(opening_moves=moves, openings=split)
        for seed in range(120):
            env.reset(seed=seed)
            assert env.board in boards and env.board.count(".") == 9 - moves
            seen[split].add(env.board)
    assert seen["train"] <= train and seen["validation"] <= held_out
    assert seen["all"] & held_out and seen["all"] & train  # "all" draws from both
    assert len(seen["validation"]) >= min(len(held_out), 3) and len(seen["train"]) >= min(len(train), 3)


def test_a_seed_always_gives_the_same_opening_and_all_is_unchanged():
    for split in ("train", "validation", "all"):
        a, b = TicTacToeEnv(opening_moves=2, openings=split), TicTacToeEnv(opening_moves=2, openings=split)
        for seed in (0, 7, 123_456):
            a.reset(seed=seed)
            b.reset(seed=seed)
            assert a.board == b.board and a.agent_selection == b.agent_selection == "x"
    # "all" (the default) is the plain random opening of earlier versions: X at one cell, O at another
    env = TicTacToeEnv(opening_moves=2)
    boards = set()
    for seed in range(40):
        env.reset(seed=seed)
        boards.add(env.board)
    assert len(boards) > 20 and boards & validation_boards(2)


def test_the_split_is_stable_across_processes():
    # SHA-256 of the cells, not Python's salted hash(): another process with another hash seed agrees
    code = ("from ragen_rllib.envs.multi_agent.tictactoe import validation_boards; "
            "print(sorted(''.join(b) for b in validation_boards(2)))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": "12345"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(sorted("".join(b) for b in validation_boards(2)))


@pytest.mark.parametrize(("config", "fix"), [
    ({"openings": "test"}, "one of ('all', 'train', 'validation')"),
    ({"openings": "validation", "opening_moves": 0}, "set opening_moves >= 1"),
    ({"openings": None, "opening_moves": 2}, "one of"),
])
def test_bad_openings_are_refused_with_key_value_and_fix(config, fix):
    with pytest.raises(ValueError, match="openings") as err:
        TicTacToeEnv(**config)
    assert repr(config["openings"]) in str(err.value) and fix in str(err.value)
