"""What one iteration of the Sokoban recipe costs on this CPU kind, and what each speed change buys: SmolLM2-135M-
Instruct, ``configs/runs/sokoban_ragen_smollm2_cpu.yaml`` (StarPO-PPO, 8 groups x 16 = 128 trajectories of at most
5 turns, the top-p 0.9 filter), from its Sokoban warm start.

Run:  .venv/bin/python benchmarks/iteration_sokoban.py [--variants recipe one_step_off lora] [--iters 3]
      [--model DIR] [--merge]
Each variant is the recipe plus a few overrides (VARIANTS), run in its own process (its own Ray session) for
``--iters`` iterations; the first includes warm-up (compilation, caches), the figure is the mean of the later
ones. Per iteration: wall seconds, the phases (sample, learn, weight sync), trajectories kept by the filter,
training success and valid actions; per variant the peak resident memory of the driver (with the learner) and of
the env runner. The record is per CPU kind, so both kinds keep their figures side by side:
benchmarks/results/iteration_sokoban_<kind>.json (kind: ``bf16`` on CPUs with AVX512-BF16/AMX, else ``fp32``).
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
CONFIG = ROOT / "configs" / "runs" / "sokoban_ragen_smollm2_cpu.yaml"
OUT = Path(__file__).parent / "results"
LORA = "{r: 64, lora_alpha: 64, target_modules: all-linear}"  # RAGEN's LoRA shape (rank 64, alpha 64, all-linear)
NO_VALIDATION = ["training.val_before_train=false", "evaluation.evaluation_interval=null"]  # training steps only
OFF = "rl_module.model_config.gradient_checkpointing=false"
#: each variant = the recipe as shipped (gradient checkpointing on) + these overrides; one_step_off, lora and
#: micro_batch_4 are measured without checkpointing, as alternatives to it
VARIANTS = {
    "recipe": [],
    "no_checkpointing": [OFF],
    "one_step_off": [OFF, "training.rollout_mode=one_step_off"],
    "lora": [OFF, f"rl_module.model_config.lora={LORA}", "training.lr=5.0e-5"],
    "limited_context": ["training.context_mode=limited_multi_turn", "training.context_window=2"],
    "micro_batch_4": [OFF, "training.micro_batch_size=4"],
}


def run_variant(model: str, name: str, iters: int) -> dict:
    import ray

    from ragen_rllib import RagenConfig, init_ray

    config = RagenConfig.from_yaml(CONFIG, [f"rl_module.model_config.model={model}", *NO_VALIDATION, *VARIANTS[name]])
    init_ray(**{**config.run_settings.get("ray_init", {}), "_temp_dir": str(ROOT / ".cache" / "ray_bench"),
                "log_to_driver": False})
    start = time.perf_counter()
    algo = config.build_algo()
    build_s = time.perf_counter() - start
    rows = []
    for i in range(iters):
        start = time.perf_counter()
        result = algo.train()
        seconds = time.perf_counter() - start
        t, r = result["timers"], result["env_runners"]
        row = {"iteration": i + 1, "seconds": seconds, "sample_s": t.get("ragen_sample_s"),
               "learn_s": t.get("ragen_learn_s"), "weight_sync_s": t.get("ragen_weight_sync_s"),
               "filter_kept_ratio": r.get("filter_kept_ratio"), "success_rate": r.get("success_rate"),
               "action_valid_rate": r.get("action_valid_rate"), "response_tokens_mean": r.get("response_tokens_mean"),
               "generated_tokens_per_s": r.get("generated_tokens_per_s")}
        rows.append(row)
        print(f"{name} iteration {i + 1}: {seconds:.1f} s (sample {row['sample_s']:.1f}, learn {row['learn_s']:.1f});"
              f" kept {row['filter_kept_ratio']}, success {row['success_rate']}, valid {row['action_valid_rate']}",
              file=sys.stderr, flush=True)
    runner = algo.env_runner_group.foreach_env_runner(peak_rss_gib, local_env_runner=False)[0]
    algo.stop()
    ray.shutdown()
    return {"build_s": build_s, "iterations": rows, "driver_peak_rss_gib": peak_rss_gib(),
            "env_runner_peak_rss_gib": runner}


def peak_rss_gib(_runner=None) -> float:
    """Peak resident set (VmHWM) of this process, GiB: the driver holds the local learner."""
    with open("/proc/self/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) / 1024 ** 2 for line in f if line.startswith("VmHWM:"))


def summarize(side: dict) -> dict:
    timed = side["iterations"][1:] or side["iterations"]  # the first includes warm-up
    mean = {k: statistics.fmean(r[k] or 0.0 for r in timed) for k in ("seconds", "sample_s", "learn_s",
                                                                      "weight_sync_s", "filter_kept_ratio")}
    return {"seconds_per_iteration": mean.pop("seconds"), "means": mean,
            "timed_iterations": [r["iteration"] for r in timed]}


def main() -> None:
    from ragen_rllib.core.precision import cpu_info

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="warm-started model dir (default: the SmolLM2 Sokoban demo's)")
    p.add_argument("--iters", type=int, default=3, help="iterations per variant (the mean skips the first)")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["recipe", "no_checkpointing"])
    p.add_argument("--merge", action="store_true", help="keep the record's other variants (each keeps its command)")
    p.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.model is None:
        from ragen_rllib.recipes.smollm2_demo import smollm2_model

        args.model = str(smollm2_model(ROOT / ".cache", "sokoban", log=print))
    if args.child:
        print("RESULT " + json.dumps(run_variant(args.model, args.child, args.iters)), flush=True)
        return
    cpu = cpu_info()
    command = " ".join(["python", "benchmarks/iteration_sokoban.py", *sys.argv[1:]])
    sides = {}
    for name in args.variants:
        proc = subprocess.run([sys.executable, __file__, "--child", name, "--model", args.model, "--iters",
                               str(args.iters)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"{name} failed ({proc.returncode})")
        side = json.loads(lines[-1][len("RESULT "):])
        sides[name] = {"overrides": VARIANTS[name], "command": command, **side, "summary": summarize(side)}
    out = OUT / f"iteration_sokoban_{'bf16' if cpu['bf16_units'] else 'fp32'}.json"
    record = {"cpu": cpu, "cores": os.cpu_count(), "config": str(CONFIG.relative_to(ROOT)), "model": args.model,
              "variants": sides}
    if args.merge and out.exists():
        record["variants"] = {**json.loads(out.read_text())["variants"], **sides}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    base = record["variants"].get("recipe", {}).get("summary", {}).get("seconds_per_iteration")
    for name, side in record["variants"].items():
        s = side["summary"]
        speed = f" ({base / s['seconds_per_iteration']:.2f}x the recipe)" if base else ""
        print(f"{name:16s}: {s['seconds_per_iteration']:.1f} s/iteration{speed}; sample {s['means']['sample_s']:.1f}, "
              f"learn {s['means']['learn_s']:.1f}, kept {s['means']['filter_kept_ratio']:.2f}")
    print(f"CPU {cpu['model']} ({record['cores']} cores); saved {out}")


if __name__ == "__main__":
    main()
