"""Learning record of a multi-agent env: RL against a fixed pool (or self-play) raises tic-tac-toe's win rate
against a fixed reference opponent on held-out starts, over 3 seeds.

What it measures: the small tiny model (built from scratch) is warm-started once (cached under .cache/bench/) on
noisy-minimax games from the TRAIN split of the 2-move openings (``TicTacToeEnv(openings="train")``), playing x and
o in turn against a random opponent, with each move random with probability ``--noise``: it learns the answer
format with room left to learn. Then for each seed: RLlib training on the train split, ``x`` on the run's module
and ``o`` either a fixed opponent (``--train-against random``, the default: ``scripted_agents``) or the model
itself (``--train-against self``: self-play, both sides train; GRPO per (group, agent)), and the win rate of ``x``
against the reference opponent (``random``) on the VALIDATION split (openings never trained on) before and after,
``--eval-games`` games each at RAGEN's validation temperature 0.5 (``--eval-temperature``). The reference is
``random``: from these held-out openings (4000 games each, env seeds 500000+) a random-legal x wins 60.4% against
it, noisy minimax 87.2%, minimax 98.4%, so there is room above a weak start; against ``minimax`` x can at best draw.
Reported: before, after, lift and the binomial standard error per seed (lift SE: both rates' SEs in quadrature),
mean +- std of the lift across seeds, the CPU and the times.

Run:  .venv/bin/python benchmarks/learning_tictactoe.py [--seeds 0 1 2] [--iterations 5] [--eval-games 200]
Writes benchmarks/results/learning_tictactoe.json and .png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
ENV = "ragen_rllib.envs.tictactoe:TicTacToeEnv"
TRAIN = {"opening_moves": 2, "openings": "train"}
HELD_OUT = {"opening_moves": 2, "openings": "validation"}
EVAL_SEED = 500_000  # env seeds of the evaluation games (the split, not the seed, keeps them held out)


def warm_model(args) -> Path:
    """The small model warm-started on noisy minimax games (built once, cached)."""
    from ragen_rllib.models.tiny import build_model
    from ragen_rllib.models.versus import GAME_AGENT
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    name = f"small-tictactoe-nothink-{args.demo_games}x{args.epochs}ep-noise{args.noise:g}"
    path = ROOT / ".cache" / "bench" / name
    if not (path / REPORT_FILE).exists():
        print(f"[tictactoe] warm-starting the small model into {path} (once)", flush=True)
        build_model("small", path, seed=0)
        cfg = WarmStartConfig(envs=(ENV,), env_configs={ENV: TRAIN}, episodes_per_env=args.demo_games,
                              epochs=args.epochs, noise=args.noise, sides=(("x",), ("o",)), opponent="random",
                              agent=GAME_AGENT, eval_episodes=64, eval_env_config=HELD_OUT, eval_temperature=1.0)
        print(warm_start(path, cfg).summary(), flush=True)
    return path


def evaluate(model: str | Path, args, seed: int = 0) -> dict:
    from ragen_rllib.models.versus import play_against

    start = time.perf_counter()
    r = play_against(str(model), HELD_OUT, args.reference, args.eval_games, seed=EVAL_SEED, agent="x",
                     engine="hf", temperature=args.eval_temperature, sampling_seed=seed)
    r["seconds"] = time.perf_counter() - start
    return r


def run(model: Path, seed: int, before: dict, args) -> dict:
    from ragen_rllib import RagenConfig
    from ragen_rllib.evaluation import export_checkpoint
    from ragen_rllib.models.versus import GAME_AGENT

    config = (RagenConfig()
              .environment(ENV, env_config=TRAIN)
              .env_runners(num_env_runners=1)
              .learners(num_learners=0)
              .rl_module(model_config={"model": str(model)})
              .multi_agent(scripted_agents={} if args.train_against == "self" else {"o": args.train_against})
              .preset("grpo")
              .training(env_groups=args.env_groups, group_size=args.group_size, lr=args.lr, lr_warmup_steps=1,
                        minibatch_size=args.env_groups * args.group_size, entropy_coeff=0.0,
                        old_logprobs="engine", max_turns=GAME_AGENT.max_turns,
                        max_response_tokens=GAME_AGENT.max_response_tokens, max_model_len=GAME_AGENT.max_model_len,
                        enable_think=GAME_AGENT.enable_think,
                        val_env_groups=1, engine=args.engine)
              .debugging(seed=seed))
    start = time.perf_counter()
    algo = config.build_algo()
    curve = []
    try:
        for _ in range(args.iterations):
            r = algo.train()["env_runners"]
            curve.append({k: r.get(k) for k in ("x/success_rate", "o/success_rate", "x/action_valid_rate",
                                                "o/action_valid_rate")})
            print(f"[tictactoe] seed {seed} iter {len(curve)}: " + ", ".join(
                f"{k} {v:.0%}" for k, v in curve[-1].items() if v is not None), flush=True)
        train_seconds = time.perf_counter() - start
        with tempfile.TemporaryDirectory(dir=ROOT / ".cache") as tmp:
            model_dir = export_checkpoint(algo.save_to_path(str(Path(tmp) / "ckpt")), str(Path(tmp) / "hf"))
            after = evaluate(model_dir, args)
    finally:
        algo.stop()
    lift = after["win_rate"] - before["win_rate"]
    se = math.hypot(after["win_rate_se"], before["win_rate_se"])
    print(f"[tictactoe] seed {seed}: win rate {before['win_rate']:.1%} -> {after['win_rate']:.1%} "
          f"(lift {100 * lift:+.1f} +- {100 * se:.1f} points), valid moves {after['valid_move_rate']:.1%}", flush=True)
    return {"seed": seed, "train": curve, "before": before, "after": after, "lift_points": 100 * lift,
            "lift_se_points": 100 * se, "train_seconds": train_seconds, "seconds": time.perf_counter() - start}


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = record["runs"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    b = record["before"]
    ax.axhline(100 * b["win_rate"], color="grey", ls="--", label=f"warm start {100 * b['win_rate']:.1f}%")
    xs = [r["seed"] for r in runs]
    ax.errorbar(xs, [100 * r["after"]["win_rate"] for r in runs],
                yerr=[100 * r["after"]["win_rate_se"] for r in runs], fmt="o", capsize=4,
                label=f"after RL (vs {record['args']['train_against']})")
    ax.set_xticks(xs, [f"seed {s}" for s in xs])
    ax.set_ylabel(f"x win rate vs {record['args']['reference']} (%)")
    ax.set_title(f"tic-tac-toe, held-out openings: lift {record['mean_lift_points']:+.1f} "
                 f"+- {record['std_lift_points']:.1f} pts", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--engine", default="hf", choices=["hf", "vllm", "auto"])
    p.add_argument("--reference", default="random", choices=["random", "noisy", "minimax"])
    p.add_argument("--train-against", default="random", choices=["self", "random", "noisy", "minimax"],
                   help="o during RL: the model itself (self-play, both sides train) or a fixed opponent (x trains)")
    p.add_argument("--eval-games", type=int, default=200)
    p.add_argument("--eval-temperature", type=float, default=0.5)
    p.add_argument("--demo-games", type=int, default=640)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--noise", type=float, default=0.5)
    p.add_argument("--name", default="learning_tictactoe", help="file stem under benchmarks/results")
    p.add_argument("--warm-only", action="store_true", help="warm-start and measure before RL, then stop")
    args = p.parse_args(argv)

    import torch

    from ragen_rllib import init_ray
    from ragen_rllib.precision import cpu_info

    started = time.perf_counter()
    torch.set_num_threads(os.cpu_count() or 1)
    model = warm_model(args)
    before = evaluate(model, args)
    print(f"[tictactoe] warm start: x vs {args.reference} on held-out openings {before['win_rate']:.1%} "
          f"+- {before['win_rate_se']:.1%} (valid moves {before['valid_move_rate']:.1%}, {before['seconds']:.0f} s)",
          flush=True)
    if args.warm_only:
        return
    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False, include_dashboard=False)
    runs = [run(model, seed, before, args) for seed in args.seeds]
    lifts = [r["lift_points"] for r in runs]
    record = {
        "what": "x's win rate against a fixed reference opponent on held-out 2-move openings (validation split), "
                "before and after RL (o: --train-against; self = self-play) from the same warm start",
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix().split(str(ROOT) + "/")[-1], *sys.argv[1:]]),
        "cpu": cpu_info(), "cores": os.cpu_count(), "model": str(model.relative_to(ROOT)),
        "warm_start": json.loads((model / "warm_start.json").read_text()), "args": vars(args), "before": before,
        "runs": runs, "mean_lift_points": statistics.fmean(lifts),
        "std_lift_points": statistics.stdev(lifts) if len(lifts) > 1 else 0.0,
        "seconds": time.perf_counter() - started}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.name}.json").write_text(json.dumps(record, indent=2))
    plot(record, OUT / f"{args.name}.png")
    ses = ", ".join(f"{r['lift_se_points']:.1f}" for r in runs)
    print(f"lift {record['mean_lift_points']:+.1f} +- {record['std_lift_points']:.1f} points over {len(lifts)} seeds "
          f"({', '.join(f'{x:+.1f}' for x in lifts)}); per-run SE {ses}; saved {OUT / (args.name + '.json')}")


if __name__ == "__main__":
    main()
