"""Sudoku: generation, parsing, RAGEN's +1 / +0.5 / -0.1 / +10 rewards, no reward farming, oracle."""

import gymnasium as gym
import numpy as np
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.sudoku import SudokuEnv, _search, full_grid, solve

# A 4x4 puzzle with exactly one solution, SOLUTION.
PUZZLE = ["1...", "...2", "...3", "4..."]
SOLUTION = [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]
# Unique puzzle in which two wrong but rule-valid placements in row 3 block each other's correction.
DEADLOCK = ["1234", "3..2", "2..3", ".32."]


def make(**kw):
    return gym.make("ragen/Sudoku-v0", **kw)


def is_valid_full(grid):
    n = len(grid)
    b = int(n**0.5)
    want = set(range(1, n + 1))
    rows = all(set(r) == want for r in grid)
    cols = all({grid[r][c] for r in range(n)} == want for c in range(n))
    boxes = all(
        {grid[r][c] for r in range(br, br + b) for c in range(bc, bc + b)} == want
        for br in range(0, n, b)
        for bc in range(0, n, b)
    )
    return rows and cols and boxes


def test_puzzle_fixture_is_unique():
    cells = [0 if ch == "." else int(ch) for row in PUZZLE for ch in row]
    sols, complete, _ = _search(cells, 4, 2, 10**6)
    assert complete and len(sols) == 1 and sols[0] == [v for row in SOLUTION for v in row]


@pytest.mark.parametrize("n", [4, 9, 16])
def test_full_grid_is_a_valid_sudoku(n):
    rng = np.random.default_rng(0)
    grids = [full_grid(n, rng) for _ in range(5)]
    assert all(is_valid_full(g) for g in grids)
    assert len({str(g) for g in grids}) == 5  # random, not one fixed grid


@pytest.mark.parametrize(
    ("size", "difficulty", "empty"), [(4, "easy", 6), (4, "hard", 10), (9, "medium", 41), (16, "easy", 102)]
)
def test_generation_removes_the_difficulty_fraction_and_keeps_one_solution(size, difficulty, empty):
    env = make(size=size, difficulty=difficulty).unwrapped
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        assert obs.count(".") == empty
        cells = [v for row in env.givens for v in row]
        assert all(v in (0, s) for v, s in zip(cells, [v for row in env.solution for v in row], strict=True))
        sols, complete, _ = _search(cells, size, 2, 10**6)
        assert complete and len(sols) == 1
    assert env.reset(seed=7)[0] == env.reset(seed=7)[0] != env.reset(seed=8)[0]


def test_render_and_instruction():
    env = make(size=4)
    obs, info = env.reset(options={"puzzle": PUZZLE})
    assert obs == "1 . | . .\n. . | . 2\n----+----\n. . | . 3\n4 . | . ."
    assert info == {"success": False, "action_is_valid": True, "action_is_effective": False}
    assert "place V at row R col C" in env.unwrapped.instruction
    assert env.unwrapped.action_names == []


def test_rewards_correct_valid_and_no_farming():
    env = make(size=4)
    env.reset(options={"puzzle": PUZZLE})
    obs, r, term, trunc, info = env.step("place 3 at row 1 col 2")  # breaks no rule, solution has 2
    assert r == 0.5 and info["action_is_valid"] and info["action_is_effective"] and not term
    assert obs.splitlines()[0] == "1 3 | . ."
    obs, r, *_ = env.step("place 2 at row 1 col 2")  # overwrite with the solution: pays the increase
    assert r == 0.5 and obs.splitlines()[0] == "1 2 | . ."
    _, r, _, _, info = env.step("place 2 at row 1 col 2")  # same value: no-op
    assert r == 0.0 and info["action_is_valid"] and not info["action_is_effective"]
    _, r, _, _, info = env.step("place 3 at row 1 col 2")  # this cell already paid its best
    assert r == 0.0 and info["action_is_effective"]
    obs, r, _, _, info = env.step("clear row 1 col 2")
    assert r == 0.0 and info["action_is_effective"] and obs.splitlines()[0] == "1 . | . ."
    _, r, *_ = env.step("place 2 at row 1 col 2")
    assert r == 0.0
    _, r, *_ = env.step("place 4 at row 1 col 4")  # a fresh cell pays +1
    assert r == 1.0


@pytest.mark.parametrize(
    "action",
    [
        "place 2 at row 1 col 1",  # given cell
        "place 1 at row 1 col 2",  # row conflict
        "place 1 at row 3 col 1",  # column / box conflict with the 1s
        "place 5 at row 1 col 2",  # value out of range
        "place 0 at row 1 col 2",
        "place 2 at row 5 col 2",  # row out of range
        "clear row 1 col 1",  # given cell
    ],
)
def test_rule_breaking_actions_cost_a_tenth_and_change_nothing(action):
    env = make(size=4)
    obs0, _ = env.reset(options={"puzzle": PUZZLE})
    obs, r, term, trunc, info = env.step(action)
    assert (r, term, info["action_is_valid"], info["action_is_effective"]) == (-0.1, False, True, False)
    assert obs == obs0


@pytest.mark.parametrize(
    "action", ["place 3 at r1c2", "1 2 3", "place three at row 1 col 2", "place 3 at row 1"]
)
def test_unparsable_text_is_invalid(action):
    env = make(size=4)
    obs0, _ = env.reset(options={"puzzle": PUZZLE})
    obs, r, term, trunc, info = env.step(action)
    assert (obs, r, info["action_is_valid"]) == (obs0, 0.0, False)


def test_parsing_is_case_and_space_tolerant():
    env = make(size=4)
    env.reset(options={"puzzle": PUZZLE})
    _, r, *_ = env.step("  PLACE  2 at Row 1   col 2 ")
    assert r == 1.0
    _, r, *_ = env.step("place 3 at row 1, column 3.")
    assert r == 1.0


def test_completing_the_grid_adds_ten_and_succeeds():
    env = make(size=4)
    env.reset(options={"puzzle": PUZZLE})
    empties = [(r, c) for r in range(4) for c in range(4) if PUZZLE[r][c] == "."]
    for r, c in empties[:-1]:
        _, rew, term, *_ = env.step(f"place {SOLUTION[r][c]} at row {r + 1} col {c + 1}")
        assert rew == 1.0 and not term
    r, c = empties[-1]
    obs, rew, term, trunc, info = env.step(f"place {SOLUTION[r][c]} at row {r + 1} col {c + 1}")
    assert (rew, term, trunc, info["success"]) == (11.0, True, False, True)
    assert "." not in obs


@pytest.mark.parametrize(("size", "difficulty"), [(4, "easy"), (4, "hard"), (9, "easy"), (9, "hard")])
def test_oracle_solves_generated_puzzles(size, difficulty):
    env = make(size=size, difficulty=difficulty)
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        empty, total = obs.count("."), 0.0
        while True:
            obs, r, term, trunc, info = env.step(env.unwrapped.oracle_action())
            total += r
            if term or trunc:
                break
        assert info["success"] and not trunc
        assert total == pytest.approx(empty + 10.0)  # +1 per cell, +10 at the end
        assert is_valid_full(env.unwrapped.grid)


def test_oracle_breaks_a_deadlock_of_wrong_cells():
    env = make(size=4)
    env.reset(options={"puzzle": DEADLOCK})
    assert env.step("place 4 at row 3 col 2")[1] == 0.5
    assert env.step("place 1 at row 3 col 3")[1] == 0.5
    base = env.unwrapped
    assert solve(base.grid) is None
    assert base.oracle_action() == "clear row 3 col 2"
    env.step("clear row 3 col 2")
    assert base.oracle_action() == "place 4 at row 3 col 3"
    while not base._done:
        *_, term, trunc, info = env.step(base.oracle_action())
    assert info["success"]


def test_oracle_recovers_after_random_rule_valid_mistakes():
    env = make(size=9, difficulty="medium")
    for seed in range(3):
        env.reset(seed=seed)
        base = env.unwrapped
        rng = np.random.default_rng(seed)
        for _ in range(8):  # random placements that break no rule (mostly wrong ones)
            r, c = (int(x) for x in rng.integers(9, size=2))
            v = int(rng.integers(1, 10))
            if not base.givens[r][c] and not base._conflicts(r, c, v):
                env.step(f"place {v} at row {r + 1} col {c + 1}")
        while not base._done:
            *_, term, trunc, info = env.step(base.oracle_action())
        assert info["success"]


def test_user_puzzle_and_config_errors():
    with pytest.raises(ValueError, match="size"):
        SudokuEnv(size=5)
    with pytest.raises(ValueError, match="difficulty"):
        SudokuEnv(difficulty="expert")
    with pytest.raises(ValueError, match="max_steps"):
        SudokuEnv(max_steps=0)
    with pytest.raises(ValueError, match="puzzle"):
        SudokuEnv(size=4).reset(options={"puzzle": ["11..", "....", "....", "...."]})  # conflicting givens


def test_max_steps_truncates():
    env = make(size=4, max_steps=2)
    env.reset(options={"puzzle": PUZZLE})
    assert env.step("hello")[3] is False
    *_, term, trunc, _ = env.step("place 2 at row 1 col 2")
    assert trunc and not term
