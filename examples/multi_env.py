"""Train on two env tags at once and validate on three, like RAGEN's ``es_manager`` tags.

What it shows: ``RagenConfig.environment(env_tags=..., val_env_tags=...)``: training groups from SimpleSokoban
and FrozenLake in one batch (each tag its own group count; the groups of all tags are cut into equal blocks,
one per env runner), validation on SimpleSokoban, LargerSokoban and FrozenLake (each its own group count and
seeds), and the per-tag metrics (``<tag>/success_rate``, ``<tag>/pass_at_k``, ...) RLlib reports next to the
overall ones. The same run as a config file: ``configs/runs/multi_env_sokoban.yaml``.

Run:  .venv/bin/python examples/multi_env.py                     # tiny:small, 3 iterations, ~3 min on 2 cores
      .venv/bin/python examples/multi_env.py --model Qwen/Qwen2.5-0.5B-Instruct --iterations 50   # a real model
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN_TAGS = ("SimpleSokoban", "FrozenLake")
VAL_TAGS = ("SimpleSokoban", "LargerSokoban", "FrozenLake")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny:small", help="a Hugging Face id, a local directory or tiny:nano/small")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--groups", type=int, default=2, help="training groups per tag")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--val-groups", type=int, default=4, help="validation groups per tag")
    p.add_argument("--max-response-tokens", type=int, default=64)
    args = p.parse_args()

    from ragen_rllib import RagenConfig, init_ray

    config = (RagenConfig()
              .environment(env_tags=[{"tag": t, "groups": args.groups} for t in TRAIN_TAGS],
                           val_env_tags=[{"tag": t, "groups": args.val_groups} for t in VAL_TAGS])
              .env_runners(num_env_runners=1)
              .rl_module(model_config={"model": args.model})
              .training(adv_estimator="grpo", group_size=args.group_size, minibatch_size=args.group_size,
                        max_turns=3, max_response_tokens=args.max_response_tokens, lr=1e-5,
                        engine_kwargs={"max_model_len": 2048})
              .evaluation(evaluation_interval=args.iterations)
              .debugging(seed=0))
    config.validate()  # bad tags fail here, before any actor starts
    init_ray(_temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False)
    algo = config.build_algo()
    try:
        for _ in range(args.iterations):
            result = algo.train()
            runners = result["env_runners"]
            per_tag = "  ".join(f"{t} {runners[f'{t}/success_rate']:.0%}" for t in TRAIN_TAGS)
            print(f"iter {result['training_iteration']}: success {runners['success_rate']:.0%} ({per_tag}), "
                  f"valid actions {runners['action_valid_rate']:.0%}", flush=True)
        val = result["evaluation"]["env_runners"]
        for tag in VAL_TAGS:
            print(f"validation {tag}: success {val[f'{tag}/success_rate']:.1%}, "
                  f"valid actions {val[f'{tag}/action_valid_rate']:.1%}", flush=True)
    finally:
        algo.stop()


if __name__ == "__main__":
    main()
