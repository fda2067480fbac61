"""Tests of the Sokoban env (ragen/Sokoban-v0), its level generator and its BFS oracle."""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.sokoban import SokobanEnv
from ragen_rllib.envs.games.sokoban_levels import Level, generate_level, parse_level, solve

# Player, box, empty, target in one corridor: two pushes to the right solve it.
CORRIDOR = "######\n#PX_O#\n######"
# A box on a target (pushed off by Right) and a second box right behind it.
OFF_TARGET = "#######\n#P√_XO#\n#######"
# Right pushes a box from one target onto another.
TARGET_TO_TARGET = "#######\n#P√O_X#\n#######"
# The player must first step Up, then push the box right twice.
DETOUR = "#######\n#_____#\n#_X_O_#\n#P____#\n#######"
# The box sits in a corner: unsolvable.
CORNERED = "#####\n#X_O#\n#__P#\n#####"


def make(**config) -> SokobanEnv:
    return gym.make("ragen/Sokoban-v0", **config).unwrapped


def start(level: str, **config) -> SokobanEnv:
    env = make(**config)
    env.reset(seed=0, options={"level": level})
    return env


# ----------------------------------------------------------------- rules and rewards
def test_push_to_target_solves_with_ragen_rewards() -> None:
    env = start(CORRIDOR)
    obs, reward, terminated, truncated, info = env.step("Right")
    assert obs == "######\n#_PXO#\n######"
    assert reward == pytest.approx(-0.1)
    assert (terminated, truncated) == (False, False)
    assert info == {"success": False, "action_is_valid": True, "action_is_effective": True}
    obs, reward, terminated, truncated, info = env.step("right")  # case-insensitive
    assert obs == "######\n#__P√#\n######"
    assert reward == pytest.approx(-0.1 + 1.0 + 10.0)
    assert (terminated, truncated) == (True, False)
    assert info["success"] is True and info["action_is_effective"] is True


def test_wall_bump_is_valid_but_not_effective() -> None:
    env = start(CORRIDOR)
    before = env.render()
    for action in ("Up", "Down", "Left"):
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs == before
        assert reward == pytest.approx(-0.1)
        assert info == {"success": False, "action_is_valid": True, "action_is_effective": False}
        assert not terminated and not truncated


def test_box_off_target_penalty_and_blocked_box() -> None:
    env = start(OFF_TARGET)
    obs, reward, terminated, _, info = env.step("Right")
    assert obs == "#######\n#_SXXO#\n#######"
    assert reward == pytest.approx(-0.1 - 1.0)
    assert not terminated and info["action_is_effective"]
    # Box behind box: cannot push, nothing moves.
    obs, reward, _, _, info = env.step("Right")
    assert obs == "#######\n#_SXXO#\n#######"
    assert reward == pytest.approx(-0.1)
    assert info["action_is_valid"] and not info["action_is_effective"]


def test_box_from_target_to_target_has_no_box_reward() -> None:
    env = start(TARGET_TO_TARGET)
    obs, reward, terminated, _, _ = env.step("Right")
    assert obs == "#######\n#_S√_X#\n#######"
    assert reward == pytest.approx(-0.1)
    assert not terminated


def test_invalid_actions_change_nothing_and_never_raise() -> None:
    env = start(CORRIDOR)
    before = env.render()
    for action in ("", "Jump", "x" * 1_000_000, "\ud800", "Left || Up", "\x00\x1b[2J", None, 3, b"\xff"):
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs == before and reward == 0.0 and not terminated and not truncated
        assert info == {"success": False, "action_is_valid": False, "action_is_effective": False}


def test_truncated_at_max_steps() -> None:
    env = start(CORRIDOR, max_steps=2)
    assert env.step("Up")[3] is False
    _, _, terminated, truncated, info = env.step("Up")
    assert (terminated, truncated, info["success"]) == (False, True, False)
    _, reward, terminated, _, info = env.step("Right")  # episode over: no-op
    assert reward == 0.0 and env.render() == CORRIDOR


# ----------------------------------------------------------------- rendering and instruction
def test_observation_formats() -> None:
    coord = start(CORRIDOR, observation_format="coord").render()
    lines = coord.splitlines()
    assert lines[0].startswith("Coordinates are (row, column)")
    assert lines[1:4] == ["Player at (1, 1).", "Boxes at (1, 2).", "Targets at (1, 4)."]
    assert lines[4].startswith("Walls at (0, 0), (0, 1),") and "(1, 0), (1, 5)" in lines[4]
    both = start(CORRIDOR, observation_format="grid_coord").render()
    assert both == CORRIDOR + "\n" + coord
    assert start(CORRIDOR).render() == CORRIDOR


def test_instruction_has_rules_and_legend() -> None:
    text = make().instruction
    assert "push all boxes to targets" in text and "cannot pull a box" in text
    assert "#: wall, _: empty, O: target, √: box on target, X: box, P: player, S: player on target" in text


def test_level_text_round_trip_and_bad_levels() -> None:
    level = parse_level(DETOUR)
    assert level.to_text() == DETOUR
    assert level.player == 3 * 7 + 1 and level.boxes == {2 * 7 + 2} and level.targets == {2 * 7 + 4}
    bad_levels = (
        "###",  # too small
        "#####\n#PX_#\n#####",  # a box without a target
        "#####\n_PXO#\n#####",  # open border
        "#####\n#PXO#\n####",  # not a rectangle
        "#####\n#PXO?\n#####",  # unknown symbol
        "######\n#PPXO#\n######",  # two players
        "#####\n#_XO#\n#####",  # no player
    )
    for bad in bad_levels:
        with pytest.raises(ValueError):
            parse_level(bad)
    with pytest.raises(ValueError):
        make().reset(seed=0, options={"level": "#####\n#PX_#\n#####"})


# ----------------------------------------------------------------- generation
def _floor_connected(level: Level) -> bool:
    floor = {c for c in range(level.height * level.width) if c not in level.walls}
    seen, queue = {level.player}, deque([level.player])
    while queue:
        cell = queue.popleft()
        for d in level.deltas():
            if cell + d in floor and cell + d not in seen:
                seen.add(cell + d)
                queue.append(cell + d)
    return seen == floor


@pytest.mark.parametrize(
    ("dim_room", "num_boxes"), [((6, 6), 1), ((6, 6), 3), ((8, 8), 2), ((4, 5), 2), ((5, 7), 1)]
)
def test_generated_levels_are_well_formed(dim_room, num_boxes) -> None:
    rng = np.random.default_rng(7)
    for _ in range(40):
        level = generate_level(rng, dim_room, num_boxes, 300)
        assert (level.height, level.width) == dim_room
        assert len(level.boxes) == len(level.targets) == num_boxes
        assert not level.solved and level.player not in level.boxes | level.walls
        assert not (level.boxes | level.targets) & level.walls
        border = [c for c in range(level.height * level.width)
                  if c // level.width in (0, level.height - 1) or c % level.width in (0, level.width - 1)]
        assert set(border) <= level.walls
        assert _floor_connected(level)


def test_generated_levels_are_solvable() -> None:
    rng = np.random.default_rng(3)
    for dim_room, num_boxes in [((6, 6), 1)] * 30 + [((6, 6), 2)] * 15 + [((7, 7), 3)] * 10:
        assert solve(generate_level(rng, dim_room, num_boxes, 300)) is not None


def test_search_depth_one_still_moves_a_box() -> None:
    rng = np.random.default_rng(0)
    level = generate_level(rng, (6, 6), 1, 1)
    assert solve(level) is not None and len(solve(level)) == 1


def test_same_seed_same_level_different_seeds_differ() -> None:
    env_a, env_b = make(num_boxes=1), make(num_boxes=1)
    for seed in (0, 1, 12345):
        assert env_a.reset(seed=seed)[0] == env_b.reset(seed=seed)[0]
    levels = {env_a.reset(seed=seed)[0] for seed in range(10)}
    assert len(levels) >= 8
    assert make(dim_room=8, num_boxes=2).reset(seed=0)[0].count("\n") == 7


def test_generation_is_fast() -> None:
    import time

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(100):
        generate_level(rng, (6, 6), 1, 300)
    assert (time.perf_counter() - t0) / 100 < 0.02


# ----------------------------------------------------------------- solver and oracle
def test_solve_finds_shortest_plans() -> None:
    assert solve(parse_level(CORRIDOR)) == ["Right", "Right"]
    assert solve(parse_level(DETOUR)) == ["Up", "Right", "Right"]
    assert solve(parse_level(CORNERED)) is None
    assert solve(parse_level("#####\n#P√_#\n#####")) == []
    assert solve(parse_level(DETOUR), node_limit=2) is None


def _oracle_rollout(env: SokobanEnv) -> tuple[int, float, bool]:
    steps, reward, terminated, truncated = 0, 0.0, False, False
    while not (terminated or truncated):
        action = env.oracle_action()
        assert action in env.action_names
        _, reward, terminated, truncated, info = env.step(action)
        assert info["action_is_valid"] and info["action_is_effective"]
        steps += 1
    return steps, reward, bool(info["success"])


@pytest.mark.parametrize("seed", range(6))
def test_oracle_solves_one_box_levels(seed: int) -> None:
    env = make(num_boxes=1)
    env.reset(seed=seed)
    optimal = len(solve(env.level))
    steps, last_reward, success = _oracle_rollout(env)
    assert success and steps == optimal
    assert last_reward == pytest.approx(10.9)
    assert env.oracle_action() is None


def test_oracle_solves_two_box_levels() -> None:
    for seed in (0, 1):
        env = make(dim_room=(8, 8), num_boxes=2)
        env.reset(seed=seed)
        _, last_reward, success = _oracle_rollout(env)
        assert success and last_reward == pytest.approx(10.9)


def test_oracle_replans_after_a_detour() -> None:
    env = start(DETOUR)
    assert env.oracle_action() == "Up"
    env.step("Right")  # off plan: player now at (3, 2), below the box
    assert env.oracle_action() == "Left"
    steps, last_reward, success = _oracle_rollout(env)
    assert success and steps == 4  # Left, Up, Right, Right
    assert last_reward == pytest.approx(10.9)


def test_oracle_on_unsolvable_level_returns_none() -> None:
    env = start(CORNERED)
    assert env.oracle_action() is None
    assert env.oracle_action() is None  # cached, no second search needed


# ----------------------------------------------------------------- config validation
@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"dim_room": 3}, "dim_room"),
        ({"dim_room": (4, 4)}, "dim_room"),
        ({"dim_room": (6,)}, "dim_room"),
        ({"dim_room": "6"}, "dim_room"),
        ({"dim_room": True}, "dim_room"),
        ({"dim_room": (6, 6.5)}, "dim_room"),
        ({"dim_room": 31}, "dim_room"),
        ({"num_boxes": 0}, "num_boxes"),
        ({"num_boxes": 15}, "num_boxes"),
        ({"num_boxes": 1.0}, "num_boxes"),
        ({"max_steps": 0}, "max_steps"),
        ({"search_depth": 0}, "search_depth"),
        ({"observation_format": "image"}, "observation_format"),
    ],
)
def test_bad_config_raises(config: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        SokobanEnv(**config)


def test_config_accepts_int_and_list_dims() -> None:
    assert SokobanEnv(dim_room=7).dim_room == (7, 7)
    assert SokobanEnv(dim_room=[5, 8], num_boxes=14).dim_room == (5, 8)
    env = SokobanEnv(dim_room=[5, 8], num_boxes=1, max_steps=5)
    assert env.reset(seed=1)[0].count("\n") == 4 and env.max_steps == 5
