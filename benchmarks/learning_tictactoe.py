"""Learning record of a multi-agent env: RL against a fixed pool (or self-play) raises tic-tac-toe's win rate
against a fixed reference opponent on held-out starts, over 3 seeds.

What it measures: the model (``--model``) is warm-started once on noisy-minimax games from the TRAIN split of the
2-move openings (``TicTacToeEnv(openings="train")``) against a random opponent, each move random with probability
``--noise``, so it learns the answer format with room left to learn: ``small`` (the small tiny model, built from
scratch, cached under .cache/bench/; playing x and o in turn) or ``smollm2`` (SmolLM2-135M-Instruct, offline,
``models.smollm2_demo.RECIPES["tictactoe"]``, cached under .cache/demo/; playing x; RL as the SmolLM2 run configs:
Dr. GRPO, lr 2e-5 with warm-up and cosine decay, a rollout filter with a 0.1 floor, a bf16 vLLM engine).
Then for each seed: RLlib training on the train split, ``x`` on the run's module
and ``o`` either a fixed opponent (``--train-against random``, the default: ``scripted_agents``) or the model
itself (``--train-against self``: self-play, both sides train; GRPO per (group, agent)), and the win rate of ``x``
against each reference opponent (``--reference``, the first one's is the record's lift) on the VALIDATION split
(openings never trained on) before and after, ``--eval-games`` games each at RAGEN's validation temperature 0.5
(``--eval-temperature``). Against ``random``, from these held-out openings (4000 games each, env seeds 500000+), a
random-legal x wins 60.4%, noisy minimax 87.2%, minimax 98.4%; against ``minimax`` x wins only from the openings
whose two random moves left it a forced win, and otherwise draws at best.
Reported: before, after, lift and the binomial standard error per seed (lift SE: both rates' SEs in quadrature),
mean +- std of the lift across seeds, the CPU and the times.

Run:  .venv/bin/python benchmarks/learning_tictactoe.py [--model smollm2] [--seeds 0 1 2] [--iterations 16]
Writes benchmarks/results/<--name>.json and .png (default name: learning_tictactoe, or learning_tictactoe_smollm2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # the records' shared helpers, run as a script or imported
from multi_agent_records import SMOLLM2_TRAINING, command_line, learner_stats, plot_lift, run_seeds  # noqa: E402

OUT = Path(__file__).parent / "results"
ENV = "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv"
TRAIN = {"opening_moves": 2, "openings": "train"}
HELD_OUT = {"opening_moves": 2, "openings": "validation"}
EVAL_SEED = 500_000  # env seeds of the evaluation games (the split, not the seed, keeps them held out)


#: per --model: RL settings beside the shared ones in run() (SmolLM2: those of configs/runs/*_smollm2_cpu.yaml)
MODELS = {
    "small": {"lr": 2e-4, "engine": "hf", "training": {}, "engine_kwargs": {}, "runner_cpus": 1},
    "smollm2": {"lr": 2e-5, "engine": "vllm", "runner_cpus": 2,
                "engine_kwargs": {"kv_cache_gib": 2},  # dtype auto: see precision.resolve_engine_dtype
                "training": SMOLLM2_TRAINING},
}


def warm_model(args) -> Path:
    """The model warm-started on noisy minimax games (built once, cached)."""
    if args.model == "smollm2":
        from ragen_rllib.recipes.smollm2_demo import smollm2_model

        return smollm2_model(ROOT / ".cache", "tictactoe", log=lambda line: print(line, flush=True))
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
    from ragen_rllib.models.serving import engine_and_chat
    from ragen_rllib.models.versus import GAME_AGENT, play_against

    start = time.perf_counter()
    engine, chat = engine_and_chat(str(model), GAME_AGENT, args.engine, **MODELS[args.model]["engine_kwargs"])
    try:  # the first reference's figures at the top level (the record's lift), every reference's by name
        by_reference = {ref: play_against(engine, HELD_OUT, ref, args.eval_games, seed=EVAL_SEED, agent="x",
                                          temperature=args.eval_temperature, chat=chat, sampling_seed=seed)
                        for ref in args.reference}
    finally:
        engine.close()
    return {**by_reference[args.reference[0]], "by_reference": by_reference, "seconds": time.perf_counter() - start}


def run(model: Path, seed: int, before: dict, args) -> dict:
    from ragen_rllib import RagenConfig
    from ragen_rllib.evaluation.evaluate import export_checkpoint
    from ragen_rllib.models.versus import GAME_AGENT

    config = (RagenConfig()
              .environment(ENV, env_config=TRAIN)
              .env_runners(num_env_runners=1, num_cpus_per_env_runner=MODELS[args.model]["runner_cpus"])
              .learners(num_learners=0)
              .rl_module(model_config={"model": str(model)})
              .multi_agent(scripted_agents={} if args.train_against == "self" else {"o": args.train_against})
              .preset("grpo")
              .training(env_groups=args.env_groups, group_size=args.group_size, lr=args.lr, lr_warmup_steps=1,
                        lr_decay_steps=args.iterations, engine_kwargs=MODELS[args.model]["engine_kwargs"],
                        minibatch_size=args.minibatch_size or args.env_groups * args.group_size, entropy_coeff=0.0,
                        old_logprobs="engine", max_turns=GAME_AGENT.max_turns,
                        max_response_tokens=GAME_AGENT.max_response_tokens, max_model_len=GAME_AGENT.max_model_len,
                        enable_think=GAME_AGENT.enable_think,
                        val_env_groups=1, engine=args.engine)
              .training(**MODELS[args.model]["training"])
              .debugging(seed=seed))
    start = time.perf_counter()
    algo = config.build_algo()
    curve = []
    try:
        for _ in range(args.iterations):
            result = algo.train()
            r = result["env_runners"]
            keys = ("x/success_rate", "o/success_rate", "x/action_valid_rate", "o/action_valid_rate")
            curve.append({**learner_stats(result), **{k: r.get(k) for k in keys}})
            print(f"[tictactoe] seed {seed} iter {len(curve)}: " + ", ".join(
                f"{k} {v:.3g}" for k, v in curve[-1].items() if v is not None), flush=True)
        train_seconds = time.perf_counter() - start
        tmp = tempfile.TemporaryDirectory(dir=ROOT / ".cache")
        model_dir = export_checkpoint(algo.save_to_path(str(Path(tmp.name) / "ckpt")), str(Path(tmp.name) / "hf"))
    finally:
        algo.stop()  # before the evaluation: its engine does not sit beside the run's engine and learner
    with tmp:
        after = evaluate(model_dir, args, seed)
    lift = after["win_rate"] - before["win_rate"]
    se = math.hypot(after["win_rate_se"], before["win_rate_se"])
    for ref, r in after["by_reference"].items():
        b = before["by_reference"][ref]
        print(f"[tictactoe] seed {seed} vs {ref}: win rate {b['win_rate']:.1%} -> {r['win_rate']:.1%} (lift "
              f"{100 * (r['win_rate'] - b['win_rate']):+.1f} +- "
              f"{100 * math.hypot(r['win_rate_se'], b['win_rate_se']):.1f} points), draws {b['draw_rate']:.1%} -> "
              f"{r['draw_rate']:.1%}, valid moves {r['valid_move_rate']:.1%}", flush=True)
    return {"seed": seed, "train": curve, "before": before, "after": after, "lift_points": 100 * lift,
            "lift_se_points": 100 * se, "train_seconds": train_seconds, "seconds": time.perf_counter() - start}


def plot(record: dict, path: Path) -> None:
    plot_lift(record, path, "win_rate", f"x win rate vs {record['args']['reference'][0]} (%)",
              "tic-tac-toe, held-out openings", f"after RL (vs {record['args']['train_against']})")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="small", choices=sorted(MODELS), help="the model warm-started and trained")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--minibatch-size", type=int, default=None,
                   help="trajectories per optimizer step (default: all of an iteration's, one step)")
    p.add_argument("--lr", type=float, default=None, help="default: per --model (MODELS)")
    p.add_argument("--engine", default=None, choices=["hf", "vllm", "auto"], help="default: per --model (MODELS)")
    p.add_argument("--reference", nargs="+", default=["random"], choices=["random", "noisy", "minimax"],
                   help="the fixed reference opponents of the evaluation; the first one's win rate is the record's")
    p.add_argument("--train-against", default="random", choices=["self", "random", "noisy", "minimax"],
                   help="o during RL: the model itself (self-play, both sides train) or a fixed opponent (x trains)")
    p.add_argument("--eval-games", type=int, default=200)
    p.add_argument("--eval-temperature", type=float, default=0.5)
    p.add_argument("--demo-games", type=int, default=640)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--noise", type=float, default=0.5)
    p.add_argument("--name", default=None, help="file stem under benchmarks/results (default: learning_tictactoe, "
                   "with _<model> for a model other than small)")
    p.add_argument("--warm-only", action="store_true", help="warm-start and measure before RL, then stop")
    args = p.parse_args(argv)
    args.lr = MODELS[args.model]["lr"] if args.lr is None else args.lr
    args.engine = args.engine or MODELS[args.model]["engine"]
    args.name = args.name or ("learning_tictactoe" + ("" if args.model == "small" else f"_{args.model}"))

    import torch

    from ragen_rllib import init_ray
    from ragen_rllib.core.precision import cpu_info

    started = time.perf_counter()
    torch.set_num_threads(os.cpu_count() or 1)
    model = warm_model(args)
    before = evaluate(model, args)
    for ref, r in before["by_reference"].items():
        print(f"[tictactoe] warm start: x vs {ref} on held-out openings {r['win_rate']:.1%} +- {r['win_rate_se']:.1%} "
              f"(draws {r['draw_rate']:.1%}, valid moves {r['valid_move_rate']:.1%})", flush=True)
    if args.warm_only:
        return
    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False, include_dashboard=False)
    header = {
        "what": "x's win rate against a fixed reference opponent on held-out 2-move openings (validation split), "
                "before and after RL (o: --train-against; self = self-play) from the same warm start",
        "command": command_line(ROOT),
        "cpu": cpu_info(), "cores": os.cpu_count(), "model": str(model.relative_to(ROOT)),
        "warm_start": json.loads((model / "warm_start.json").read_text()), "args": vars(args), "before": before}
    run_seeds(args.seeds, lambda seed: run(model, seed, before, args), header, OUT, args.name, plot, started)


if __name__ == "__main__":
    main()
