"""`ragen-rllib eval` on a tool task: the shipped config's validation split, a per-env report, and records whose
system prompt carries the tools. (BFCL's prompts fit its config: tests/agent/test_tool_calls.py.)"""

import json
from pathlib import Path

import pytest

from ragen_rllib.evaluation.evaluate import evaluate_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("config", "model", "tool"), [("searchqa.yaml", "tiny:nano", "search")])
def test_eval_reports_a_tool_task_on_its_validation_split(tmp_path, config, model, tool):
    out = tmp_path / "rollouts.jsonl"
    report = evaluate_run(model, ROOT / "configs" / "envs" / config,
                          ["environment.env_config.split=validation", "training.max_turns=1",
                           "training.max_response_tokens=16"], episodes=1, samples=1, engine="hf", out_jsonl=out)
    assert {"success", "pass@1", "valid_action_rate"} <= set(report["all"])
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert "# Tools" in line["system"]  # the tool schemas in the text format (neither template renders tools=)
    names = [json.loads(x)["function"]["name"] for x in
             line["system"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert tool in names
    assert line["turns"][0]["prompt"].startswith("Turn 1:")
