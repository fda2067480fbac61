"""BFCL multi-turn: BFCL's own entries, APIs and checks; the oracle (BFCL's ground truth) passes them; wrong or
missing calls fail the request as BFCL's checker would; nothing the model writes is evaluated."""

import json

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401
from ragen_rllib.envs.tools.bfcl import BFCLMultiTurnEnv, load_entries, parse_call, split_entries, to_json_schema
from ragen_rllib.envs.tools.tool_env import tool_call_action

#: BFCL's ground truth for this entry calls close_ticket(ticket_id='ticket_001') where the function's own schema
#: says integer: the schema check refuses it, so the oracle cannot pass it (BFCL itself does not check types).
SCHEMA_BREAKING_ENTRY = "multi_turn_base_173"


def play_oracle(env, index):
    env.reset(options={"index": index})
    total, done = 0.0, False
    while not done:
        _, reward, term, trunc, info = env.step(env.oracle_action())
        total += reward
        done = term or trunc
    return total, info


def test_the_splits_are_fixed_and_disjoint():
    train, val = split_entries("train"), split_entries("validation")
    assert (len(load_entries()), len(train), len(val)) == (200, 160, 40)
    assert not {e["id"] for e in train} & {e["id"] for e in val}
    assert all(len(e["ground_truth"]) == len(e["question"]) for e in load_entries())
    with pytest.raises(ValueError, match="split='test'"):
        split_entries("test")


@pytest.mark.parametrize("split", ["train", "validation"])
def test_bfcls_ground_truth_passes_bfcls_checks_on_every_entry(split):
    env = gym.make("ragen/BFCLMultiTurn-v0", split=split).unwrapped
    failed = []
    for i in range(len(env.entries)):
        total, info = play_oracle(env, i)
        if info["success"]:
            assert total == pytest.approx(1.0), env.entry["id"]
        else:
            failed.append(env.entry["id"])
    assert failed == ([SCHEMA_BREAKING_ENTRY] if split == "train" else [])


def test_tools_are_the_entrys_functions_as_json_schema_without_the_excluded_ones():
    env = BFCLMultiTurnEnv(split="train")
    env.reset(options={"index": 0})
    names = {t.name for t in env.tools}
    assert "cp" in env.entry["excluded_function"] and "cp" not in names
    assert {"cd", "mv", "grep", "post_tweet"} <= names
    text = json.dumps([t.parameters for t in env.tools])
    assert '"type": "dict"' not in text and '"type": "float"' not in text and '"type": "object"' in text
    assert to_json_schema({"type": "dict", "properties": {"x": {"type": "float"}, "y": {"type": "any"}}}) == \
        {"type": "object", "properties": {"x": {"type": "number"}, "y": {}}}


def test_answering_without_the_calls_or_with_wrong_ones_fails_the_request():
    env = BFCLMultiTurnEnv(split="train")
    env.reset(options={"index": 0})
    first = env.entry["question"][0][0]["content"]
    assert env.render() == first
    _, reward, term, _, info = env.step("I have done it.")  # no calls at all
    assert (reward, term, info["success"]) == (0.0, True, False)

    env.reset(options={"index": 0})
    env.step(tool_call_action("cd", {"folder": "document"}))
    env.step(tool_call_action("mkdir", {"dir_name": "tmp"}))  # the ground truth makes 'temp'
    env.step(tool_call_action("mv", {"source": "final_report.pdf", "destination": "tmp"}))
    _, reward, term, _, info = env.step("Moved.")
    assert (reward, term, info["success"]) == (0.0, True, False)

    env.reset(options={"index": 0})
    for _ in env.entry["ground_truth"][0]:
        env.step(env.oracle_action())
    obs, reward, term, _, _ = env.step("Moved.")
    assert reward == pytest.approx(1 / len(env.entry["question"])) and not term
    assert obs == env.entry["question"][1][0]["content"]  # the next request


def test_bad_calls_are_the_agents_error_and_api_errors_come_back_as_results():
    env = BFCLMultiTurnEnv(split="train")
    env.reset(options={"index": 0})
    obs, _, _, _, info = env.step(tool_call_action("cp", {"source": "a", "destination": "b"}))  # excluded
    assert obs.startswith("Error: unknown tool 'cp'") and not info["action_is_valid"]
    obs, _, _, _, info = env.step(tool_call_action("cd", {"folder": 3}))
    assert obs.startswith("Error: bad arguments for 'cd' at folder") and not info["action_is_valid"]
    obs, _, _, _, info = env.step(tool_call_action("cd", {"folder": "no_such_dir"}))  # the API's own error
    assert "no_such_dir" in obs and info["action_is_valid"]


@pytest.mark.parametrize("text", [
    "cd(folder=__import__('os').system('echo hacked'))",
    "__import__('os').system('echo hacked')",
    "cd(folder=open('/etc/passwd').read())",
    "unknown_function(x=1)",
])
def test_ground_truth_strings_are_read_as_literals_only(text):
    env = BFCLMultiTurnEnv(split="train")
    env.reset(options={"index": 0})
    with pytest.raises(ValueError):
        parse_call(text, env._model_methods)
    assert parse_call("mv('a', destination='b')", env._model_methods) == ("mv", {"source": "a", "destination": "b"})
