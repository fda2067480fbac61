"""Deterministic text corpus for training the tiny tokenizer: every built-in env's instruction,
renderings and action names, in the agent layer's prompt format."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np

from ragen_rllib.envs import BUILTIN_ENVS

FORMAT_TOKENS = ("<think>", "</think>", "<answer>", "</answer>")
#: Extra env_configs whose renderings differ from the defaults (observation formats, sizes).
VARIANTS: dict[str, list[dict]] = {
    "ragen/FrozenLake-v0": [{}, {"observation_format": "grid_coord"}, {"size": 6}],
    "ragen/Sokoban-v0": [{"num_boxes": 1}, {"num_boxes": 1, "observation_format": "grid_coord"}, {}],
    "ragen/Sudoku-v0": [{}, {"size": 9}],
}
SEEDS_PER_CONFIG = 12  # resets per env config
STEPS_PER_EPISODE = 4  # random steps rendered per reset


def example_texts(instruction: str, names: list[str], turn: int, obs: str, action: str, reward: float) -> list[str]:
    """Texts of one turn in RAGEN's prompt format (system, user, assistant, reward)."""
    return [
        f"You're a helpful assistant. {instruction} Your available actions are: {', '.join(names)}.",
        f"Turn {turn}:\nState:\n{obs}\nYou have {10 - turn} actions left. Always output: <think> [Your thoughts] "
        "</think> <answer> [your answer] </answer> with no extra text.",
        f"<think> I should go {action}. </think> <answer> {action} </answer>",
        f"Reward:\n{reward:g}",
    ]


def _episode_texts(env: gym.Env, seed: int, rng: np.random.Generator) -> Iterator[str]:
    obs, _ = env.reset(seed=seed)
    base = env.unwrapped
    names = list(base.action_names)
    for turn in range(1, STEPS_PER_EPISODE + 1):
        try:
            action = base.oracle_action() or (names[0] if names else "1")
        except NotImplementedError:
            action = str(rng.choice(names)) if names else "1"
        if names and rng.random() < 0.5:
            action = str(rng.choice(names))
        obs_next, reward, term, trunc, _ = env.step(action)
        yield from example_texts(base.instruction, names, turn, obs, action, float(reward))
        obs = obs_next
        if term or trunc:
            break


def training_corpus() -> Iterator[str]:
    """Yield the corpus strings (same order every call)."""
    rng = np.random.default_rng(0)
    for env_id in BUILTIN_ENVS:
        for cfg in VARIANTS.get(env_id, [{}]):
            env = gym.make(env_id, **cfg)
            for seed in range(SEEDS_PER_CONFIG):
                yield from _episode_texts(env, seed, rng)
