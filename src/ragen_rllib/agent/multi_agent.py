"""Several LLM agents in one turn-based env: one token-exact transcript per agent.

A :class:`MultiAgentEpisode` drives a :class:`~ragen_rllib.envs.multi_agent.turn_based.TurnBasedTextEnv`
(PettingZoo AEC).
Each LLM agent has its own system prompt (its role's instruction) and its own transcript: its user turns show its
own view of the game (``env.observe(agent)``: the other agents' moves appear there as text), its assistant turns
are exactly the ids it sampled. Agents given in ``scripted`` (fixed opponents such as minimax) act through a
function and have no transcript. Rewards an agent receives while others move (a loss on the opponent's move) are
credited to that agent's latest turn. Nothing here knows of RLlib: modules and engines are the caller's (the
batched loop :func:`rollout_multi` takes one engine per module and a mapping from agent to module).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ragen_rllib.agent import episode as E
from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.parsing import ParsedResponse, parse_response
from ragen_rllib.agent.prompts import TurnView, system_prompt, user_message
from ragen_rllib.agent.rollout import TURN_SEED_STRIDE, step_all
from ragen_rllib.agent.transcript import Sample, Transcript
from ragen_rllib.engines.base import GenerationEngine, SamplingConfig
from ragen_rllib.envs.base import ACTION_IS_VALID, SUCCESS

#: A fixed policy: (env, agent) -> action string.
Scripted = Callable[[object, str], str]


@dataclass
class AgentTurn:
    """One LLM turn of one agent."""

    observation: str
    response_ids: tuple[int, ...]
    text: str
    parsed: ParsedResponse
    action_is_valid: bool
    reward: float = 0.0


class MultiAgentEpisode:
    """See the module docstring. Usage: while ``ep.current``: ``ids = ep.prompt()``, sample, ``ep.step(ids)``."""

    def __init__(self, env, chats: Mapping[str, ChatFormat], cfg: AgentConfig, seed: int | None = None,
                 scripted: Mapping[str, Scripted] | None = None) -> None:
        self.env, self.cfg, self.seed = env, cfg, seed
        self.scripted = dict(scripted or {})
        self.llm_agents = [a for a in env.possible_agents if a not in self.scripted]
        unknown = sorted(set(self.llm_agents) - set(chats))
        if unknown:
            raise ValueError(f"agents {unknown} have no chat format; give one per LLM agent or script them")
        self.chats = {a: chats[a] for a in self.llm_agents}
        self.systems = {a: system_prompt(env.instructions.get(a, ""), [], cfg) for a in self.llm_agents}
        self.transcripts = {a: Transcript(self.chats[a], cfg, self.systems[a]) for a in self.llm_agents}
        self.turns: dict[str, list[AgentTurn]] = {a: [] for a in env.possible_agents}
        self.returns = {a: 0.0 for a in env.possible_agents}
        self.success = {a: False for a in env.possible_agents}
        self.error: str | None = None
        self._current: str | None = None
        self._pending: dict[str, float] = {}  # the mover's reward from its own action, until its turn is recorded
        env.reset(seed=seed)
        self._advance()

    # ------------------------------------------------------------------ protocol
    @property
    def current(self) -> str | None:
        """The LLM agent whose turn it is (None: the episode is over)."""
        return self._current

    @property
    def done(self) -> bool:
        return self._current is None

    def prompt(self) -> list[int]:
        agent = self._require_current()
        turns = self.turns[agent]
        last = turns[-1] if turns else None
        view = TurnView(turn=len(turns) + 1, state=self.env.observe(agent), actions_left=self._turns_left(agent),
                        last_reward=None if last is None else last.reward,
                        last_invalid=last is not None and not last.action_is_valid)
        return self.transcripts[agent].next_prompt(user_message(view, self.cfg))

    def step(self, response_ids: Sequence[int], logprobs: Sequence[float] | None = None) -> AgentTurn:
        agent = self._require_current()
        self.transcripts[agent].add_response(response_ids, logprobs)
        text = self.chats[agent].decode_response(response_ids)
        parsed = parse_response(text, self.cfg, [])
        observation = self.env.observe(agent)
        self._env_step(agent, parsed.actions[0] if parsed.format_ok else None)
        valid = parsed.format_ok and bool(self.env.infos.get(agent, {}).get(ACTION_IS_VALID, False))
        turn = AgentTurn(observation, tuple(response_ids), text, parsed, valid, reward=self._pending.pop(agent, 0.0))
        self.turns[agent].append(turn)
        self.transcripts[agent].set_reward(turn.reward)
        self._advance()
        return turn

    def fail(self, err: BaseException) -> None:
        self.error = f"{type(err).__name__}: {err}"
        self._current = None

    def samples(self, agent: str) -> list[Sample]:
        return self.transcripts[agent].samples()

    def metrics(self, agent: str) -> dict[str, float]:
        """RAGEN's episode metrics for ``agent`` (the single-agent keys: one action per turn)."""
        turns = self.turns[agent]
        n = max(len(turns), 1)
        valid = sum(t.action_is_valid for t in turns)
        return {E.M_SUCCESS: float(self.success[agent]), E.M_RETURN: self.returns[agent],
                E.M_NUM_ACTIONS: float(len(turns)), E.M_NUM_TURNS: float(len(turns)),
                E.M_FORMAT_OK: sum(t.parsed.format_ok for t in turns) / n, E.M_VALID: valid / n,
                E.M_EFFECTIVE: valid / n, E.M_RESPONSE_LENGTH: sum(len(t.response_ids) for t in turns) / n}

    # ------------------------------------------------------------------ the env loop
    def _env_step(self, agent: str, action: str | None) -> None:
        self.env.step(action)
        for a, r in self.env.rewards.items():
            self.returns[a] += float(r)
            if a == agent:
                self._pending[a] = self._pending.get(a, 0.0) + float(r)
            else:  # a reward on another agent's move: this agent's latest turn earned it
                self._credit(a, float(r))

    def _credit(self, agent: str, reward: float) -> None:
        if agent in self.transcripts and self.turns[agent]:
            self.turns[agent][-1].reward += reward
            self.transcripts[agent].set_reward(self.turns[agent][-1].reward)

    def _advance(self) -> None:
        """Let scripted agents act until an LLM agent is to move, or the game is over."""
        env = self.env
        while True:
            if not env.agents or all(env.terminations[a] or env.truncations[a] for a in env.agents):
                for a in env.possible_agents:
                    self.success[a] = bool(env.infos.get(a, {}).get(SUCCESS, False))
                self._current = None
                return
            agent = env.agent_selection
            if agent in self.scripted:
                self._env_step(agent, self.scripted[agent](env, agent))
                self._pending.pop(agent, None)  # a scripted agent keeps no turns
                continue
            if self._turns_left(agent) <= 0:  # out of turns: the episode ends here (not a game result)
                self._current = None
                return
            self._current = agent
            return

    def _turns_left(self, agent: str) -> int:
        return self.cfg.max_turns - len(self.turns[agent])

    def _require_current(self) -> str:
        if self._current is None:
            raise RuntimeError("the episode is over")
        return self._current


def rollout_multi(engines: Mapping[str, GenerationEngine], chats: Mapping[str, ChatFormat], envs: Sequence,
                  seeds: Sequence[int | None], cfg: AgentConfig, sampling: SamplingConfig,
                  module_of: Callable[[str], str], scripted: Mapping[str, Scripted] | None = None,
                  ) -> list[MultiAgentEpisode]:
    """One episode per env; every round, the agents to move are grouped by module (``module_of(agent)``) and each
    module's engine samples its prompts in ONE call. An env error ends that episode only."""
    agent_chats = {a: chats[module_of(a)] for env in envs for a in env.possible_agents if a not in (scripted or {})}
    episodes = [MultiAgentEpisode(env, agent_chats, cfg, seed=s, scripted=scripted) for env, s in zip(envs, seeds)]
    sampling = replace(sampling, max_tokens=cfg.max_response_tokens)
    for round_ in itertools.count():  # ends: every agent has at most cfg.max_turns turns
        active = [ep for ep in episodes if not ep.done]
        if not active:
            break
        by_module: dict[str, list[MultiAgentEpisode]] = {}
        for ep in active:
            by_module.setdefault(module_of(ep.current), []).append(ep)
        round_sampling = sampling if sampling.seed is None else replace(
            sampling, seed=sampling.seed + round_ * TURN_SEED_STRIDE)
        for module, eps in by_module.items():
            step_all(engines[module], eps, round_sampling)
    return episodes
