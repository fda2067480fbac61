"""Token-in, token-out transcripts of one trajectory, in the three context modes.

The transcript hands out each turn's generation prompt (token ids) and takes back the ids the engine
sampled. Training samples come out with a loss mask that is 1 exactly on sampled ids, the index of each
turn's last sampled token, per-turn rewards and the sampling log-probs.

- ``full``: one growing sample per trajectory; each prompt = the previous prompt + the sampled ids + the
  end of turn and the next user message. If a prompt would not leave ``max_response_tokens`` within
  ``max_model_len``, the sample is closed and a new one starts from a prompt that keeps the system
  message and as many of the latest turns as fit (dropped from the left, whole turns).
- ``limited_multi_turn``: one sample per turn; prompt = system + the last ``context_window - 1`` turns.
- ``single_turn``: one sample per turn; prompt = system + the current user message (the caller puts a
  history summary into it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ragen_rllib.agent.chat_format import ChatFormat, TurnInput
from ragen_rllib.agent.config import CONTEXT_FULL, CONTEXT_LIMITED, AgentConfig


@dataclass
class Sample:
    """One training sequence.

    Attributes:
        input_ids: [T] token ids.
        loss_mask: [T] 1 on ids the engine sampled (trained), 0 on prompt/env tokens.
        logprobs: [T] sampling log-prob of ``input_ids[t]`` where the mask is 1 (0.0 elsewhere).
        turn_ends: index in ``input_ids`` of each trained turn's last sampled token.
        turn_rewards: reward of each trained turn (same order as ``turn_ends``).
        turn_numbers: 0-based turn numbers of the trained turns.
        has_logprobs: every trained turn came with sampling log-probs.
    """

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    turn_numbers: list[int] = field(default_factory=list)
    has_logprobs: bool = True

    def extend(self, ids: Sequence[int], trained: bool, logprobs: Sequence[float] | None = None) -> None:
        ids = list(ids)
        self.input_ids += ids
        self.loss_mask += [int(trained)] * len(ids)
        if trained and logprobs is not None and len(logprobs) == len(ids):
            self.logprobs += [float(x) for x in logprobs]
        else:
            self.logprobs += [0.0] * len(ids)
            if trained:
                self.has_logprobs = False


@dataclass
class _Turn:
    user: TurnInput
    prompt_len: int
    response: list[int] = field(default_factory=list)
    reward: float = 0.0


class Transcript:
    """The conversation of one trajectory as token ids (see the module docstring)."""

    def __init__(self, chat: ChatFormat, cfg: AgentConfig, system: str, tools: list[dict] | None = None) -> None:
        self.chat, self.cfg, self.system = chat, cfg, system
        self.tools = tools  # ``tools=`` schemas (ChatFormat.render passes them to templates that render them)
        self.turns: list[_Turn] = []
        self._samples: list[Sample] = []
        self._open: Sample | None = None  # full mode: the growing sample
        self._budget = cfg.max_model_len - cfg.max_response_tokens  # longest prompt allowed

    # ------------------------------------------------------------------ turn protocol
    def next_prompt(self, user: TurnInput) -> list[int]:
        """Token ids of the generation prompt for a new turn whose input is ``user`` (a text or messages)."""
        if self._awaiting:
            raise RuntimeError("add_response() must be called before the next prompt")
        if self.cfg.context_mode == CONTEXT_FULL:
            ids = self._full_prompt(user)
        else:
            keep = self.cfg.context_window - 1 if self.cfg.context_mode == CONTEXT_LIMITED else 0
            ids = self._rebuilt_prompt(user, keep)
            self._open = Sample()
            self._open.extend(ids, trained=False)
        self.turns.append(_Turn(user=user, prompt_len=len(ids)))
        self._awaiting = True
        return ids

    def add_response(self, ids: Sequence[int], logprobs: Sequence[float] | None = None, reward: float = 0.0) -> None:
        """Record the ids the engine sampled for the current turn (and its reward, if known yet)."""
        if not self.turns or not self._awaiting:
            raise RuntimeError("next_prompt() must be called before add_response()")
        turn, sample = self.turns[-1], self._open
        turn.response, turn.reward = list(ids), float(reward)
        sample.extend(turn.response, trained=True, logprobs=logprobs)
        sample.turn_ends.append(len(sample.input_ids) - 1)
        sample.turn_rewards.append(turn.reward)
        sample.turn_numbers.append(len(self.turns) - 1)
        self._awaiting = False
        if self.cfg.context_mode != CONTEXT_FULL:
            self._samples.append(sample)
            self._open = None

    def set_reward(self, reward: float) -> None:
        """Set the reward of the latest turn (known only after its actions ran)."""
        turn = self.turns[-1]
        turn.reward = float(reward)
        owner = self._open if self._open is not None else self._samples[-1]
        owner.turn_rewards[-1] = turn.reward

    def samples(self) -> list[Sample]:
        """Training samples so far (full mode: the open sample included)."""
        extra = [self._open] if self._open is not None and self._open.turn_ends else []
        return self._samples + extra

    _awaiting = False  # a prompt was handed out and its response not yet added

    # ------------------------------------------------------------------ prompt building
    def _full_prompt(self, user: str) -> list[int]:
        if self._open is not None and self.turns:
            last = self.turns[-1]
            cont = self.chat.continuation(self.system, last.user, last.response, user, tools=self.tools)
            if len(self._open.input_ids) + len(cont) <= self._budget:
                self._open.extend(cont, trained=False)
                return list(self._open.input_ids)
            if self._open.turn_ends:
                self._samples.append(self._open)
        ids = self._rebuilt_prompt(user, keep=len(self.turns))
        self._open = Sample()
        self._open.extend(ids, trained=False)
        return ids

    def _rebuilt_prompt(self, user: TurnInput, keep: int) -> list[int]:
        """System + the latest ``keep`` turns (fewer if they do not fit) + ``user``."""
        history = [(t.user, t.response) for t in self.turns]
        for k in range(min(keep, len(history)), -1, -1):
            ids, _ = self.chat.prompt(self.system, history[len(history) - k:] if k else [], user, tools=self.tools)
            if len(ids) <= self._budget:
                return ids
        raise ValueError(
            f"the system prompt and the current turn need {len(ids)} tokens, more than max_model_len="
            f"{self.cfg.max_model_len} - max_response_tokens={self.cfg.max_response_tokens} = {self._budget}; "
            "raise max_model_len or lower max_response_tokens"
        )
