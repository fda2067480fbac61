"""Warm-start demonstrations: oracle play mixed with deliberately imperfect actions, recorded through the
agent layer, so every sample is EXACTLY the multi-turn transcript format rollouts use (mask on the
assistant tokens only)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.episode import AgentEpisode
from ragen_rllib.agent.prompts import assistant_text, tool_call_text
from ragen_rllib.envs.tools.tool_env import TOOL_CALL_OPEN


@dataclass(frozen=True)
class DemoPolicy:
    """How demonstrations act.

    Attributes:
        noise: probability that an action is replaced by a random one (imperfect demonstrations).
        multi_action: probability of giving more than one action in a turn (up to max_actions_per_turn).
    """

    noise: float = 0.3
    multi_action: float = 0.7


def _random_answer(base, rng: np.random.Generator) -> str:
    names = list(base.action_names)
    if names:
        return str(names[int(rng.integers(len(names)))])
    return str(int(rng.integers(0, 100)))  # free-form envs: a (most likely) wrong answer


def _oracle(base) -> str | None:
    try:
        return base.oracle_action()
    except NotImplementedError:
        return None


def demo_actions(env: gym.Env, cfg: AgentConfig, policy: DemoPolicy, rng: np.random.Generator) -> list[str]:
    """Actions for one turn: planned on a copy of the env (oracle, or random with probability ``noise``)."""
    sim = copy.deepcopy(env.unwrapped)
    named = bool(sim.action_names)
    k = 1
    if named and cfg.max_actions_per_turn > 1 and rng.random() < policy.multi_action:
        k = int(rng.integers(2, cfg.max_actions_per_turn + 1))
    actions = []
    for _ in range(k):
        action = _oracle(sim)
        if action is None or rng.random() < policy.noise:
            action = _random_answer(sim, rng)
        actions.append(action)
        _, _, terminated, truncated, _ = sim.step(action)
        if terminated or truncated:
            break
    return actions


def demo_think(actions: list[str], named: bool) -> str:
    """Short reasoning text of a demonstration turn."""
    if actions[0].startswith(TOOL_CALL_OPEN):
        return "I need to look this up."
    if named:
        return "I will move " + " then ".join(actions) + "."
    return f"The answer is {actions[0]}."


def response_ids(chat: ChatFormat, text: str) -> list[int]:
    """The ids a demonstrated response is sampled as: ``text`` (after the prefill) encoded, then end-of-sequence."""
    eos = chat.tokenizer.eos_token_id
    return chat.encode(text) + ([eos] if eos is not None else [])


def demonstration(env: gym.Env, chat: ChatFormat, cfg: AgentConfig, policy: DemoPolicy, seed: int,
                  rng: np.random.Generator) -> AgentEpisode:
    """Play one demonstration episode; the returned episode holds its samples and metrics."""
    ep = AgentEpisode(env, chat, cfg, seed=seed)
    while not ep.done:
        ep.prompt()
        actions = demo_actions(env, cfg, policy, rng)
        named = bool(ep.action_names)
        answer = f" {cfg.action_sep} ".join(actions) if named else actions[0]
        if ep.tools and answer.startswith(TOOL_CALL_OPEN):  # a tool env's call, in the tool-call format
            text = tool_call_text(demo_think(actions, named), [answer])
        else:
            text = assistant_text(demo_think(actions, named), answer, cfg)
        ep.step(response_ids(chat, text))
    return ep


def demonstrations(env_ids: list[str], chat: ChatFormat, cfg: AgentConfig, policy: DemoPolicy, episodes: int,
                   seed: int, env_configs: dict[str, dict] | None = None) -> Iterator[AgentEpisode]:
    """``episodes`` demonstration episodes per env id (env seeds ``seed*100000 + i``), envs interleaved."""
    rng = np.random.default_rng(seed)
    envs = [gym.make(env_id, **(env_configs or {}).get(env_id, {})) for env_id in env_ids]
    for i in range(episodes):
        for env in envs:
            yield demonstration(env, chat, cfg, policy, seed * 100_000 + i, rng)
