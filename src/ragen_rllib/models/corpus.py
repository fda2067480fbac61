"""Deterministic text corpus for training the tiny tokenizer: the grid and puzzle envs' instructions,
renderings and action names, in the agent layer's prompt format."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.prompts import (
    FORMAT_TAGS,
    TurnView,
    assistant_text,
    generation_prefill,
    system_prompt,
    user_message,
)

FORMAT_TOKENS = FORMAT_TAGS  # added to the tokenizer as single tokens
#: Extra env_configs whose renderings differ from the defaults (observation formats, sizes).
VARIANTS: dict[str, list[dict]] = {
    "ragen/FrozenLake-v0": [{}, {"observation_format": "grid_coord"}, {"size": 6}],
    "ragen/Sokoban-v0": [{"num_boxes": 1}, {"num_boxes": 1, "observation_format": "grid_coord"}, {}],
    "ragen/Sudoku-v0": [{}, {"size": 9}],
}
#: The envs the corpus renders: a fixed list, so a new env does not change the tiny models (their tokenizer is
#: byte-level, so they still read and write any other env's text).
CORPUS_ENVS = ("ragen/FrozenLake-v0", "ragen/Sokoban-v0", "ragen/Bandit-v0", "ragen/Countdown-v0",
               "ragen/MetaMathQA-v0", "ragen/Sudoku-v0", "ragen/2048-v0", "ragen/RubiksCube2x2-v0")
SEEDS_PER_CONFIG = 12  # resets per env config
STEPS_PER_EPISODE = 4  # random steps rendered per reset


def _episode_texts(env: gym.Env, seed: int, rng: np.random.Generator) -> Iterator[str]:
    """System, user and assistant texts of one episode in the agent layer's exact prompt format."""
    cfg = AgentConfig()
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped
    names = list(base.action_names)
    yield system_prompt(base.instruction, names, cfg)
    last_reward = None
    for turn in range(1, STEPS_PER_EPISODE + 1):
        try:
            action = base.oracle_action() or (names[0] if names else "1")
        except NotImplementedError:
            action = str(rng.choice(names)) if names else "1"
        if names and rng.random() < 0.5:
            action = str(rng.choice(names))
        view = TurnView(turn=turn, state=obs, actions_left=cfg.max_actions_per_traj - turn + 1,
                        last_reward=last_reward, last_invalid=rng.random() < 0.2)
        yield user_message(view, cfg)
        yield generation_prefill(cfg) + assistant_text(f"I will move {action}.", action, cfg)
        obs, last_reward, term, trunc, _ = env.step(action)
        if term or trunc:
            break


def training_corpus() -> Iterator[str]:
    """Yield the corpus strings (same order every call)."""
    rng = np.random.default_rng(0)
    import ragen_rllib.envs  # noqa: F401  (registers the built-in envs)

    for env_id in CORPUS_ENVS:
        for cfg in VARIANTS.get(env_id, [{}]):
            env = gym.make(env_id, **cfg)
            for seed in range(SEEDS_PER_CONFIG):
                yield from _episode_texts(env, seed, rng)
