"""Evaluation: unbiased pass@k by hand, and an HF-engine evaluation of the nano model with its JSONL records."""

import json

import pytest

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.evaluation.evaluate import EvalEnv, evaluate, is_checkpoint, pass_at_k


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 1, 4) == 1.0 and pass_at_k(3, 2, 2) == 1.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)


def test_a_model_directory_is_not_a_checkpoint(tmp_path):
    assert not is_checkpoint(tmp_path) and not is_checkpoint("tiny:nano")


def test_evaluate_reports_per_env_metrics_and_writes_one_line_per_trajectory(tmp_path):
    cfg = AgentConfig(max_turns=2, max_response_tokens=16)
    envs = [EvalEnv("lake", "ragen/FrozenLake-v0", {"size": 4, "is_slippery": False}),
            EvalEnv("bandit", "ragen/Bandit-v0", {})]
    out = tmp_path / "rollouts.jsonl"
    report = evaluate("tiny:nano", envs, episodes=3, samples=2, agent_cfg=cfg, engine="hf", out_jsonl=out)
    assert set(report) == {"lake", "bandit", "all"}
    for row in report.values():
        assert set(row) == {"success", "return", "valid_action_rate", "pass@1", "pass@2"}
        assert 0 <= row["pass@1"] <= row["pass@2"] <= 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2 * 3 * 2 and {line["env"] for line in lines} == {"lake", "bandit"}
    assert sorted({line["seed"] for line in lines if line["env"] == "lake"}) == [123, 124, 125]
    turn = lines[0]["turns"][0]
    assert {"prompt", "response", "actions", "action_is_valid", "reward", "response_tokens", "state"} <= set(turn)
    assert "Turn 1:" in turn["prompt"] and turn["state"] in turn["prompt"]  # the user message the model answered
    assert isinstance(lines[0]["success"], bool) and "return" in lines[0]


def test_evaluation_defaults_are_the_validation_hyperparameters():
    import inspect

    from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS
    from ragen_rllib.evaluation import evaluate as E

    for fn in (E.evaluate, E.evaluate_multi_agent):
        params = inspect.signature(fn).parameters
        assert params["temperature"].default is None and params["seed"].default is None  # None: the hyperparameters
    source = inspect.getsource(E)
    assert str(HYPERPARAMS["val_seed"][0]) not in source and "= 0.5" not in source
