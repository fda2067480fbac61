"""Settings of the agent layer, each with its default and one-line meaning (RAGEN's defaults)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

CONTEXT_FULL = "full"  # one sample per trajectory: the whole conversation, every assistant turn trained
CONTEXT_LIMITED = "limited_multi_turn"  # one sample per turn: the last k turns, only the last turn trained
CONTEXT_SINGLE = "single_turn"  # one sample per turn: history summarised into the prompt
CONTEXT_MODES = (CONTEXT_FULL, CONTEXT_LIMITED, CONTEXT_SINGLE)
EMPTY_BREAKS_FORMAT = "format"  # reject_empty_actions: an empty part breaks the answer's format (nothing runs)
EMPTY_ACTION_MODES = (False, True, EMPTY_BREAKS_FORMAT)  # reject_empty_actions: dropped / invalid action / format


@dataclass(frozen=True)
class AgentConfig:
    """How an agent talks to an environment.

    Attributes:
        max_turns: turns (LLM calls) per trajectory.
        max_actions_per_turn: actions kept from one answer (the rest are ignored).
        max_actions_per_traj: action budget of a whole trajectory.
        action_sep: separator between actions inside one answer.
        enable_think: ask for ``<think>..</think><answer>..</answer>`` (False: ``<answer>`` only).
        format_penalty: added to a turn with no parsable answer or an invalid action.
        max_response_tokens: new tokens per turn (also quoted to the model as its length limit).
        max_model_len: longest prompt + response, in tokens; longer prompts drop whole old turns.
        context_mode: ``full`` | ``limited_multi_turn`` | ``single_turn``.
        context_window: turns of history kept in ``limited_multi_turn`` mode (incl. the current one).
        system_prefix: text the system prompt starts with.
        reject_empty_actions: what an empty part between separators (``Right || || Up``, a trailing ``||``)
            does. False is RAGEN's parser, which drops empty parts silently; under aggressive RL updates a policy
            can then fill its answers with them and still be "valid" (a collapse mode seen on the tiny models).
            True counts each as an invalid action: the turn gets the format penalty and its named actions still
            run. ``"format"`` makes the answer break the format, as ``reject_extra_actions`` does: nothing of it
            runs, and the turn gets the format penalty. With True, an answer such as ``Right ||`` moves as well
            as ``Right`` and costs only the penalty, which a success outweighs, so RL can drift to such answers
            (SmolLM2 on Sokoban did: docs/results.md).
        reject_extra_actions: an answer with more than ``max_actions_per_turn`` actions breaks the format: none
            of its actions execute and the turn gets the format penalty. False is RAGEN's parser, which runs the
            first ``max_actions_per_turn`` and drops the rest silently: the dropped ones are never executed and
            never penalised, so RL credits them with the outcome of the ones that ran, and a policy can grow its
            action lists until its answers run past ``max_response_tokens`` and lose the format (a collapse mode
            of SmolLM2 on slippery FrozenLake). A penalty alone, with the first actions still run, did not stop
            that drift: a success outweighs it.
    """

    max_turns: int = 5
    max_actions_per_turn: int = 2
    max_actions_per_traj: int = 10
    action_sep: str = "||"
    enable_think: bool = True
    format_penalty: float = -0.1
    max_response_tokens: int = 400
    max_model_len: int = 3600
    context_mode: str = CONTEXT_FULL
    context_window: int = 2
    system_prefix: str = "You're a helpful assistant. "
    reject_empty_actions: bool | str = False
    reject_extra_actions: bool = False

    def __post_init__(self) -> None:
        _check(self.context_mode in CONTEXT_MODES, "context_mode", self.context_mode, f"one of {CONTEXT_MODES}")
        for key in ("max_turns", "max_actions_per_turn", "max_actions_per_traj", "max_response_tokens",
                    "max_model_len", "context_window"):
            value = getattr(self, key)
            _check(isinstance(value, int) and not isinstance(value, bool) and value >= 1, key, value,
                   "a positive integer")
        _check(self.max_response_tokens < self.max_model_len, "max_response_tokens", self.max_response_tokens,
               f"smaller than max_model_len={self.max_model_len}; raise max_model_len or lower max_response_tokens")
        _check(isinstance(self.action_sep, str) and self.action_sep.strip() != "", "action_sep", self.action_sep,
               "a non-blank string such as '||'")
        _check(isinstance(self.reject_empty_actions, bool) or self.reject_empty_actions == EMPTY_BREAKS_FORMAT,
               "reject_empty_actions", self.reject_empty_actions, f"one of {EMPTY_ACTION_MODES}")
        _check(isinstance(self.format_penalty, (int, float)) and self.format_penalty <= 0, "format_penalty",
               self.format_penalty, "a number <= 0 (RAGEN: -0.1)")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AgentConfig:
        """Build from a plain dict, rejecting unknown keys with the list of known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"agent config key(s) {unknown} are unknown; known keys: {sorted(known)}")
        return cls(**values)


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ValueError(f"agent config {key}={value!r} is invalid: use {allowed}.")
