"""One agent trajectory in one environment: prompt -> sampled ids -> parse -> act, turn after turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import CONTEXT_SINGLE, AgentConfig
from ragen_rllib.agent.parsing import ParsedResponse, parse_response
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
    user_text: str = ""  # the user message this turn answered (the observation as the model saw it)


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
        self.system = system_prompt(base.instruction, self.action_names, cfg)
        self.transcript = Transcript(chat, cfg, self.system)
        self.turns: list[TurnRecord] = []
        self.actions_left = cfg.max_actions_per_traj
        self.success = False

    def user_text(self) -> str:
        """The user message of the coming turn."""
        last = self.turns[-1].result if self.turns else None
        history = ""
        if self.cfg.context_mode == CONTEXT_SINGLE and self.turns:
            history = history_summary([(t.result.actions, t.result.reward) for t in self.turns])
        view = TurnView(
            turn=len(self.turns) + 1,
            state=self.state,
            actions_left=self.actions_left,
            last_reward=None if last is None else last.reward,
            last_invalid=last is not None and not last.action_is_valid,
            history=history,
        )
        return user_message(view, self.cfg)

    def prompt(self) -> list[int]:
        """Token ids to generate the next response from."""
        if self.done:
            raise RuntimeError("the episode is done")
        return self.transcript.next_prompt(self.user_text())

    def step(self, response_ids: Sequence[int], logprobs: Sequence[float] | None = None) -> TurnRecord:
        """Take the sampled ids of the current turn, parse them and act in the env."""
        user_text = self.user_text()
        self.transcript.add_response(response_ids, logprobs)
        text = self.chat.decode_response(response_ids)
        parsed = parse_response(text, self.cfg, self.action_names)
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
