"""A model against a fixed opponent: outcome counting (checked on oracle games, whose results are known) and the
batched game loop on the tiny model, with clear errors for bad settings."""

import math

import pytest
from transformers import AutoTokenizer

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.prompts import generation_prefill
from ragen_rllib.envs.multi_agent.tictactoe import TicTacToeEnv
from ragen_rllib.models.multi_agent_demos import MultiAgentDemoPolicy, multi_agent_demonstrations
from ragen_rllib.models.tiny import tiny_model_path
from ragen_rllib.models.versus import GAME_AGENT, against_the_pool, binomial_se, outcomes, play_against

HELD_OUT = {"opening_moves": 2, "openings": "validation"}


@pytest.fixture(scope="module")
def chat():
    return ChatFormat(AutoTokenizer.from_pretrained(tiny_model_path("nano")), prefill=generation_prefill(GAME_AGENT))


def oracle_games(chat, noise, opponent, n=40):
    policy = MultiAgentDemoPolicy(noise=noise, sides=(("x",),), opponent=opponent)
    return list(multi_agent_demonstrations(lambda: TicTacToeEnv(**HELD_OUT), chat, GAME_AGENT, policy, n, 0))


def test_outcomes_count_wins_draws_and_losses(chat):
    perfect = outcomes(oracle_games(chat, 0.0, "minimax"), "x")
    assert perfect["losses"] == 0 and perfect["wins"] + perfect["draws"] == 40
    assert perfect["valid_move_rate"] == 1.0 and perfect["format_ok"] == 1.0
    strong = outcomes(oracle_games(chat, 0.0, "random"), "x")
    weak = outcomes(oracle_games(chat, 1.0, "minimax"), "x")
    assert strong["win_rate"] > 0.7 and strong["losses"] == 0
    assert weak["win_rate"] < strong["win_rate"] - 0.4 and weak["losses"] > 10  # random moves lose to minimax
    for r in (strong, weak):
        assert r["wins"] + r["draws"] + r["losses"] == r["episodes"] == 40
        assert math.isclose(r["win_rate_se"], binomial_se(r["win_rate"], 40))
        assert math.isclose(r["loss_rate"], r["losses"] / 40)
    assert binomial_se(0.5, 100) == 0.05


def test_play_against_on_the_tiny_model():
    r = play_against("tiny:nano", HELD_OUT, "random", episodes=3, seed=7)
    assert r["episodes"] == 3 and r["wins"] + r["draws"] + r["losses"] == 3 and r["errors"] == 0
    assert 0.0 <= r["valid_move_rate"] <= 1.0 and r["opponent"] == "random" and r["env_config"] == HELD_OUT
    assert r == play_against("tiny:nano", HELD_OUT, "random", episodes=3, seed=7)  # greedy: reproducible
    rates = against_the_pool("tiny:nano", 2, HELD_OUT, kinds=("random", "minimax"))
    assert set(rates) == {"random", "minimax"} and all(0.0 <= v <= 1.0 for v in rates.values())


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"opponent": "perfect"}, "opponent = 'perfect'.*'minimax'"),
    ({"agent": "z"}, "agent = 'z'.*'x', 'o'"),
    ({"episodes": 0}, "episodes = 0"),
])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        play_against("tiny:nano", HELD_OUT, **{"episodes": 1, **kwargs})


def test_an_engine_needs_its_chat_format():
    with pytest.raises(ValueError, match="chat="):
        play_against(object(), HELD_OUT, episodes=1)
