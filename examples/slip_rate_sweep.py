"""RAGEN's FrozenLake slip-rate study as a Ray Tune experiment, from Python.

What it shows: a RagenConfig whose env_config holds ``tune.grid_search`` over the slip rate (success_rate =
1 - slip), crossed with rollout filtering on / off (the config's ``sweep_variant``: settings that change
together), validation before training and at the end, and Tune running the trials (one per point; Tune packs
them by each trial's resource request). ``--asha`` adds an ASHA scheduler on validation success. At the end it
prints slip x filter -> validation success before and after. The same study as a config file:
``ragen-rllib sweep configs/sweeps/frozenlake_slip_rate_quick.yaml`` (tables, PNG and JSON included).

Run:  .venv/bin/python examples/slip_rate_sweep.py --model DIR     # e.g. the demo's warm start under .cache/demo/
      .venv/bin/python examples/slip_rate_sweep.py --slips 0 0.5 --iterations 2 --model tiny:nano   # a quick look
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILTER = {"name": "filter", "training.filter_strategy": "top_p", "training.filter_value": 0.9,
          "training.filter_top_p_mode": "softmax", "training.filter_include_zero": False}
NO_FILTER = {"name": "nofilter", "training.filter_strategy": None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="tiny:small", help="the model every trial starts from")
    p.add_argument("--slips", type=float, nargs="+", default=[0.0, 0.2, 0.5, 1.0], help="slip rates")
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--val-groups", type=int, default=64, help="validation maps")
    p.add_argument("--max-response-tokens", type=int, default=400)
    p.add_argument("--asha", action="store_true", help="stop poor trials early (ASHA on validation success)")
    p.add_argument("--out", default=str(ROOT / "runs" / "slip_rate_sweep"))
    args = p.parse_args()

    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from ragen_rllib import Ragen, RagenConfig, init_ray

    config = (RagenConfig()
              .environment("ragen/FrozenLake-v0", env_config={
                  "size": 4, "is_slippery": True, "success_rate": tune.grid_search([1.0 - s for s in args.slips])})
              .env_runners(num_env_runners=1)
              .rl_module(model_config={"model": str(Path(args.model).resolve()) if Path(args.model).exists()
                                       else args.model})
              .preset("dr_grpo")
              .training(env_groups=8, group_size=8, minibatch_size=32, lr=1.5e-4, old_logprobs="engine",
                        max_response_tokens=args.max_response_tokens, val_env_groups=args.val_groups,
                        val_before_train=True)
              .evaluation(evaluation_interval=args.iterations)
              .debugging(seed=0))
    config.sweep_variant = tune.grid_search([FILTER, NO_FILTER])  # applied per trial by RagenConfig
    init_ray(_temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False,
             runtime_env={"env_vars": {"RAY_CHDIR_TO_TRIAL_DIR": "0"}})
    metric = "evaluation/env_runners/success_rate"
    scheduler = ASHAScheduler(metric=metric, mode="max", max_t=args.iterations, grace_period=1) if args.asha \
        else None
    results = tune.Tuner(Ragen, param_space=config, tune_config=tune.TuneConfig(scheduler=scheduler,
                                                                             max_concurrent_trials=1),
                         run_config=tune.RunConfig(storage_path=str(Path(args.out).resolve()), name="trials",
                                                   stop={"training_iteration": args.iterations}, verbose=0)).fit()
    print("slip  filter    success before -> after")
    for r in sorted(results, key=lambda r: (r.config["env_config"]["success_rate"], r.config["sweep_variant"]["name"])):
        before = r.metrics_dataframe.get(f"evaluation_before_training/{metric.split('/', 1)[1]}")
        after = (r.metrics.get("evaluation") or {}).get("env_runners", {}).get("success_rate")
        first = before.dropna().iloc[0] if before is not None and len(before.dropna()) else float("nan")
        print(f"{1 - r.config['env_config']['success_rate']:4.0%}  {r.config['sweep_variant']['name']:8s}  "
              f"{first:6.1%} -> {after if after is not None else float('nan'):6.1%}")


if __name__ == "__main__":
    main()
