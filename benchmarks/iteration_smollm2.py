"""One training iteration with a real model: SmolLM2-135M on SimpleSokoban, full fine-tuning vs LoRA.

Run:  .venv/bin/python benchmarks/iteration_smollm2.py --model runs/smollm2-sokoban-nothink [--iters 3]
      [--variants full lora] (add ``baseline`` for the earlier 227 s settings: 1-thread fp32 engine,
      micro_batch_size 1 + gradient checkpointing, 128 tokens, think on; ~8 min)
Shows what one ``algo.train()`` of ragen-rllib costs on this CPU with a pretrained 135M-parameter Llama: 1 vLLM
env runner (``num_cpus_per_env_runner=2`` engine threads, bf16 engine weights), a local learner (2 torch threads,
fp32 master weights, bf16 autocast where the CPU has bf16 units), SimpleSokoban 6x6 with 1 box, GRPO, 4 groups
x 4 trajectories, at most 5 turns, no-think answers of at most 48 tokens, ``old_logprobs="engine"``, one
minibatch of 16 trajectories per iteration. Variants: full fine-tuning (lr 1e-5) and LoRA r=16 on every linear
layer (lr 1e-4). Each variant runs in its own process (its own Ray session, so peak RSS is its own), ``--iters``
iterations: the first includes warm-up (compilation, caches), the reported figure is the mean of the later ones.
Per iteration: wall seconds and the phases (``timers``: sample, learn, weight sync); per variant: peak RSS
(VmHWM) of the driver (with its learner) and of the env runner's process. Target: <= 60 s per iteration.
The model should be the warm-started SmolLM2 (SFT on oracle demos, no-think): the zero-shot model never writes
a valid answer. Writes benchmarks/results/iteration_smollm2.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "iteration_smollm2.json"
ENV = "ragen/Sokoban-v0"
ENV_CONFIG = {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300}
LORA = {"r": 16, "lora_alpha": 32,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
#: settings per variant: the shared shape is in settings(); these are what differ
VARIANTS = {
    "full": {"lora": False, "lr": 1e-5, "engine_threads": 2, "engine_dtype": "bfloat16", "micro_batch_size": 4,
             "gradient_checkpointing": False, "max_response_tokens": 48, "enable_think": False},
    "lora": {"lora": True, "lr": 1e-4, "engine_threads": 2, "engine_dtype": "bfloat16", "micro_batch_size": 4,
             "gradient_checkpointing": False, "max_response_tokens": 48, "enable_think": False},
    "baseline": {"lora": False, "lr": 1e-5, "engine_threads": 1, "engine_dtype": "float32", "micro_batch_size": 1,
                 "gradient_checkpointing": True, "max_response_tokens": 128, "enable_think": True},
}
SHAPE = {"env": ENV, "env_config": ENV_CONFIG, "adv_estimator": "grpo", "env_groups": 4, "group_size": 4,
         "max_turns": 5, "minibatch_size": 16, "old_logprobs": "engine", "num_env_runners": 1, "num_learners": 0,
         "learner_torch_threads": 2, "ray_num_cpus": 4, "seed": 0}


def vm_hwm_gib(pid: int | None = None) -> float:
    """Peak resident set (VmHWM) of a process, GiB."""
    with open(f"/proc/{pid or 'self'}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024 ** 2
    return float("nan")


def runner_memory(_runner=None) -> dict:
    """Runs inside the env runner: its PID, its peak RSS and its child processes' peak RSS (if any)."""
    import psutil

    children = psutil.Process().children(recursive=True)
    return {"pid": os.getpid(), "peak_rss_gib": vm_hwm_gib(),
            "children_peak_rss_gib": {c.pid: vm_hwm_gib(c.pid) for c in children}}


def build_config(model: str, v: dict):
    from ragen_rllib import RagenConfig

    mc = {"model": model, **({"lora": LORA} if v["lora"] else {}),
          **({"gradient_checkpointing": True} if v["gradient_checkpointing"] else {})}
    return (RagenConfig().environment(ENV, env_config=ENV_CONFIG)
            .env_runners(num_env_runners=1, num_cpus_per_env_runner=v["engine_threads"])
            .learners(num_learners=0)
            .rl_module(model_config=mc)
            .training(adv_estimator="grpo", env_groups=SHAPE["env_groups"], group_size=SHAPE["group_size"],
                      max_turns=SHAPE["max_turns"], enable_think=v["enable_think"],
                      max_response_tokens=v["max_response_tokens"], minibatch_size=SHAPE["minibatch_size"],
                      lr=v["lr"], old_logprobs="engine", micro_batch_size=v["micro_batch_size"],
                      engine_kwargs={"dtype": v["engine_dtype"]})
            .debugging(seed=SHAPE["seed"]))


def run_variant(model: str, name: str, iters: int) -> dict:
    import ray
    import torch

    from ragen_rllib import init_ray

    torch.set_num_threads(SHAPE["learner_torch_threads"])
    init_ray(num_cpus=SHAPE["ray_num_cpus"], _temp_dir=str(ROOT / ".cache" / "ray_bench"), log_to_driver=False,
             include_dashboard=False)  # its ~1.2 GB of processes do not fit beside SmolLM2's learner in 24 GiB
    start = time.perf_counter()
    algo = build_config(model, VARIANTS[name]).build_algo()
    build_s = time.perf_counter() - start
    rows = []
    for i in range(iters):
        start = time.perf_counter()
        result = algo.train()
        seconds = time.perf_counter() - start
        t, r = result["timers"], result["env_runners"]
        row = {"iteration": i + 1, "seconds": seconds, "sample_s": t.get("ragen_sample_s"),
               "learn_s": t.get("ragen_learn_s"), "weight_sync_s": t.get("ragen_weight_sync_s"),
               "success_rate": r.get("success_rate"), "action_valid_rate": r.get("action_valid_rate"),
               "response_tokens_mean": r.get("response_tokens_mean"),
               "generated_tokens_per_s": r.get("generated_tokens_per_s")}
        rows.append(row)
        print(f"{name} iteration {i + 1}: {seconds:.1f} s (sample {row['sample_s']:.1f}, learn {row['learn_s']:.1f}, "
              f"sync {row['weight_sync_s']:.2f}); success {row['success_rate']}, valid "
              f"{row['action_valid_rate']}, {row['response_tokens_mean']} tokens/turn", file=sys.stderr, flush=True)
    runner = algo.env_runner_group.foreach_env_runner(runner_memory, local_env_runner=False)[0]
    algo.stop()
    ray.shutdown()
    return {"build_s": build_s, "iterations": rows, "driver_peak_rss_gib": vm_hwm_gib(), "env_runner": runner}


def summarize(side: dict) -> dict:
    rows = side["iterations"]
    timed = rows[1:] or rows  # the first includes warm-up
    mean = {key: statistics.fmean(r[key] for r in timed) for key in ("seconds", "sample_s", "learn_s",
                                                                      "weight_sync_s")}
    return {"seconds_per_iteration": mean["seconds"], "phases_s": {k: mean[k] for k in mean if k != "seconds"},
            "timed_iterations": [r["iteration"] for r in timed], "meets_target_60s": mean["seconds"] <= 60.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(ROOT / "runs" / "smollm2-sokoban-nothink"),
                   help="HF dir or registry name (default: the warm-started SmolLM2, no-think)")
    p.add_argument("--iters", type=int, default=3, help="iterations per variant (the mean skips the first)")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["full", "lora"])
    p.add_argument("--out", default=str(OUT), help="JSON record path")
    p.add_argument("--merge", action="store_true",
                   help="keep the other variants of an existing record at --out (each keeps its own command)")
    p.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print("RESULT " + json.dumps(run_variant(args.model, args.child, args.iters)), flush=True)
        return
    from ragen_rllib.core.precision import cpu_info

    sides = {}
    for name in args.variants:
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--model", args.model, "--iters",
                               str(args.iters)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"{name} failed ({proc.returncode})")
        sides[name] = json.loads(lines[-1][len("RESULT "):])
        sides[name]["summary"] = summarize(sides[name])
    command = " ".join([Path(sys.executable).name, *sys.argv])
    record = {"command": command, "cpu": cpu_info(), "cores": os.cpu_count(), "model": args.model, "shape": SHAPE,
              "variants": {name: {"settings": VARIANTS[name], "command": command, **side}
                           for name, side in sides.items()}}
    out = Path(args.out)
    if args.merge and out.exists():
        old = json.loads(out.read_text())
        record["variants"] = {**{k: {"command": old["command"], **v} for k, v in old["variants"].items()},
                              **record["variants"]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    for name, side in sides.items():
        s = side["summary"]
        each = ", ".join(f"{r['seconds']:.1f}" for r in side["iterations"])
        print(f"{name:8s}: {s['seconds_per_iteration']:.1f} s/iteration (iterations {s['timed_iterations']}; each: "
              f"{each}) sample {s['phases_s']['sample_s']:.1f}, learn {s['phases_s']['learn_s']:.1f}, sync "
              f"{s['phases_s']['weight_sync_s']:.2f}; peak RSS driver {side['driver_peak_rss_gib']:.2f} GiB, runner "
              f"{side['env_runner']['peak_rss_gib']:.2f} GiB; target <= 60 s: "
              f"{'met' if s['meets_target_60s'] else 'missed'}")
    print(f"CPU {record['cpu']['model']} ({record['cores']} cores); saved {out}")


if __name__ == "__main__":
    main()
