"""The ToolEnv contract: good calls return the tool's result; every kind of bad call is the agent's error (an
"Error: ..." observation, action_is_valid False, reward 0, the episode goes on) and never an exception."""

import time

import pytest

from ragen_rllib.envs.base import ACTION_IS_VALID, SUCCESS, StepOutcome
from ragen_rllib.envs.tools.tool_env import TOOL_CALL, TOOL_ERROR, Tool, ToolEnv, is_tool_env, tool_call_action

ADD = Tool("add", "Add two integers.", {"type": "object", "properties": {"a": {"type": "integer"},
                                                                         "b": {"type": "integer"}},
                                        "required": ["a", "b"], "additionalProperties": False})
BOOM = Tool("boom", "Always fails.")
SLEEP = Tool("sleep", "Sleeps.", {"type": "object", "properties": {"seconds": {"type": "number"}}})


class AddEnv(ToolEnv):
    """Answer 2 + 3 with an add tool, a tool that raises and one that hangs."""

    tools = [ADD, BOOM, SLEEP]
    instruction = "What is 2 + 3?"

    def _reset_state(self, options):
        self.calls = []

    def _render_text(self):
        return "Question: 2 + 3?"

    def _run_tool(self, name, arguments):
        self.calls.append((name, arguments))
        if name == "boom":
            raise RuntimeError("kaboom")
        if name == "sleep":
            time.sleep(arguments.get("seconds", 0))
            return "slept"
        return str(arguments["a"] + arguments["b"])

    def _score_answer(self, text):
        ok = text.strip() == "5"
        return StepOutcome(reward=float(ok), terminated=True, effective=True, success=ok)


@pytest.fixture
def env():
    e = AddEnv(tool_timeout_s=0.3, max_steps=20)
    e.reset(seed=0)
    return e


def test_a_good_call_returns_the_result_and_the_answer_ends_the_episode(env):
    obs, r, term, trunc, info = env.step(tool_call_action("add", {"a": 2, "b": 3}))
    assert (obs, r, term, trunc) == ("5", 0.0, False, False)
    assert info[TOOL_CALL] and info[ACTION_IS_VALID] and info[TOOL_ERROR] == ""
    assert env.calls == [("add", {"a": 2, "b": 3})]
    obs, r, term, trunc, info = env.step("5")
    assert (r, term, info[SUCCESS], info[TOOL_CALL]) == (1.0, True, True, False)
    assert is_tool_env(env)


@pytest.mark.parametrize(("action", "error"), [
    ('<tool_call>{"name": "add", "arguments": {"a": 2,</tool_call>', "not valid JSON"),
    ("<tool_call>[1, 2]</tool_call>", "must be a JSON object"),
    ('<tool_call>{"arguments": {}}</tool_call>', "must be a JSON object"),
    ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', "unknown tool 'rm_rf'; the tools are ['add', "),
    ('<tool_call>{"name": "add", "arguments": [2, 3]}</tool_call>', "must be a JSON object, got list"),
    ('<tool_call>{"name": "add", "arguments": {"a": "2", "b": 3}}</tool_call>', "bad arguments for 'add' at a"),
    ('<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>', "'b' is a required property"),
    ('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3, "c": 4}}</tool_call>', "Additional properties"),
    ('<tool_call>{"name": "boom", "arguments": {}}</tool_call>', "the tool 'boom' failed: RuntimeError: kaboom"),
    ('<tool_call>{"name": "sleep", "arguments": {"seconds": 3}}</tool_call>', "ran longer than tool_timeout_s=0.3"),
    ("<tool_call>" + "[" * 100_000 + "</tool_call>", "could not be read"),
])
def test_a_bad_call_is_the_agents_error_with_a_message(env, action, error):
    start = time.monotonic()
    obs, r, term, trunc, info = env.step(action)
    assert time.monotonic() - start < 2.0  # a hanging tool does not hold the env past its timeout
    assert obs.startswith("Error: ") and error in obs, obs
    assert info[TOOL_ERROR] in obs and info[TOOL_CALL]
    assert (r, term, trunc, info[ACTION_IS_VALID], info[SUCCESS]) == (0.0, False, False, False, False)
    # the episode goes on: a good call and the answer still work
    assert env.step(tool_call_action("add", {"a": 1, "b": 1}))[0] == "2"
    assert env.step("5")[2]


def test_arguments_written_as_a_json_string_are_accepted(env):
    obs, *_ = env.step('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}</tool_call>')
    assert obs == "3"


def test_long_results_are_cut_and_steps_are_bounded():
    e = AddEnv(max_steps=2)
    e.reset(seed=0)
    e._run_tool = lambda name, args: "x" * 10_000
    obs, *_ = e.step(tool_call_action("add", {"a": 1, "b": 1}))
    assert len(obs) < 4100 and obs.endswith("[cut at 4000 characters]")
    _, _, term, trunc, _ = e.step(tool_call_action("add", {"a": 1, "b": 1}))
    assert trunc and not term


@pytest.mark.parametrize(("key", "value"), [("tool_timeout_s", 0), ("max_steps", 0)])
def test_bad_settings_name_the_key(key, value):
    with pytest.raises(ValueError, match=f"env_config\\[{key!r}\\] = {value!r} is invalid"):
        AddEnv(**{key: value})
