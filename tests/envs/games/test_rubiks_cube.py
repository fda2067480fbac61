"""2x2 Rubik's cube: move permutations, rendering, solved check, scrambles, optimal oracle."""

import random
import time

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.rubiks_cube import (
    ACTIONS,
    MOVES,
    SOLVED,
    RubiksCube2x2Env,
    apply_move,
    distance_table,
    is_solved,
    solution,
)

SOLVED_NET = "     W W\n     W W\nO O  G G  R R  B B\nO O  G G  R R  B B\n     Y Y\n     Y Y"


def make(**kw):
    return gym.make("ragen/RubiksCube2x2-v0", **kw)


def test_action_names():
    assert ACTIONS == ["U", "U'", "D", "D'", "L", "L'", "R", "R'", "F", "F'", "B", "B'"]
    assert RubiksCube2x2Env().action_names == ACTIONS


@pytest.mark.parametrize("name", ACTIONS)
def test_each_move_is_a_permutation_of_order_four_and_prime_undoes_it(name):
    perm = MOVES[name]
    assert sorted(perm) == list(range(24))
    assert sum(p != i for i, p in enumerate(perm)) == 12  # 4 on the turned face, 2 on each of 4 neighbours
    state = tuple(range(24))  # distinct labels: only the identity maps it to itself
    s = state
    for k in range(1, 5):
        s = apply_move(s, name)
        assert (s == state) == (k == 4)
    inverse = name[:-1] if name.endswith("'") else name + "'"
    assert apply_move(apply_move(state, name), inverse) == state
    assert apply_move(apply_move(state, inverse), name) == state


def test_opposite_faces_commute_and_adjacent_ones_do_not():
    state = tuple(range(24))
    assert apply_move(apply_move(state, "U"), "D") == apply_move(apply_move(state, "D"), "U")
    assert apply_move(apply_move(state, "U"), "R") != apply_move(apply_move(state, "R"), "U")
    assert len({MOVES[a] for a in ACTIONS}) == 12


def test_render_solved_and_after_front_turn():
    env = make()
    obs, _ = env.reset(options={"scramble": []})
    assert obs == SOLVED_NET
    obs, _ = env.reset(options={"scramble": ["F"]})
    # F (clockwise seen from the front): Up's front row takes Left's colour, Right's left column takes
    # Up's, Down's front row takes Right's, Left's right column takes Down's.
    assert obs == "     W W\n     O O\nO Y  G G  W R  B B\nO Y  G G  W R  B B\n     R R\n     Y Y"
    obs, _ = env.reset(options={"scramble": ["U"]})
    # U (clockwise from above): Front's top row takes Right's colour, Left's takes Front's.
    assert obs.splitlines()[2] == "G G  R R  B B  O O"


def test_solving_gives_reward_one_and_ends():
    env = make()
    env.reset(options={"scramble": ["R"]})
    obs, r, term, trunc, info = env.step("R")  # R twice is not solved
    assert (r, term, info["action_is_valid"], info["action_is_effective"]) == (0.0, False, True, True)
    env.step("r")  # case-insensitive: R R R
    obs, r, term, trunc, info = env.step("R")  # four quarter turns: solved again
    assert (r, term, trunc, info["success"]) == (1.0, True, False, True) and obs == SOLVED_NET
    env.reset(options={"scramble": ["F'"]})
    assert env.step("f")[1] == 1.0
    env.reset(options={"scramble": ["B"]})
    assert env.step("B\u2019")[1] == 1.0  # typographic apostrophe accepted


def test_solved_in_any_orientation():
    # U then D' turns the whole cube about the vertical axis: every face is still one colour.
    assert is_solved(apply_move(apply_move(SOLVED, "U"), "D'"))
    assert not is_solved(apply_move(SOLVED, "U"))


def test_invalid_text_changes_nothing():
    env = make()
    obs0, _ = env.reset(seed=3)
    for bad in ["X", "U2", "U U'", "", "u''"]:
        obs, r, term, trunc, info = env.step(bad)
        assert (obs, r, info["action_is_valid"]) == (obs0, 0.0, False)


@pytest.mark.parametrize(("depth", "lo", "hi"), [((1, 5), 1, 5), (3, 3, 3), ([2, 4], 2, 4)])
def test_scramble_depth_and_oracle_solves_within_it(depth, lo, hi):
    env = make(scramble_depth=depth)
    lengths = set()
    for seed in range(25):
        obs, _ = env.reset(seed=seed)
        base = env.unwrapped
        n = len(base.scramble)
        lengths.add(n)
        assert lo <= n <= hi and obs != SOLVED_NET
        assert env.reset(seed=seed)[0] == obs
        steps = 0
        while True:
            obs, r, term, trunc, info = env.step(base.oracle_action())
            steps += 1
            if term or trunc:
                break
        assert info["success"] and r == 1.0 and steps <= n
    assert lengths == set(range(lo, hi + 1))


def test_oracle_is_optimal_and_fast_on_deep_states():
    table = distance_table()
    assert len(table) == 44971  # known quarter-turn counts 1+6+27+120+534+2256+8969+33058
    rng = random.Random(0)
    for _ in range(10):
        state = SOLVED
        for _ in range(40):
            state = apply_move(state, rng.choice(ACTIONS))
        start = time.perf_counter()
        moves = solution(state)
        assert time.perf_counter() - start < 1.0
        assert len(moves) <= 14
        for m in moves:
            state = apply_move(state, m)
        assert is_solved(state)
    # a 3-turn scramble is undone in 3 turns
    state = SOLVED
    for m in ["R", "U", "F'"]:
        state = apply_move(state, m)
    assert len(solution(state)) == 3


def test_truncation_and_config_errors():
    env = make(max_steps=2)
    env.reset(options={"scramble": ["R", "U"]})
    env.step("F")
    *_, term, trunc, _ = env.step("F")
    assert trunc and not term
    for bad in [-1, (3, 1), "5", (1, 2, 3), True]:
        with pytest.raises(ValueError, match="scramble_depth"):
            RubiksCube2x2Env(scramble_depth=bad)
    with pytest.raises(ValueError, match="scramble"):
        RubiksCube2x2Env().reset(options={"scramble": ["X"]})
