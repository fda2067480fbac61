"""Parse an (untrusted) model response into actions. Never raises, never executes anything."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.prompts import ANSWER_CLOSE, ANSWER_OPEN, FORMAT_TAGS, THINK_CLOSE, THINK_OPEN

#: Longest response text the parser looks at; longer text is cut (the tags must appear before this).
MAX_RESPONSE_CHARS = 100_000

_THINK_RE = re.compile(
    rf"\s*{re.escape(THINK_OPEN)}(.*?){re.escape(THINK_CLOSE)}\s*{re.escape(ANSWER_OPEN)}(.*?){re.escape(ANSWER_CLOSE)}",
    re.DOTALL,
)
_ANSWER_RE = re.compile(rf"\s*{re.escape(ANSWER_OPEN)}(.*?){re.escape(ANSWER_CLOSE)}", re.DOTALL)


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
    """

    format_ok: bool
    think: str = ""
    answer: str = ""
    actions: tuple[str, ...] = ()
    num_invalid: int = 0


FAILED = ParsedResponse(format_ok=False)


def parse_response(text: object, cfg: AgentConfig, action_names: Sequence[str]) -> ParsedResponse:
    """Parse ``text`` (the generation prefill + the decoded response) against RAGEN's format.

    The response must start with ``<think>..</think>`` followed by ``<answer>..</answer>`` (only the answer
    when ``cfg.enable_think`` is False); the tags may not nest. Text after ``</answer>`` is ignored. The
    answer is split on ``cfg.action_sep``, cut to ``cfg.max_actions_per_turn`` parts and matched
    case-insensitively to ``action_names``; with no action names (free-form envs) the answer is one action.
    Empty parts are dropped (RAGEN), or counted as invalid actions with ``cfg.reject_empty_actions``.
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
    parts = [p for p in raw if p][: cfg.max_actions_per_turn]
    by_lower = {name.lower(): name for name in action_names}
    actions = tuple(by_lower[p.lower()] for p in parts if p.lower() in by_lower)
    return ParsedResponse(
        format_ok=bool(parts),
        think=think.strip(),
        answer=answer,
        actions=actions,
        num_invalid=len(parts) - len(actions) + empty,
    )
