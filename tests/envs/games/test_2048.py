"""2048: merge rules, log reward, no-op moves, new tiles, game over, success, oracle."""

import math

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.game_2048 import Game2048Env, can_move, move, slide_left

LOG5 = 0.1 * math.log2(5)  # reward of one 2+2 merge


def make(**kw):
    return gym.make("ragen/2048-v0", **kw)


@pytest.mark.parametrize(
    ("line", "out", "merges"),
    [
        ([2, 2, 2, 2], [4, 4, 0, 0], [4, 4]),
        ([4, 4, 8, 0], [8, 8, 0, 0], [8]),  # the new 8 does not merge again
        ([2, 0, 2, 4], [4, 4, 0, 0], [4]),
        ([2, 2, 4, 8], [4, 4, 8, 0], [4]),
        ([8, 4, 2, 2], [8, 4, 4, 0], [4]),
        ([0, 0, 0, 2], [2, 0, 0, 0], []),
        ([2, 4, 2, 4], [2, 4, 2, 4], []),
        ([4, 0, 4, 4], [8, 4, 0, 0], [8]),
    ],
)
def test_slide_left(line, out, merges):
    assert slide_left(line) == (out, merges)


def test_moves_in_all_directions():
    board = [[2, 2, 2, 2], [0, 4, 0, 0], [0, 4, 0, 2], [0, 0, 0, 2]]
    assert move(board, "Left") == ([[4, 4, 0, 0], [4, 0, 0, 0], [4, 2, 0, 0], [2, 0, 0, 0]], [4, 4])
    assert move(board, "Right") == ([[0, 0, 4, 4], [0, 0, 0, 4], [0, 0, 4, 2], [0, 0, 0, 2]], [4, 4])
    assert move(board, "Up") == ([[2, 2, 2, 4], [0, 8, 0, 2], [0, 0, 0, 0], [0, 0, 0, 0]], [8, 4])
    assert move(board, "Down") == ([[0, 0, 0, 0], [0, 0, 0, 0], [0, 2, 0, 2], [2, 8, 2, 4]], [8, 4])


def test_env_step_reward_and_one_new_tile():
    env = make(two_prob=1.0)  # new tiles are always 2
    board = [[2, 2, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    obs, info = env.reset(seed=0, options={"board": board})
    assert obs == "2 2 2 2\n. . . .\n. . . .\n. . . .\nScore: 0"
    obs, r, term, trunc, info = env.step("left")  # case-insensitive
    assert r == pytest.approx(2 * LOG5) and info["action_is_effective"] and not term
    grid = env.unwrapped.board
    assert grid[0][:2] == [4, 4]
    assert sorted(v for row in grid for v in row if v) == [2, 4, 4]  # exactly one new 2
    assert obs.endswith("Score: 8")


def test_move_that_changes_nothing_is_valid_not_effective():
    env = make()
    board = [[2, 4, 8, 16], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    obs0, _ = env.reset(seed=0, options={"board": board})
    obs, r, term, trunc, info = env.step("Up")
    assert (obs, r, term, info["action_is_valid"], info["action_is_effective"]) == (
        obs0,
        0.0,
        False,
        True,
        False,
    )
    obs, r, *_ = env.step("Down")  # slides, no merge: effective, reward 0
    assert r == 0.0 and obs != obs0


def test_game_over_when_no_move_can_change_the_board():
    env = make(two_prob=1.0)
    board = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 8, 8]]
    env.reset(seed=0, options={"board": board})
    obs, r, term, trunc, info = env.step("Left")  # [4,2,8,8] -> [4,2,16,0], a 2 fills the gap
    assert env.unwrapped.board[3] == [4, 2, 16, 2]
    assert r == pytest.approx(0.1 * math.log2(17))
    assert term and not trunc and not info["success"]
    assert not can_move(env.unwrapped.board) and env.unwrapped.oracle_action() is None


def test_reaching_the_target_succeeds():
    env = make(target=16)
    env.reset(seed=0, options={"board": [[8, 8, 0, 0], [0] * 4, [0] * 4, [0] * 4]})
    obs, r, term, trunc, info = env.step("Right")
    assert term and info["success"] and env.unwrapped.max_tile() == 16


def test_reset_is_seeded_with_two_tiles():
    env = make()
    obs, _ = env.reset(seed=4)
    tiles = [v for row in env.unwrapped.board for v in row if v]
    assert len(tiles) == 2 and set(tiles) <= {2, 4}
    assert env.reset(seed=4)[0] == obs
    # same seed, same actions -> same stochastic tiles
    runs = []
    for _ in range(2):
        env.reset(seed=9)
        runs.append([env.step(a)[0] for a in ["Left", "Up", "Right", "Down", "Left"]])
    assert runs[0] == runs[1]


def test_oracle_prefers_more_empty_cells():
    env = make()
    board = [[2, 2, 4, 4], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 2]]
    env.reset(seed=0, options={"board": board})
    # Left/Right merge twice in row 1 (13 empty cells); Up/Down merge nothing (11 empty).
    assert env.unwrapped.oracle_action() == "Right"  # tie with Left on empties and reward: first in order


def test_oracle_plays_a_game_with_only_effective_moves():
    env = make(max_steps=3000)
    env.reset(seed=1)
    total = 0.0
    while True:
        a = env.unwrapped.oracle_action()
        obs, r, term, trunc, info = env.step(a)
        assert info["action_is_effective"]
        total += r
        if term or trunc:
            break
    assert term and env.unwrapped.max_tile() >= 64 and total > 0


def test_config_errors():
    for kw, key in [({"size": 1}, "size"), ({"target": 100}, "target"), ({"two_prob": 2}, "two_prob")]:
        with pytest.raises(ValueError, match=key):
            Game2048Env(**kw)
    with pytest.raises(ValueError, match="board"):
        Game2048Env().reset(options={"board": [[3, 0, 0, 0]] * 4})
