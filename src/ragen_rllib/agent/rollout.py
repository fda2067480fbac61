"""The batched multi-turn rollout loop: every turn, one engine call for all active episodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import gymnasium as gym

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.episode import AgentEpisode
from ragen_rllib.engines.base import GenerationEngine, SamplingConfig

#: Seed stride between turns, so turn t of a batch never reuses turn 0's sampling seeds.
TURN_SEED_STRIDE = 1_000_003


def rollout(
    engine: GenerationEngine,
    chat: ChatFormat,
    envs: Sequence[gym.Env],
    seeds: Sequence[int | None],
    cfg: AgentConfig,
    sampling: SamplingConfig,
) -> list[AgentEpisode]:
    """Run one trajectory per env (reset with ``seeds[i]``) until all are done or out of turns.

    Each turn builds the prompts of all active episodes and samples them in ONE ``engine.generate``
    call (``max_tokens`` = ``cfg.max_response_tokens``). Returns the finished episodes (env order). An
    exception raised while stepping one env ends that episode only (``episode.error`` says why).
    """
    if len(envs) != len(seeds):
        raise ValueError(f"got {len(envs)} envs but {len(seeds)} seeds; pass one seed per env")
    episodes = [AgentEpisode(env, chat, cfg, seed=s) for env, s in zip(envs, seeds)]
    sampling = replace(sampling, max_tokens=cfg.max_response_tokens)
    for turn in range(cfg.max_turns):
        active = [ep for ep in episodes if not ep.done]
        if not active:
            break
        turn_sampling = sampling if sampling.seed is None else replace(
            sampling, seed=sampling.seed + turn * TURN_SEED_STRIDE)
        step_all(engine, active, turn_sampling)
    return episodes


def step_all(engine: GenerationEngine, episodes: Sequence, sampling: SamplingConfig) -> None:
    """ONE ``engine.generate`` call for the prompts of ``episodes`` (single- or multi-agent); each episode then takes
    its generation. An exception while stepping one episode ends that episode only (``episode.fail``)."""
    generations = engine.generate([ep.prompt() for ep in episodes], sampling)
    for ep, gen in zip(episodes, generations):
        try:
            ep.step(gen.token_ids, gen.logprobs)
        except Exception as err:  # an env bug hits one episode, never the batch
            ep.fail(err)


def summarize(episodes: Sequence[AgentEpisode]) -> dict[str, float]:
    """Mean of every episode metric over ``episodes``."""
    if not episodes:
        return {}
    keys = episodes[0].metrics().keys()
    all_metrics = [ep.metrics() for ep in episodes]
    return {k: sum(m[k] for m in all_metrics) / len(all_metrics) for k in keys}
