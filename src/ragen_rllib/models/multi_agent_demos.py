"""Warm-start demonstrations for turn-based multi-agent envs (tic-tac-toe, the solver/verifier pair).

Each demonstration game is played through :class:`~ragen_rllib.agent.multi_agent.MultiAgentEpisode`, so every
sample is EXACTLY the per-agent transcript a rollout produces (its own system prompt, its own view of the board,
the loss mask on the assistant tokens only). The LLM agents of a game play the env's oracle (minimax for
tic-tac-toe) with each move replaced by a random one with probability ``noise``; the other agents are scripted
(``opponent``: a kind of the env's fixed pool, such as ``"random"``). Which agents the LLM plays cycles over
``sides`` game by game (e.g. ``(("x",), ("o",))``: x against the pool, then o against it). The response ids are
encoded as the single-agent demonstrations do (:func:`ragen_rllib.models.demonstrations.response_ids`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.multi_agent import MultiAgentEpisode, Scripted
from ragen_rllib.agent.prompts import assistant_text
from ragen_rllib.envs.multi_agent.turn_based import Opponent
from ragen_rllib.models.demonstrations import demo_think, response_ids

#: A random (imperfect) move of the agent whose turn it is: (env, agent, rng) -> action string.
RandomMove = Callable[[object, str, np.random.Generator], str]


def env_random_action(env, agent: str, rng: np.random.Generator) -> str:
    """The env's own well-formed random action (``env.random_action``: tic-tac-toe a free cell)."""
    return env.random_action(agent, rng)


@dataclass(frozen=True)
class MultiAgentDemoPolicy:
    """How the demonstration games are played.

    Attributes:
        noise: probability that an LLM agent's oracle move is replaced by ``random_move``.
        agent_noise: per-agent noise overriding ``noise`` for the agents it names (e.g. ``{"verifier": 0.0}``: the
            verifier always demonstrates the oracle's verdict, the solver ``noise``).
        sides: the agents the LLM plays, cycled over the games (None: every agent in every game, self-play).
        opponent: the fixed-pool kind (``env.opponent_action(agent, kind)``) of the agents the LLM does not play.
        random_move: the imperfect move (default :func:`env_random_action`, the env's ``random_action``).
    """

    noise: float = 0.3
    agent_noise: Mapping[str, float] | None = None
    sides: tuple[tuple[str, ...], ...] | None = None
    opponent: str = "random"
    random_move: RandomMove = env_random_action

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise <= 1.0:
            raise ValueError(f"MultiAgentDemoPolicy.noise = {self.noise!r} is invalid: a probability in [0, 1]")
        for agent, noise in (self.agent_noise or {}).items():
            if not (isinstance(noise, (int, float)) and 0.0 <= noise <= 1.0):
                raise ValueError(f"MultiAgentDemoPolicy.agent_noise[{agent!r}] = {noise!r} is invalid: a probability "
                                 "in [0, 1]")
        if self.sides is not None and (not self.sides or not all(self.sides)):
            raise ValueError(f"MultiAgentDemoPolicy.sides = {self.sides!r} is invalid: a non-empty tuple of "
                             "non-empty agent tuples, e.g. (('x',), ('o',)), or None for every agent")


    def noise_of(self, agent: str) -> float:
        """The probability that ``agent``'s demonstrated move is random."""
        return (self.agent_noise or {}).get(agent, self.noise)


def demo_move(env, agent: str, policy: MultiAgentDemoPolicy, rng: np.random.Generator) -> str:
    """The oracle's move for ``agent``, or a random one with probability ``policy.noise_of(agent)``."""
    if rng.random() < policy.noise_of(agent):
        return policy.random_move(env, agent, rng)
    return env.oracle_action(agent)


def demonstration_game(env, chat: ChatFormat, cfg: AgentConfig, policy: MultiAgentDemoPolicy, seed: int,
                       rng: np.random.Generator, llm_agents: Sequence[str]) -> MultiAgentEpisode:
    """Play one demonstration game with the LLM as ``llm_agents`` (the others scripted by ``policy.opponent``)."""
    unknown = sorted((set(llm_agents) | set(policy.agent_noise or {})) - set(env.possible_agents))
    if unknown:
        raise ValueError(f"sides or agent_noise name agents {unknown} that {type(env).__name__} does not have; "
                         f"use some of {list(env.possible_agents)}")
    scripted: Mapping[str, Scripted] = {a: Opponent(policy.opponent) for a in env.possible_agents
                                        if a not in llm_agents}
    ep = MultiAgentEpisode(env, {a: chat for a in llm_agents}, cfg, seed=seed, scripted=scripted)
    while not ep.done:
        ep.prompt()
        move = demo_move(env, ep.current, policy, rng)
        ep.step(response_ids(chat, assistant_text(demo_think([move], named=True), move, cfg)))
    return ep


def multi_agent_demonstrations(make_env: Callable[[], object], chat: ChatFormat, cfg: AgentConfig,
                               policy: MultiAgentDemoPolicy, episodes: int, seed: int,
                               ) -> Iterator[MultiAgentEpisode]:
    """``episodes`` demonstration games (env seeds ``seed*100000 + i``; one env from ``make_env`` reused)."""
    rng = np.random.default_rng(seed)
    env = make_env()
    sides = policy.sides or (tuple(env.possible_agents),)
    for i in range(episodes):
        yield demonstration_game(env, chat, cfg, policy, seed * 100_000 + i, rng, sides[i % len(sides)])


def demo_samples(episodes: Sequence[MultiAgentEpisode]) -> list[dict]:
    """SFT samples (``input_ids``, ``loss_mask``) of every LLM agent's transcript in the games."""
    return [{"input_ids": s.input_ids, "loss_mask": s.loss_mask}
            for ep in episodes for agent in ep.llm_agents for s in ep.samples(agent)]
