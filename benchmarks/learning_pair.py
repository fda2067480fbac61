"""Learning record of an asymmetric, cooperative pair: RL raises the joint success of a Countdown solver and its
verifier, each its own RL module (its own weights, engine and learner update), over 3 seeds.

What it measures: the model (``--model``) is warm-started once on noisy-oracle games of ``SolverVerifierEnv`` in
which it plays both roles: half the solver's proposals are the env's random move (a random expression of the
numbers), the verifier always gives the oracle's verdict. So it learns both answer formats with room left to learn
(the warm verifier's judgement of a correct and a wrong proposal is probed and recorded): ``smollm2``
(SmolLM2-135M-Instruct, offline; ``models.smollm2_demo.RECIPES["solver_verifier"]``, cached under .cache/demo/) or
``small`` (the small tiny model built from scratch, cached under .cache/bench/). Then for each seed: RLlib training
with ``agent_to_module={"solver": "solver", "verifier": "verifier"}`` (two RL modules, both starting from the warm
start; each module's GRPO groups hold its own agent's trajectories; one HF engine per module), and the pair's joint
success (an accepted correct expression; the solver's and the verifier's success are the same event) before and
after on ``--eval-games`` games at RAGEN's validation temperature 0.5, each role played by its own module's
exported weights (``ragen_rllib.evaluation.evaluate.evaluate_multi_agent_run``, as ``ragen-rllib eval``). SmolLM2's RL
settings are those of ``configs/runs/solver_verifier_smollm2_cpu.yaml`` (Dr. GRPO, lr 2e-5 with warm-up and cosine
decay, a rollout filter with a 0.1 floor). The evaluation games use env seeds from 500000 on; the instance space (two
numbers of 1-9, targets 1-20) is small, so evaluation problems also occur in training: this record is about the
pair's cooperation, not about generalisation to unseen problems.
Reported: before, after, lift and the binomial standard error per seed (lift SE: both rates' SEs in quadrature),
mean +- std of the lift across seeds, per-role valid-answer rates and update diagnostics, the CPU and the times.

The same for the FrozenLake guide and walker (``--pair guided_lake``: ``GuidedLakeEnv``, the warm start
``RECIPES["guided_lake"]``: 45% of both roles' moves random; the joint success is reaching the goal). No verifier
probe there. Its record (benchmarks/results/learning_guided_lake_smollm2.json; run settings as in
configs/runs/guided_lake_smollm2_cpu.yaml):
  .venv/bin/python benchmarks/learning_pair.py --pair guided_lake --model smollm2 --engine vllm --iterations 10 \
      --eval-games 128

Run:  .venv/bin/python benchmarks/learning_pair.py [--pair solver_verifier|guided_lake] [--model smollm2]
          [--engine hf|vllm] [--seeds 0 1 2] [--iterations 12]
Writes benchmarks/results/<--name>.json and .png (default name: learning_pair_<model> for the solver and verifier,
learning_<pair>_<model> otherwise).
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
from multi_agent_records import (  # noqa: E402
    SMOLLM2_TRAINING,
    command_line,
    learner_stats,
    merge_records,
    plot_lift,
    resumed,
    run_seeds,
)

OUT = Path(__file__).parent / "results"
#: --pair -> its env and roles (each role its own RL module; the warm start is models.smollm2_demo.RECIPES[pair])
PAIRS = {"solver_verifier": ("ragen_rllib.envs.multi_agent.solver_verifier:SolverVerifierEnv", ("solver", "verifier")),
         "guided_lake": ("ragen_rllib.envs.multi_agent.guided_lake:GuidedLakeEnv", ("guide", "walker"))}
PAIR = "solver_verifier"  # the pair of the record so far (set by main from --pair)
ENV, ROLES = PAIRS[PAIR]
EVAL_SEED = 500_000
#: per --model: RL settings beside the shared ones in config() (SmolLM2: configs/runs/solver_verifier_smollm2_cpu.yaml)
MODELS = {
    "small": {"lr": 2e-4, "runner_cpus": 1, "training": {}},
    "smollm2": {"lr": 2e-5, "runner_cpus": 2, "training": SMOLLM2_TRAINING},
}


def recipe():
    """The pair's env settings and agent settings (shared by both models' warm starts, RL and evaluation)."""
    from ragen_rllib.recipes.smollm2_demo import RECIPES

    return RECIPES[PAIR]


def warm_model(args) -> Path:
    """The model warm-started on noisy-oracle pair games, both roles (built once, cached)."""
    if args.model == "smollm2":
        from ragen_rllib.recipes.smollm2_demo import smollm2_model

        return smollm2_model(ROOT / ".cache", args.pair, log=lambda line: print(line, flush=True))
    from ragen_rllib.agent.config import AgentConfig
    from ragen_rllib.models.tiny import build_model
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    r = recipe()
    pair = "pair" if args.pair == "solver_verifier" else args.pair
    name = f"small-{pair}-{args.demo_games}x{args.epochs}ep-noise{r.noise:g}{r.variant()}"
    path = ROOT / ".cache" / "bench" / name
    if not (path / REPORT_FILE).exists():
        print(f"[pair] warm-starting the small model into {path} (once)", flush=True)
        build_model("small", path, seed=0)
        cfg = WarmStartConfig(envs=(ENV,), env_configs={ENV: r.env_config}, episodes_per_env=args.demo_games,
                              epochs=args.epochs, noise=r.noise, agent_noise=r.agent_noise, sides=r.sides,
                              opponent=r.opponent, warmup_steps=r.warmup_steps, batching=r.batching,
                              agent=AgentConfig.from_dict(r.agent), eval_episodes=32, eval_env_config=r.env_config,
                              eval_temperature=0.5)
        print(warm_start(path, cfg).summary(), flush=True)
    return path


def config(model: Path, seed: int, args):
    from ragen_rllib import RagenConfig

    settings = MODELS[args.model]
    return (RagenConfig()
            .environment(ENV, env_config=recipe().env_config)
            .env_runners(num_env_runners=1, num_cpus_per_env_runner=settings["runner_cpus"])
            .learners(num_learners=0)
            .rl_module(model_config={"model": str(model)})
            .multi_agent(agent_to_module={role: role for role in ROLES})
            .preset("grpo")
            .training(env_groups=args.env_groups, group_size=args.group_size, lr=args.lr, lr_warmup_steps=1,
                      lr_decay_steps=args.iterations, minibatch_size=args.env_groups * args.group_size,
                      entropy_coeff=0.0, old_logprobs="engine", val_env_groups=1, val_seed=EVAL_SEED,
                      engine=args.engine, engine_kwargs={"kv_cache_gib": 1} if args.engine == "vllm" else {},
                      **recipe().agent)
            .training(**settings["training"])
            .rl_module(algorithm_config_overrides_per_module={"verifier": {"lr": args.verifier_lr}}
                       if args.verifier_lr else {})
            .debugging(seed=seed))


def evaluate(model: str | Path, cfg, args) -> dict:
    """Joint success and each role's valid-answer rate over ``--eval-games`` games (``model``: a directory both
    roles play, or a checkpoint: each role its own module)."""
    from ragen_rllib.evaluation.evaluate import eval_envs, evaluate_multi_agent_run

    start = time.perf_counter()
    report = evaluate_multi_agent_run(model, cfg, eval_envs(cfg), episodes=args.eval_games, samples=1,
                                      engine=args.engine)
    tag = eval_envs(cfg)[0].tag
    joint = report[f"{tag}/{ROLES[0]}"]["success"]
    return {"joint_success": joint, "joint_success_se": math.sqrt(joint * (1 - joint) / args.eval_games),
            f"{ROLES[1]}_success": report[f"{tag}/{ROLES[1]}"]["success"], "games": args.eval_games,
            **{f"{role}_valid_action_rate": report[f"{tag}/{role}"]["valid_action_rate"] for role in ROLES},
            "report": report, "seconds": time.perf_counter() - start}


def verifier_probe(model: str | Path, problems: int = 64) -> dict:
    """How the verifier in ``model`` (a directory) judges a correct and a wrong proposal to the same problems (the
    oracle's expression; a random wrong expression of the numbers), each in round 1 of an eval-seed game: the mean
    probability of ``accept`` (over the two verdicts, each scored as its whole response) for each, and how often it
    prefers accepting the correct one to accepting the wrong one."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.config import AgentConfig
    from ragen_rllib.agent.multi_agent import MultiAgentEpisode
    from ragen_rllib.agent.prompts import assistant_text, generation_prefill
    from ragen_rllib.envs.multi_agent.solver_verifier import SolverVerifierEnv
    from ragen_rllib.models.demonstrations import response_ids

    cfg = AgentConfig.from_dict(recipe().agent)
    chat = ChatFormat(AutoTokenizer.from_pretrained(model), prefill=generation_prefill(cfg))
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    env, rng = SolverVerifierEnv(**recipe().env_config), np.random.default_rng(0)
    verdicts = [response_ids(chat, assistant_text("", v, cfg)) for v in ("accept", "reject")]

    def p_accept(seed: int, proposal: str) -> float:
        ep = MultiAgentEpisode(env, {role: chat for role in ROLES}, cfg, seed=seed)
        ep.prompt()
        ep.step(response_ids(chat, assistant_text("", proposal, cfg)))
        prompt = ep.prompt()
        scores = []
        for ids in verdicts:
            with torch.no_grad():
                logits = lm(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
            scores.append(torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None]).sum().item())
        return 1.0 / (1.0 + math.exp(scores[1] - scores[0]))

    right, wrong = [], []
    for i in range(problems):
        env.reset(seed=EVAL_SEED + i)
        bad = next(a for a in (env.random_action("solver", rng) for _ in range(100)) if not env.correct(a))
        right.append(p_accept(EVAL_SEED + i, env.oracle_action("solver")))
        wrong.append(p_accept(EVAL_SEED + i, bad))
    return {"problems": problems, "p_accept_correct": float(np.mean(right)), "p_accept_wrong": float(np.mean(wrong)),
            "prefers_correct": float(np.mean([r > w for r, w in zip(right, wrong)]))}


def run(model: Path, seed: int, before: dict, args) -> dict:
    cfg = config(model, seed, args)
    start = time.perf_counter()
    algo = cfg.build_algo()
    curve = []
    try:
        for _ in range(args.iterations):
            result = algo.train()
            r = result["env_runners"]
            keys = (f"{ROLES[0]}/success_rate", *(f"{role}/action_valid_rate" for role in ROLES),
                    f"{ROLES[0]}/turns_mean")
            curve.append({**learner_stats(result), **{k: r.get(k) for k in keys},
                          "seconds": result.get("time_this_iter_s")})
            print(f"[pair] seed {seed} iter {len(curve)}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in curve[-1].items() if v is not None), flush=True)
        train_seconds = time.perf_counter() - start
        tmp = tempfile.TemporaryDirectory(dir=ROOT / ".cache")
        checkpoint = algo.save_to_path(str(Path(tmp.name) / "ckpt"))
    finally:
        algo.stop()
    with tmp:
        after = evaluate(checkpoint, cfg, args)
        from ragen_rllib.evaluation.evaluate import export_checkpoint

        if "verifier" in ROLES:
            after["verifier_probe"] = verifier_probe(export_checkpoint(checkpoint, Path(tmp.name) / "verifier",
                                                                       "verifier"))
    lift = after["joint_success"] - before["joint_success"]
    se = math.hypot(after["joint_success_se"], before["joint_success_se"])
    print(f"[pair] seed {seed}: joint success {before['joint_success']:.1%} -> {after['joint_success']:.1%} "
          f"(lift {100 * lift:+.1f} +- {100 * se:.1f} points)"
          + (f"; verifier {after['verifier_probe']}" if "verifier_probe" in after else ""), flush=True)
    return {"seed": seed, "train": curve, "after": after, "lift_points": 100 * lift, "lift_se_points": 100 * se,
            "train_seconds": train_seconds, "seconds": time.perf_counter() - start}


def plot(record: dict, path: Path) -> None:
    plot_lift(record, path, "joint_success", "joint success (%)", f"{ROLES[0]} + {ROLES[1]} (two RL modules)",
              f"after {record['args']['iterations']} RL iterations")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pair", default="solver_verifier", choices=sorted(PAIRS), help="the env and its two roles")
    p.add_argument("--model", default="smollm2", choices=sorted(MODELS), help="the model warm-started and trained")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"],
                   help="rollout and evaluation engine (one per role; the solver/verifier records used hf)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--env-groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=None, help="default: per --model (MODELS)")
    p.add_argument("--verifier-lr", type=float, default=None,
                   help="the verifier module's own peak lr (default: --lr); with --lr, a binary verdict's small "
                        "gradient gets AdamW's full-size steps: at 2e-5 the verifier accepted every proposal by "
                        "iteration 3")
    p.add_argument("--eval-games", type=int, default=256)
    p.add_argument("--demo-games", type=int, default=1024, help="--model small: demonstration games")
    p.add_argument("--epochs", type=int, default=2, help="--model small: SFT epochs")
    p.add_argument("--name", default=None, help="file stem under benchmarks/results (default: learning_pair_<model>)")
    p.add_argument("--warm-only", action="store_true", help="warm-start and measure before RL, then stop")
    p.add_argument("--resume", action="store_true",
                   help="add --seeds to the record --name already holds (the same settings, else an error; its "
                        "warm-start evaluation is reused). One process per seed: the driver's memory grows from "
                        "one seed's run to the next (a 3-seed SmolLM2 guided-lake run fell under 2.5 GiB free in "
                        "its second seed)")
    p.add_argument("--merge-from", default=None, metavar="NAME",
                   help="add the seeds of the record NAME (the same settings, run in its own process with its own "
                        "--name) to the record --name, then stop")
    args = p.parse_args(argv)
    args.lr = MODELS[args.model]["lr"] if args.lr is None else args.lr
    args.name = args.name or (f"learning_pair_{args.model}" if args.pair == "solver_verifier"
                               else f"learning_{args.pair}_{args.model}")
    global PAIR, ENV, ROLES  # the pair, its env and roles, read by the functions above
    PAIR = args.pair
    ENV, ROLES = PAIRS[PAIR]
    if args.verifier_lr is not None and "verifier" not in ROLES:
        p.error(f"--verifier-lr: the {args.pair} pair has no verifier (roles {list(ROLES)})")
    if args.merge_from:
        record = merge_records(OUT / f"{args.name}.json", OUT / f"{args.merge_from}.json", plot)
        print(f"[pair] {args.name}: seeds {[r['seed'] for r in record['runs']]}, lift "
              f"{record['mean_lift_points']:+.1f} +- {record['std_lift_points']:.1f} points")
        return

    import torch

    from ragen_rllib import init_ray
    from ragen_rllib.core.precision import cpu_info

    started = time.perf_counter()
    torch.set_num_threads(os.cpu_count() or 1)
    prior = resumed(OUT / f"{args.name}.json", vars(args)) if args.resume else None
    done = {r["seed"] for r in prior["runs"]} if prior else set()
    if done & set(args.seeds):
        p.error(f"--seeds: {args.name}.json already holds seeds {sorted(done & set(args.seeds))}")
    model = warm_model(args)
    before = prior["before"] if prior else evaluate(model, config(model, 0, args), args)
    if "verifier" in ROLES and not prior:
        before["verifier_probe"] = verifier_probe(model)
        print(f"[pair] warm verifier: {before['verifier_probe']}", flush=True)
    print(f"[pair] warm start: joint success {before['joint_success']:.1%} +- {before['joint_success_se']:.1%} "
          f"(valid: {ROLES[0]} {before[f'{ROLES[0]}_valid_action_rate']:.1%}, {ROLES[1]} "
          f"{before[f'{ROLES[1]}_valid_action_rate']:.1%}; {before['seconds']:.0f} s)", flush=True)
    if args.warm_only:
        return
    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False, include_dashboard=False)
    header = {
        "what": f"joint success of a {ROLES[0]} and {ROLES[1]} ({ENV}; two RL modules) before and after RL, from the "
                "same warm start; evaluation at temperature 0.5 on env seeds 500000+",
        "command": command_line(ROOT),
        "cpu": cpu_info(), "cores": os.cpu_count(), "model": str(model.relative_to(ROOT)),
        "env_config": recipe().env_config, "agent": recipe().agent,
        "warm_start": json.loads((model / "warm_start.json").read_text()), "args": vars(args),
        "before": before}
    if prior and prior["cpu"] != header["cpu"]:
        p.error(f"--resume: {args.name}.json ran on {prior['cpu']}, this machine is {header['cpu']}; one record, "
                "one CPU (give a new --name)")
    if prior:  # the first command stays the record's command; each resume is listed after it
        header.update(command=prior["command"], resumed_by=[*prior.get("resumed_by", []), header["command"]],
                      args={**vars(args), "seeds": [*(r["seed"] for r in prior["runs"]), *args.seeds]})
    run_seeds(args.seeds, lambda seed: run(model, seed, before, args), header, OUT, args.name, plot, started,
              prior_runs=prior["runs"] if prior else None)


if __name__ == "__main__":
    main()
