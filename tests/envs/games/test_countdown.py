"""Countdown: generated instances are solvable, the reward rule, the solver and config errors."""

import time

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.countdown import CountdownEnv, solve
from ragen_rllib.envs.games.safe_math import numbers_used, safe_eval

INSTANCE = {"numbers": [2, 3, 4], "target": 24}


def make(**kw):
    return gym.make("ragen/Countdown-v0", **kw)


def _check_solution(expr, numbers, target):
    assert expr is not None
    assert safe_eval(expr) == target
    assert sorted(numbers_used(expr)) == sorted(numbers)


@pytest.mark.parametrize(
    ("numbers", "target"),
    [([3, 4, 6, 1], 24), ([5, 5, 5, 1], 24), ([2, 3], 6), ([4], 4), ([1, 54, 77], 23), ([25, 5, 4], 5)],
)
def test_solver_finds_solutions(numbers, target):
    _check_solution(solve(numbers, target), numbers, target)


def test_solver_needs_every_number_once():
    assert solve([1, 1, 1, 1], 100) is None  # the largest value of four ones is 4
    assert solve([1, 2], 7) is None
    assert solve([5, 7], 5) is None  # 5 alone is not allowed: 7 must be used too
    assert solve([], 0) is None
    start = time.perf_counter()
    assert solve([99, 98, 97, 1], 997) is None  # unsolvable: full search
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("answer", "reward", "success"),
    [
        ("2*3*4", 1.0, True),
        ("4 * (3 * 2)", 1.0, True),
        ("4*3*2 = 24", 1.0, True),  # a trailing "= number" is ignored
        ("2+3+4", 0.1, False),  # right numbers, wrong value
        ("(2 + 3) * 4 = 24", 0.1, False),  # the claimed result does not count
        ("6*4", 0.0, False),  # wrong numbers
        ("2*3*4*1", 0.0, False),  # an extra number
        ("2*12", 0.0, False),  # a missing number
        ("2*2*3*4/2", 0.0, False),  # a number used twice
    ],
)
def test_reward_rule(answer, reward, success):
    env = make()
    obs, _ = env.reset(seed=0, options=INSTANCE)
    assert obs == "Target: 24, Numbers: [2, 3, 4]"
    _, r, term, trunc, info = env.step(answer)
    assert (r, term, trunc, info["success"]) == (reward, True, False, success)
    assert info["action_is_valid"] and info["action_is_effective"]


def test_invalid_answers_change_nothing_and_truncate_after_max_steps():
    env = make()
    obs0, _ = env.reset(seed=0, options=INSTANCE)
    bad = ["", "2*3*4 = abc", "2.0*3*4", "2*3*4/(2-2)", "(2+3", "print(24)", "2**3*3", "two times twelve"]
    for answer in bad:
        env.reset(seed=0, options=INSTANCE)
        obs, r, term, trunc, info = env.step(answer)
        assert (obs, r, term, trunc, info["action_is_valid"]) == (obs0, 0.0, False, False, False), answer
    env.reset(seed=0, options=INSTANCE)
    truncs = [env.step("oops")[3] for _ in range(3)]
    assert truncs == [False, False, True]


def test_generated_instances_are_solvable_by_the_oracle():
    env = make()
    sizes = set()
    for seed in range(60):
        obs, _ = env.reset(seed=seed)
        base = env.unwrapped
        numbers, target = base.numbers, base.target
        sizes.add(len(numbers))
        assert len(numbers) in (3, 4) and all(1 <= n <= 99 for n in numbers)
        assert isinstance(target, int) and 1 <= target <= 100
        assert obs == f"Target: {target}, Numbers: {numbers}"
        assert str(numbers) in base.instruction and str(target) in base.instruction
        action = base.oracle_action()
        _check_solution(action, numbers, target)
        _, r, term, _, info = env.step(action)
        assert (r, term, info["success"]) == (1.0, True, True)
    assert sizes == {3, 4}


def test_seeding():
    env = make()
    a = env.reset(seed=42)[0]
    b = env.reset(seed=42)[0]
    assert a == b
    assert len({env.reset(seed=s)[0] for s in range(20)}) > 15


def test_config():
    env = make(num_numbers=4, max_number=10, max_target=30)
    for seed in range(20):
        env.reset(seed=seed)
        assert len(env.unwrapped.numbers) == 4 and max(env.unwrapped.numbers) <= 10
        assert env.unwrapped.target <= 30
    with pytest.raises(ValueError, match="num_numbers"):
        CountdownEnv(num_numbers=7)
    with pytest.raises(ValueError, match="num_numbers"):
        CountdownEnv(num_numbers="3")
    with pytest.raises(ValueError, match="max_number"):
        CountdownEnv(max_number=0)
    with pytest.raises(ValueError, match="max_steps"):
        CountdownEnv(max_steps=0)
    with pytest.raises(ValueError, match="numbers"):
        CountdownEnv().reset(seed=0, options={"numbers": "123", "target": 6})
