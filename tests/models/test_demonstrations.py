"""Warm-start demonstrations are rollout transcripts: they parse, the oracle wins, noise makes them imperfect."""

import numpy as np
import pytest
from transformers import AutoTokenizer

import ragen_rllib.envs  # noqa: F401
from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.rollout import summarize
from ragen_rllib.models.demonstrations import DemoPolicy, demonstrations
from ragen_rllib.models.tiny import tiny_model_path

NON_SLIPPERY = {"ragen/FrozenLake-v0": {"is_slippery": False}}


@pytest.fixture(scope="module")
def chat():
    return ChatFormat(AutoTokenizer.from_pretrained(tiny_model_path("nano")), prefill="<think>")


def run(chat, noise, env_ids=("ragen/FrozenLake-v0",), configs=NON_SLIPPERY, episodes=60):
    return list(demonstrations(list(env_ids), chat, AgentConfig(), DemoPolicy(noise=noise), episodes, 0, configs))


def test_oracle_demonstrations_win_and_parse(chat):
    stats = summarize(run(chat, 0.0))
    assert stats["success"] >= 0.95 and stats["format_ok"] == 1.0 and stats["action_is_valid"] == 1.0


def test_noise_makes_demonstrations_imperfect(chat):
    clean, noisy = summarize(run(chat, 0.0)), summarize(run(chat, 0.5))
    assert noisy["success"] < clean["success"] - 0.2
    assert noisy["format_ok"] == 1.0  # imperfect actions, never a broken format


def test_demonstrations_are_deterministic(chat):
    a = [s.input_ids for ep in run(chat, 0.3, episodes=5) for s in ep.samples()]
    b = [s.input_ids for ep in run(chat, 0.3, episodes=5) for s in ep.samples()]
    assert a == b


def test_loss_mask_is_on_assistant_tokens_only(chat):
    tok = chat.tokenizer
    [ep] = run(chat, 0.3, episodes=1)
    [sample] = ep.samples()
    ids, mask = np.array(sample.input_ids), np.array(sample.loss_mask)
    trained = tok.decode(ids[mask == 1].tolist())
    assert trained.count("</answer>") == len(ep.turns) and "Turn" not in trained and "<|im_start|>" not in trained
    assert tok.decode(ids[mask == 0].tolist()).count("Turn ") == len(ep.turns)


@pytest.mark.parametrize("env_id", ["ragen/Sokoban-v0", "ragen/Countdown-v0", "ragen/Bandit-v0", "ragen/Sudoku-v0"])
def test_other_envs_demonstrate(chat, env_id):
    stats = summarize(run(chat, 0.0, env_ids=(env_id,), configs={"ragen/Sokoban-v0": {"num_boxes": 1}}, episodes=4))
    assert stats["format_ok"] == 1.0 and stats["num_actions"] >= 1
