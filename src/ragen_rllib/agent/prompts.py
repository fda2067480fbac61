"""RAGEN's prompt texts: the system prompt, per-turn user messages, reward messages, the generation prefill.

Every string the model sees is built here (and nowhere else), so the warm-start demonstrations, the
rollouts and the tokenizer corpus share one format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.envs.tools.tool_env import (  # Hermes / Qwen2 tags, also the env's action form
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
FORMAT_TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)
TOOL_TAGS = (TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
INVALID_WARNING = "No valid action provided previously. Environment state remains the same. Please try again."


def tools_text(tools: Sequence[dict]) -> str:
    """Hermes' text description of tools (``tools=`` schemas), for chat templates that do not render tools."""
    signatures = "\n".join(json.dumps(t) for t in tools)
    return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            f"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{signatures}\n"
            "</tools>\n\nFor each function call, return a json object with function name and arguments within "
            f"{TOOL_CALL_OPEN}{TOOL_CALL_CLOSE} XML tags:\n{TOOL_CALL_OPEN}\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n' + TOOL_CALL_CLOSE)


def system_prompt(instruction: str, action_names: Sequence[str], cfg: AgentConfig,
                  tools: Sequence[dict] = (), describe_tools: bool = True) -> str:
    """System message: instruction (with the env's symbol legend), actions, separator and budgets.

    ``tools`` (``tools=`` schemas) are the env's tools; ``describe_tools`` writes them into the text (for chat
    templates that do not render them themselves)."""
    parts = [cfg.system_prefix + instruction.strip()]
    if tools:
        parts.append(
            f"Call tools with {TOOL_CALL_OPEN} blocks, up to {cfg.max_actions_per_turn} per turn; their results come "
            f"back in the next turn. You can make {cfg.max_actions_per_traj} calls in total. When you know the "
            "answer, give it inside the answer tags: the answer ends the episode.")
        if describe_tools:
            parts.append(tools_text(tools))
    elif action_names:
        parts.append(
            f"Your available actions are: {', '.join(action_names)}. You can make up to "
            f"{cfg.max_actions_per_turn} actions per turn, separated by the action separator \" {cfg.action_sep} \". "
            f"You have {cfg.max_actions_per_traj} actions in total for the whole episode."
        )
    else:
        parts.append("Give your whole answer inside the answer tags.")
    return "\n".join(parts)


def format_instruction(cfg: AgentConfig, tools: bool = False) -> str:
    """The 'Always output ...' reminder of every user turn (``tools``: the env offers tools)."""
    answer = f"{ANSWER_OPEN} [your answer] {ANSWER_CLOSE}"
    if tools:
        answer = f"either tool calls {TOOL_CALL_OPEN} [call] {TOOL_CALL_CLOSE} or the final answer {answer}"
    if cfg.enable_think:
        shape = f"{THINK_OPEN} [Your thoughts] {THINK_CLOSE} {answer}"
    else:
        shape = answer
    return (
        f"Always output: {shape} with no extra text. Strictly follow this format. "
        f"Max response length: {cfg.max_response_tokens} words (tokens)."
    )


def format_reward(reward: float) -> str:
    """Reward as the model sees it (``0``, ``-0.1``, ``10.9``)."""
    return f"{round(float(reward), 4):g}"


@dataclass(frozen=True)
class TurnView:
    """What the user message of one turn shows."""

    turn: int  # 1-based turn number
    state: str  # the env's text rendering
    actions_left: int  # remaining trajectory budget
    last_reward: float | None = None  # reward of the previous turn (None on the first turn)
    last_invalid: bool = False  # the previous turn had no parsable answer or an invalid action
    history: str = ""  # summary of earlier turns (single_turn mode only)
    tools: bool = False  # the env offers tools


def user_message(view: TurnView, cfg: AgentConfig) -> str:
    """One user turn: the previous turn's reward, the warning, the history summary, the state and format."""
    lines = []
    if view.last_reward is not None:
        lines.append(f"Reward:\n{format_reward(view.last_reward)}\n")
    if view.last_invalid:
        lines.append(INVALID_WARNING)
    if view.history:
        lines.append(f"History:\n{view.history}\n")
    lines.append(f"Turn {view.turn}:\nState:\n{view.state}")
    lines.append(f"You have {view.actions_left} actions left. {format_instruction(cfg, view.tools)}")
    return "\n".join(lines)


def history_summary(turns: Sequence[tuple[Sequence[str], float]]) -> str:
    """``single_turn`` history: one line per earlier turn with its executed actions and reward."""
    return "\n".join(
        f"Turn {i}: actions {', '.join(actions) if actions else '(none valid)'}; reward {format_reward(r)}"
        for i, (actions, r) in enumerate(turns, start=1)
    )


def generation_prefill(cfg: AgentConfig) -> str:
    """Text appended after the chat template's generation prompt (RAGEN pre-fills the opening tag)."""
    return THINK_OPEN if cfg.enable_think else ANSWER_OPEN


def assistant_text(think: str, answer: str, cfg: AgentConfig) -> str:
    """A well-formed response AFTER the prefill (used by demonstrations):
    ``' thoughts </think> <answer> a </answer>'``."""
    if cfg.enable_think:
        return f" {think.strip()} {THINK_CLOSE} {ANSWER_OPEN} {answer.strip()} {ANSWER_CLOSE}"
    return f" {answer.strip()} {ANSWER_CLOSE}"


def tool_call_text(think: str, calls: Sequence[str]) -> str:
    """A well-formed tool-calling response AFTER the ``<think>`` prefill (used by demonstrations):
    ``' thoughts </think>\\n<tool_call>{...}</tool_call>'`` (``calls`` are whole ``<tool_call>`` blocks)."""
    return f" {think.strip()} {THINK_CLOSE}\n" + "\n".join(calls)
