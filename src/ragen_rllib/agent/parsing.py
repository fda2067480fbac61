"""Parse an (untrusted) model response into actions. Never raises, never executes anything."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragen_rllib.agent.config import EMPTY_BREAKS_FORMAT, AgentConfig
from ragen_rllib.agent.prompts import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    FORMAT_TAGS,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_TAGS,
)

#: Longest response text the parser looks at; longer text is cut (the tags must appear before this).
MAX_RESPONSE_CHARS = 100_000

_THINK_RE = re.compile(
    rf"\s*{re.escape(THINK_OPEN)}(.*?){re.escape(THINK_CLOSE)}\s*{re.escape(ANSWER_OPEN)}(.*?){re.escape(ANSWER_CLOSE)}",
    re.DOTALL,
)
_ANSWER_RE = re.compile(rf"\s*{re.escape(ANSWER_OPEN)}(.*?){re.escape(ANSWER_CLOSE)}", re.DOTALL)
_THINK_ONLY_RE = re.compile(rf"\s*{re.escape(THINK_OPEN)}(.*?){re.escape(THINK_CLOSE)}", re.DOTALL)
_TOOL_CALL_RE = re.compile(rf"\s*{re.escape(TOOL_CALL_OPEN)}(.*?){re.escape(TOOL_CALL_CLOSE)}", re.DOTALL)


@dataclass(frozen=True)
class ParsedResponse:
    """What one response asked for.

    Attributes:
        format_ok: the tags parsed and the answer holds at least one action.
        think: the reasoning text ('' when thinking is off or the format failed).
        answer: the raw answer text.
        actions: canonical action names to execute, in order (free-form envs: the whole answer).
        num_invalid: answer parts (within max_actions_per_turn) that matched no action name, plus the empty
            parts when ``reject_empty_actions`` is on.
        num_tool_calls: tool calls among ``actions`` (tool envs; each action is then a whole
            ``<tool_call>..</tool_call>`` block, passed to the env unread).
    """

    format_ok: bool
    think: str = ""
    answer: str = ""
    actions: tuple[str, ...] = ()
    num_invalid: int = 0
    num_tool_calls: int = 0


FAILED = ParsedResponse(format_ok=False)


def parse_response(text: object, cfg: AgentConfig, action_names: Sequence[str]) -> ParsedResponse:
    """Parse ``text`` (the generation prefill + the decoded response) against RAGEN's format.

    The response must start with ``<think>..</think>`` followed by ``<answer>..</answer>`` (only the answer
    when ``cfg.enable_think`` is False); the tags may not nest. Text after ``</answer>`` is ignored. The
    answer is split on ``cfg.action_sep``, cut to ``cfg.max_actions_per_turn`` parts and matched
    case-insensitively to ``action_names``; with no action names (free-form envs) the answer is one action.
    Empty parts are dropped (RAGEN), counted as invalid actions with ``cfg.reject_empty_actions=True``, or break
    the format with ``cfg.reject_empty_actions="format"`` (nothing executes); parts past
    ``cfg.max_actions_per_turn`` are dropped (RAGEN), or break the format with ``cfg.reject_extra_actions``
    (nothing executes).
    """
    if not isinstance(text, str):
        return FAILED
    text = text[:MAX_RESPONSE_CHARS]
    if cfg.enable_think:
        match = _THINK_RE.match(text)
        if match is None:
            return FAILED
        think, answer = match.group(1), match.group(2)
    else:
        match = _ANSWER_RE.match(text)
        if match is None:
            return FAILED
        think, answer = "", match.group(1)
    if any(tag in think or tag in answer for tag in FORMAT_TAGS):
        return FAILED
    answer = answer.strip()
    if not action_names:
        return ParsedResponse(format_ok=bool(answer), think=think.strip(), answer=answer,
                              actions=(answer,) if answer else ())
    raw = [p.strip() for p in answer.split(cfg.action_sep)]
    empty = sum(not p for p in raw) if cfg.reject_empty_actions else 0
    named = [p for p in raw if p]
    if (cfg.reject_empty_actions == EMPTY_BREAKS_FORMAT and empty) or (
            cfg.reject_extra_actions and len(named) > cfg.max_actions_per_turn):
        return ParsedResponse(format_ok=False, think=think.strip(), answer=answer)
    parts = named[: cfg.max_actions_per_turn]
    by_lower = {name.lower(): name for name in action_names}
    actions = tuple(by_lower[p.lower()] for p in parts if p.lower() in by_lower)
    return ParsedResponse(
        format_ok=bool(parts),
        think=think.strip(),
        answer=answer,
        actions=actions,
        num_invalid=len(parts) - len(actions) + empty,
    )


def parse_tool_response(text: object, cfg: AgentConfig) -> ParsedResponse:
    """Parse ``text`` (prefill + decoded response) of a turn in a tool env.

    After ``<think>..</think>`` (when ``cfg.enable_think``) comes either ``<answer>..</answer>``, the final answer
    (one action), or one or more ``<tool_call>..</tool_call>`` blocks separated by white space, the Hermes / Qwen2
    format; calls past ``cfg.max_actions_per_turn`` are dropped and counted invalid. A block's content is not
    read here: the env checks it (JSON, tool name, argument schema) and answers a bad call with an error
    message. Text after the last block or after ``</answer>`` is ignored. Never raises.
    """
    if not isinstance(text, str):
        return FAILED
    text = text[:MAX_RESPONSE_CHARS]
    think, rest = "", text
    if cfg.enable_think:
        match = _THINK_ONLY_RE.match(text)
        if match is None:
            return FAILED
        think, rest = match.group(1), text[match.end():]
    tags = FORMAT_TAGS + TOOL_TAGS
    if any(tag in think for tag in tags):
        return FAILED
    answer = _ANSWER_RE.match(rest)
    if answer is not None:
        body = answer.group(1).strip()
        if not body or any(tag in body for tag in tags):
            return FAILED
        return ParsedResponse(format_ok=True, think=think.strip(), answer=body, actions=(body,))
    calls, pos = [], 0
    while (match := _TOOL_CALL_RE.match(rest, pos)) is not None:
        body = match.group(1)
        if any(tag in body for tag in tags):
            return FAILED
        calls.append(f"{TOOL_CALL_OPEN}{body.strip()}{TOOL_CALL_CLOSE}")
        pos = match.end()
    if not calls:
        return FAILED
    kept = tuple(calls[: cfg.max_actions_per_turn])
    return ParsedResponse(format_ok=True, think=think.strip(), answer="", actions=kept,
                          num_invalid=len(calls) - len(kept), num_tool_calls=len(kept))
