"""Bandit: word-pair arms, RAGEN's payoffs, success = higher expected value, seeding and errors."""

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.bandit import TEST_PAIRS, TRAIN_PAIRS, BanditEnv


def make(**kw):
    return gym.make("ragen/Bandit-v0", **kw)


def _arms(env):
    base = env.unwrapped
    return base.low_arm, base.high_arm


def test_word_pairs():
    assert len(TRAIN_PAIRS) == 12 and len(TEST_PAIRS) == 8
    train_words = {w.lower() for pair in TRAIN_PAIRS for w in pair}
    test_words = {w.lower() for pair in TEST_PAIRS for w in pair}
    assert len(train_words) == 24 and len(test_words) == 16 and not train_words & test_words
    assert ("Teacher", "Trader") in TRAIN_PAIRS


def test_reset_shows_both_arms_in_random_order():
    env = make()
    orders, pairs = set(), set()
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        names = env.unwrapped.action_names
        low, high = _arms(env)
        assert set(names) == {low, high} and (low, high) in TRAIN_PAIRS
        assert obs == f"Arms: {names[0]}, {names[1]}. Pull one arm."
        assert names[0] in env.unwrapped.instruction and names[1] in env.unwrapped.instruction
        orders.add(names[0] == low)
        pairs.add((low, high))
    assert orders == {True, False}
    assert len(pairs) == 12


def test_test_split_uses_other_pairs():
    env = make(split="test")
    for seed in range(30):
        env.reset(seed=seed)
        assert _arms(env) in TEST_PAIRS


def test_low_risk_arm_pays_fixed_reward_but_is_not_a_success():
    env = make()
    env.reset(seed=0)
    low, high = _arms(env)
    obs, reward, term, trunc, info = env.step(low.upper())  # case-insensitive
    assert (reward, term, trunc) == (pytest.approx(0.1), True, False)
    assert info == {"success": False, "action_is_valid": True, "action_is_effective": True}
    assert obs == f"You pulled {low} and received reward 0.1."
    assert env.step(high)[1:4] == (0.0, True, False)  # episode over: no-op


def test_high_risk_arm_pays_one_with_probability_quarter_and_is_a_success():
    env = make()
    payouts = []
    for seed in range(2000):
        env.reset(seed=seed)
        _, reward, term, _, info = env.step(_arms(env)[1])
        assert reward in (0.0, 1.0) and term and info["success"]
        payouts.append(reward)
    assert abs(sum(payouts) / len(payouts) - 0.25) < 0.04


def test_same_seed_same_outcome():
    env = make()
    results = []
    for _ in range(2):
        outcomes = []
        for seed in range(20):
            env.reset(seed=seed)
            outcomes.append(env.step(_arms(env)[1])[1])
        results.append(outcomes)
    assert results[0] == results[1] and 0 < sum(results[0]) < 20


def test_oracle_picks_higher_expected_value():
    env = make()
    env.reset(seed=3)
    assert env.unwrapped.oracle_action() == _arms(env)[1]
    env.step(env.unwrapped.oracle_action())
    assert env.unwrapped.oracle_action() is None
    # With a 5% payout chance (EV 0.05 < 0.1) the low-risk arm is the better choice.
    env = make(high_risk_prob=0.05)
    env.reset(seed=3)
    low, high = _arms(env)
    assert env.unwrapped.oracle_action() == low
    assert env.step(low)[4]["success"] is True
    env.reset(seed=3)
    assert env.step(high)[4]["success"] is False


def test_invalid_answers_change_nothing_and_truncate_after_max_steps():
    env = make()
    obs0, _ = env.reset(seed=1)
    low, high = _arms(env)
    for i, bad in enumerate([f"{low} or {high}", "", "Pirate!"], start=1):
        obs, reward, term, trunc, info = env.step(bad)
        assert obs == obs0 and reward == 0.0 and not term and not info["action_is_valid"]
        assert trunc == (i == 3)


def test_config_errors():
    with pytest.raises(ValueError, match="split"):
        BanditEnv(split="val")
    with pytest.raises(ValueError, match="high_risk_prob"):
        BanditEnv(high_risk_prob=1.5)
    with pytest.raises(ValueError, match="low_risk_reward"):
        BanditEnv(low_risk_reward="0.1")
    with pytest.raises(ValueError, match="max_steps"):
        BanditEnv(max_steps=0)
