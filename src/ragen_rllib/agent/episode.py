"""One agent trajectory in one environment: prompt -> sampled ids -> parse -> act, turn after turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym

from ragen_rllib.agent.chat_format import ChatFormat, TurnInput, as_messages
from ragen_rllib.agent.config import CONTEXT_SINGLE, AgentConfig
from ragen_rllib.agent.parsing import ParsedResponse, parse_response, parse_tool_response
from ragen_rllib.agent.prompts import TurnView, history_summary, system_prompt, user_message
from ragen_rllib.agent.transcript import Sample, Transcript
from ragen_rllib.agent.turns import TurnResult, execute_turn

# Trajectory metric keys (RAGEN's names), named once.
M_SUCCESS = "success"
M_RETURN = "episodic_return"
M_NUM_ACTIONS = "num_actions"
M_NUM_TURNS = "num_turns"
M_FORMAT_OK = "format_ok"  # fraction of turns whose response parsed
M_VALID = "action_is_valid"  # fraction of turns with a parsable answer and only valid actions
M_EFFECTIVE = "action_is_effective"  # fraction of executed actions that changed the state
M_RESPONSE_LENGTH = "response_length"  # mean sampled tokens per turn


@dataclass(frozen=True)
class TurnRecord:
    """One finished turn: the observation it acted on, what was sampled, how it parsed and what it did."""

    state: str
    response_ids: tuple[int, ...]
    text: str
    parsed: ParsedResponse
    result: TurnResult
    user_text: str = ""  # the input this turn answered, as text (tool results: one "[tool] ..." line each)


class AgentEpisode:
    """Drives one env through RAGEN's multi-turn protocol with token-exact transcripts.

    Usage: ``ids = ep.prompt()``; sample from ids; ``ep.step(sampled_ids, logprobs)``; repeat while
    ``not ep.done``. ``ep.samples()`` gives the training samples, ``ep.metrics()`` RAGEN's episode metrics.
    """

    def __init__(self, env: gym.Env, chat: ChatFormat, cfg: AgentConfig, seed: int | None = None,
                 options: dict | None = None) -> None:
        self.env, self.chat, self.cfg, self.seed = env, chat, cfg, seed
        self.error: str | None = None  # set when the env raised (the episode is then not trained)
        self.done = False
        try:
            self.state, _ = env.reset(seed=seed, options=options)
        except Exception as err:  # an env bug in reset ends this episode only
            self.state = ""
            self.fail(err)
        base = env.unwrapped
        self.action_names: list[str] = list(getattr(base, "action_names", []))
        self.tools: list[dict] = [t.schema() for t in getattr(base, "tools", None) or []]
        if self.tools and not cfg.enable_think:
            raise ValueError(f"{type(base).__name__} offers tools, which need agent enable_think=True: with "
                             "enable_think=False every response is pre-filled with <answer>, so no tool can be called")
        self.question = self.state  # what a tool env's user turns show (its state between calls is a tool result)
        self.system = system_prompt(base.instruction, self.action_names, cfg, tools=self.tools,
                                    describe_tools=not chat.native_tools)
        self.transcript = Transcript(chat, cfg, self.system, tools=self.tools)  # the template shows them, or not
        self.turns: list[TurnRecord] = []
        self.actions_left = cfg.max_actions_per_traj
        self.success = False

    def turn_input(self) -> TurnInput:
        """What the coming turn starts from: the tool results of the last turn's calls, else a user message."""
        if self.turns and self.turns[-1].parsed.num_tool_calls:
            return self.chat.tool_messages(self.turns[-1].result.observations)
        return self.user_text()

    def user_text(self) -> str:
        """The user message of the coming turn."""
        last = self.turns[-1].result if self.turns else None
        history = ""
        if self.cfg.context_mode == CONTEXT_SINGLE and self.turns:
            history = history_summary([(t.result.actions, t.result.reward) for t in self.turns])
        view = TurnView(
            turn=len(self.turns) + 1,
            state=self.question if self.tools else self.state,
            actions_left=self.actions_left,
            last_reward=None if last is None else last.reward,
            last_invalid=last is not None and not last.action_is_valid,
            history=history,
            tools=bool(self.tools),
        )
        return user_message(view, self.cfg)

    def prompt(self) -> list[int]:
        """Token ids to generate the next response from."""
        if self.done:
            raise RuntimeError("the episode is done")
        return self.transcript.next_prompt(self.turn_input())

    def step(self, response_ids: Sequence[int], logprobs: Sequence[float] | None = None) -> TurnRecord:
        """Take the sampled ids of the current turn, parse them and act in the env."""
        turn_input = self.turn_input()
        user_text = turn_input if isinstance(turn_input, str) else "\n".join(
            f"[{m['role']}] {m['content']}" for m in as_messages(turn_input))
        self.transcript.add_response(response_ids, logprobs)
        text = self.chat.decode_response(response_ids)
        parsed = parse_tool_response(text, self.cfg) if self.tools else parse_response(text, self.cfg,
                                                                                         self.action_names)
        result = execute_turn(self.env, parsed, self.cfg, self.actions_left, self.state)
        self.transcript.set_reward(result.reward)
        record = TurnRecord(state=str(self.state), response_ids=tuple(response_ids), text=text, parsed=parsed,
                            result=result, user_text=user_text)
        self.turns.append(record)
        self.state = result.state
        self.actions_left -= len(result.actions)
        self.success = self.success or result.success
        self.done = result.done or self.actions_left <= 0 or len(self.turns) >= self.cfg.max_turns
        return record

    def fail(self, err: BaseException) -> None:
        """End the episode because its env raised ``err``."""
        self.error = f"{type(err).__name__}: {err}"
        self.done = True

    def samples(self) -> list[Sample]:
        return self.transcript.samples()

    @property
    def episodic_return(self) -> float:
        """Sum of turn rewards (format penalties included)."""
        return sum(t.result.reward for t in self.turns)

    def metrics(self) -> dict[str, float]:
        n = max(len(self.turns), 1)
        actions = sum(len(t.result.actions) for t in self.turns)
        return {
            M_SUCCESS: float(self.success),
            M_RETURN: self.episodic_return,
            M_NUM_ACTIONS: float(actions),
            M_NUM_TURNS: float(len(self.turns)),
            M_FORMAT_OK: sum(t.parsed.format_ok for t in self.turns) / n,
            M_VALID: sum(t.result.action_is_valid for t in self.turns) / n,
            M_EFFECTIVE: sum(t.result.num_effective for t in self.turns) / max(actions, 1),
            M_RESPONSE_LENGTH: sum(len(t.response_ids) for t in self.turns) / n,
        }
