"""CPU demo: play every built-in environment with its oracle solver and with a random policy.

It shows the text environments end to end in seconds; the RL training demo replaces it as the
README's main command once the RLlib plugin lands.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

from ragen_rllib.envs import BUILTIN_ENVS

#: env_config used by the demo per env (RAGEN's training tags where they differ from the defaults).
DEMO_CONFIGS: dict[str, dict] = {
    "ragen/FrozenLake-v0": {"size": 4, "success_rate": 0.8},
    "ragen/Sokoban-v0": {"dim_room": (6, 6), "num_boxes": 1},
    "ragen/Sudoku-v0": {"size": 4},
}
MAX_EPISODE_STEPS = 200  # cap on steps per demo episode


def play(env: gym.Env, policy: str, seed: int, rng: np.random.Generator) -> tuple[bool, float, int]:
    """One episode; returns (success, return, steps)."""
    obs, info = env.reset(seed=seed)
    total, steps = 0.0, 0
    base = env.unwrapped
    while steps < MAX_EPISODE_STEPS:
        steps += 1
        if policy == "oracle":
            action = base.oracle_action() or ""
        else:
            names = base.action_names
            action = str(rng.choice(names)) if names else "0"
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return bool(info["success"]), total, steps


def run_env_demo(episodes: int = 20, seed: int = 0) -> dict[str, dict[str, float]]:
    """Print and return success rate / mean return of oracle and random play on every env."""
    rng = np.random.default_rng(seed)
    results: dict[str, dict[str, float]] = {}
    print(f"{'env':26s} {'policy':7s} {'success':>8s} {'return':>8s} {'steps':>6s} {'ms/ep':>7s}")
    for env_id in BUILTIN_ENVS:
        env = gym.make(env_id, **DEMO_CONFIGS.get(env_id, {}))
        for policy in ("oracle", "random"):
            if policy == "oracle":
                env.reset(seed=seed)
                try:
                    env.unwrapped.oracle_action()
                except NotImplementedError:
                    continue
            t0 = time.perf_counter()
            runs = [play(env, policy, seed + i, rng) for i in range(episodes)]
            ms = 1000 * (time.perf_counter() - t0) / episodes
            succ = float(np.mean([r[0] for r in runs]))
            ret = float(np.mean([r[1] for r in runs]))
            steps = float(np.mean([r[2] for r in runs]))
            results[f"{env_id}/{policy}"] = {"success": succ, "return": ret, "steps": steps}
            print(f"{env_id:26s} {policy:7s} {succ:8.2f} {ret:8.2f} {steps:6.1f} {ms:7.1f}")
        if env_id == "ragen/FrozenLake-v0":
            obs, _ = env.reset(seed=seed)
            print("  example FrozenLake state:\n    " + obs.replace("\n", "\n    "))
    return results
