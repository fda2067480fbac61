"""Environments that offer tools: the :class:`ToolEnv` contract.

A tool env is a :class:`TextEnv` whose episodes are a question, any number of tool calls, and one final
answer. It declares its tools (:class:`Tool`: a name, a description and a JSON-schema of the arguments,
the OpenAI / Hugging Face ``tools=`` shape) and takes two kinds of action strings:

- a tool call, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (:func:`tool_call_action`): the
  observation that comes back is the tool's result (a string), reward 0, the episode goes on;
- anything else is the final answer: the env scores it (``_score_answer``) and the episode ends.

The base class owns every way a call can go wrong, so a bad call is the agent's error and never the env's
crash: text that is not JSON, JSON that is not a ``{"name", "arguments"}`` object, an unknown tool, arguments
that break the tool's JSON schema (types, required keys, extra keys), a tool that raises, and a tool that runs
past ``tool_timeout_s``. Each gives an observation that starts with ``"Error: "`` and says what was wrong,
``action_is_valid=False`` (the agent gets its format penalty), and leaves the episode going. Nothing the model
wrote is ever executed: a tool is a Python function of the env, called with JSON values only.

Environments know nothing of LLMs: how tools are shown to a model and how its calls are found in its text is
the agent layer's business.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ragen_rllib.envs.base import MAX_ACTION_CHARS, StepOutcome, TextEnv, require

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
#: info key: the step was a tool call (its observation is the tool's result).
TOOL_CALL = "tool_call"
#: info key: the error of a bad tool call ('' when the call ran).
TOOL_ERROR = "tool_error"
#: Longest tool result handed back (longer results are cut, with a note).
MAX_TOOL_RESULT_CHARS = 4000
ERROR_PREFIX = "Error: "


@dataclass(frozen=True)
class Tool:
    """One tool an env offers.

    Attributes:
        name: what the model calls it by.
        description: what it does, for the model.
        parameters: JSON schema of the arguments object (``{"type": "object", "properties": ..., ...}``).
    """

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})

    def schema(self) -> dict:
        """The tool in the ``tools=`` shape of chat templates and OpenAI's API."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


def tool_call_action(name: str, arguments: Any) -> str:
    """The action string of one tool call."""
    return f"{TOOL_CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{TOOL_CALL_CLOSE}"


class ToolCallError(ValueError):
    """A bad tool call; its message is shown to the model."""


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: dict


@dataclass(frozen=True)
class _Answer:
    text: str


class ToolEnv(TextEnv):
    """Base class of tool-using envs (see the module docstring).

    Subclasses set :attr:`tools` and implement ``_reset_state``, ``_render_text`` (the question),
    ``_run_tool(name, arguments) -> str`` and ``_score_answer(text) -> StepOutcome``.

    Args:
        tool_timeout_s: seconds one tool call may run; a call that runs longer is the agent's error. Python
            cannot stop a thread, so a timed-out call finishes in the background and its result is dropped.
        max_steps: tool calls + answers per episode before the episode is truncated.
    """

    tools: list[Tool] = []

    def __init__(self, tool_timeout_s: float = 5.0, max_steps: int = 10, render_mode: str | None = "ansi") -> None:
        require(isinstance(tool_timeout_s, (int, float)) and tool_timeout_s > 0, "tool_timeout_s", tool_timeout_s,
                "a positive number of seconds")
        require(isinstance(max_steps, int) and max_steps >= 1, "max_steps", max_steps, "a positive integer")
        super().__init__(render_mode=render_mode)
        self.tool_timeout_s = float(tool_timeout_s)
        self.max_steps = max_steps
        self._last_result: str | None = None
        self._tool_error = ""

    # ------------------------------------------------------------------ TextEnv hooks
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        self._last_result, self._tool_error = None, ""
        obs, info = super().reset(seed=seed, options=options)
        info[TOOL_CALL], info[TOOL_ERROR] = False, ""
        return obs, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        self._last_result, self._tool_error = None, ""
        is_call = not self._done and isinstance(action, str) and action.lstrip().startswith(TOOL_CALL_OPEN)
        obs, reward, terminated, truncated, info = super().step(action)
        if is_call and self._last_result is None:
            self._tool_error = self._tool_error or f"the tool call could not be read (at most {MAX_ACTION_CHARS} " \
                                                    "characters of JSON)"
        if is_call:
            obs = self._last_result if self._last_result is not None else (ERROR_PREFIX + self._tool_error)
        info[TOOL_CALL], info[TOOL_ERROR] = is_call, self._tool_error
        return obs, reward, terminated, truncated, info

    def _parse_action(self, text: str) -> _Call | _Answer | None:
        if not text.startswith(TOOL_CALL_OPEN):
            return _Answer(text) if text else None
        try:
            return self._parse_call(text)
        except ToolCallError as err:
            self._tool_error = str(err)
            return None

    def _apply(self, action: _Call | _Answer) -> StepOutcome:
        if isinstance(action, _Answer):
            return self._score_answer(action.text)
        try:
            result = self._call_with_timeout(action)
        except ToolCallError as err:  # a ValueError: the base class makes it an invalid action, reward 0
            self._tool_error = str(err)
            raise
        if len(result) > MAX_TOOL_RESULT_CHARS:
            result = result[:MAX_TOOL_RESULT_CHARS] + f" ... [cut at {MAX_TOOL_RESULT_CHARS} characters]"
        self._last_result = result
        return StepOutcome(reward=0.0, terminated=False, effective=True)

    # ------------------------------------------------------------------ subclass hooks
    def _run_tool(self, name: str, arguments: dict) -> str:
        """Run one validated call (``name`` is a declared tool, ``arguments`` match its schema)."""
        raise NotImplementedError

    def _score_answer(self, text: str) -> StepOutcome:
        """Score the final answer; the outcome should be terminal."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the checks
    def _parse_call(self, text: str) -> _Call:
        body = text[len(TOOL_CALL_OPEN):]
        if body.rstrip().endswith(TOOL_CALL_CLOSE):
            body = body.rstrip()[: -len(TOOL_CALL_CLOSE)]
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, RecursionError) as err:
            msg = str(err)[:200]
            raise ToolCallError(f"the tool call is not valid JSON ({msg}); write "
                                '{"name": <tool name>, "arguments": {<arguments>}}') from None
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            raise ToolCallError('a tool call must be a JSON object {"name": <tool name>, "arguments": {...}}')
        name, arguments = payload["name"], payload.get("arguments", {})
        if isinstance(arguments, str):  # some models write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except (json.JSONDecodeError, RecursionError):
                pass
        by_name = {t.name: t for t in self.tools}
        if name not in by_name:
            raise ToolCallError(f"unknown tool {name[:80]!r}; the tools are {sorted(by_name)}")
        if not isinstance(arguments, dict):
            raise ToolCallError(f"the arguments of {name!r} must be a JSON object, got {type(arguments).__name__}")
        try:
            jsonschema.validate(arguments, by_name[name].parameters)
        except jsonschema.ValidationError as err:
            where = "/".join(str(p) for p in err.absolute_path) or "arguments"
            raise ToolCallError(f"bad arguments for {name!r} at {where}: {err.message[:200]}") from None
        return _Call(name, arguments)

    def _call_with_timeout(self, call: _Call) -> str:
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = self._run_tool(call.name, call.arguments)
            except Exception as err:  # the tool's failure is shown to the agent
                box["err"] = err

        thread = threading.Thread(target=target, name=f"tool-{call.name}", daemon=True)
        thread.start()
        thread.join(self.tool_timeout_s)
        if thread.is_alive():
            raise ToolCallError(f"the tool {call.name!r} ran longer than tool_timeout_s={self.tool_timeout_s:g}")
        if "err" in box:
            err = box["err"]
            raise ToolCallError(f"the tool {call.name!r} failed: {type(err).__name__}: {str(err)[:300]}")
        out = box.get("out")
        return out if isinstance(out, str) else json.dumps(out, default=str)


def is_tool_env(env: Any) -> bool:
    """The env (or the env a wrapper holds) offers tools."""
    return bool(getattr(getattr(env, "unwrapped", env), "tools", None))


__all__ = ["MAX_ACTION_CHARS", "TOOL_CALL", "TOOL_ERROR", "Tool", "ToolEnv", "is_tool_env", "tool_call_action"]
