"""Peak memory of a SmolLM2 run with default settings: every process under 12 GiB on a 24 GiB machine.

Run:  .venv/bin/python benchmarks/memory_smollm2.py [--model M] [--set key=value ...] [--groups 8] [--group-size 8]

A ``RagenConfig`` given only the model (``gguf:smollm2-135m-instruct``, the pretrained instruct model, zero-shot: its
rambling responses make the longest rows) and the env (RAGEN's SimpleSokoban), plus RAGEN's 8 groups x 8 shape
(``--groups``/``--group-size``; everything else at its default: 5 turns, 400 tokens per turn with thinking on,
full fine-tuning, 1 vLLM runner, a local learner in this process, ``max_tokens_per_micro_batch`` and
``learner_memory_gib`` automatic). Trains ``--iterations`` iterations, then reports each Ray process's peak
resident memory (VmHWM: this driver with its learner, the env runner, Ray's own processes), the learner's token
budget and micro-batch count, the batch's row lengths and the phase times. Writes
benchmarks/results/memory_smollm2.json.

``--set key=value`` changes a ``training()`` setting (recorded). Zero-shot with every default, sampling is the slow
part: 64 trajectories thinking up to 400 tokens a turn, and rows of up to ~3,000 tokens that the engine's default
1 GiB KV cache (~23,000 fp32 tokens of SmolLM2) cannot hold at once, so vLLM preempts and recomputes sequences:
the rollout had not finished after 29 minutes on 2 cores. ``--model <warm-started dir> --set enable_think=false
--set max_response_tokens=48`` samples in seconds; the learner's settings stay the defaults, and its peak is set by
its token budget (rows are packed up to it whatever their length).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "memory_smollm2.json"
ROOT = Path(__file__).resolve().parents[1]
SIMPLE_SOKOBAN = {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300}
LIMIT_GIB = 12.0


def peak_gib(pid: int) -> float | None:
    """VmHWM (peak resident set) of a process in GiB, None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None


def ray_processes() -> dict[int, str]:
    """PID -> command name of every process on this machine that belongs to Ray (raylet, GCS, workers)."""
    out = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "ray" in cmd and ("raylet" in cmd or "gcs_server" in cmd or "default_worker" in cmd):
                out[int(proc.name)] = cmd.split()[0].rsplit("/", 1)[-1] + (" (worker)" if "default_worker" in cmd
                                                                            else "")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="gguf:smollm2-135m-instruct")
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a training() setting")
    args = p.parse_args()
    import yaml

    overrides = {k: yaml.safe_load(v) for k, _, v in (item.partition("=") for item in args.set)}

    import ray
    from ray.rllib.core import DEFAULT_MODULE_ID

    from ragen_rllib import RagenConfig, init_ray
    from ragen_rllib.core import keys as K
    from ragen_rllib.core.precision import cpu_info

    init_ray(num_cpus=4, _temp_dir=str(ROOT / ".cache" / "ray"), log_to_driver=False,
             include_dashboard=False)  # its ~1.2 GB of processes do not fit beside SmolLM2's learner in 24 GiB
    config = (RagenConfig().environment("ragen/Sokoban-v0", env_config=SIMPLE_SOKOBAN)
              .rl_module(model_config={"model": args.model})
              .training(env_groups=args.groups, group_size=args.group_size, **overrides))
    start = time.perf_counter()
    algo = config.build_algo()
    build_s = time.perf_counter() - start
    runner_pids = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    iterations = []
    for i in range(args.iterations):
        start = time.perf_counter()
        result = algo.train()
        learner, runners, timers = result["learners"][DEFAULT_MODULE_ID], result["env_runners"], result["timers"]
        iterations.append({
            "seconds": time.perf_counter() - start, "sample_s": timers["ragen_sample_s"],
            "learn_s": timers["ragen_learn_s"], "weight_sync_s": timers["ragen_weight_sync_s"],
            "max_tokens_per_micro_batch": learner[K.MICRO_BATCH_TOKENS], "micro_batches": learner[K.MICRO_BATCHES],
            "response_tokens_mean": runners[K.RESPONSE_TOKENS_MEAN], "turns_mean": runners[K.TURNS_MEAN],
            "action_valid_rate": runners[K.ACTION_VALID_RATE], "padding_fraction": learner[K.PADDING_FRACTION]})
        print(f"iteration {i + 1}: {iterations[-1]}", flush=True)
    rows = algo.env_runner_group.foreach_env_runner(
        lambda r: [len(s.input_ids) for t in r.sample(step=99) for s in t.samples], local_env_runner=False)[0]
    processes = {"driver (learner)": peak_gib(os.getpid())}
    for n, pid in enumerate(runner_pids):
        processes[f"env runner {n}"] = peak_gib(pid)
    for pid, name in ray_processes().items():
        if pid not in runner_pids and pid != os.getpid():
            processes[f"{name} {pid}"] = peak_gib(pid)
    algo.stop()
    ray.shutdown()
    processes = {k: v for k, v in processes.items() if v is not None}
    worst = max(processes.values())
    record = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "cpu": cpu_info(),
        "settings": {"model": args.model, "env": "ragen/Sokoban-v0", "env_config": SIMPLE_SOKOBAN,
                     "env_groups": args.groups, "group_size": args.group_size, "overrides": overrides,
                     "all else": "defaults",
                     "max_turns": config.max_turns, "max_response_tokens": config.max_response_tokens,
                     "enable_think": config.enable_think, "micro_batch_size": config.micro_batch_size,
                     "minibatch_size": config.minibatch_size},
        "machine_memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "build_s": build_s, "iterations": iterations,
        "row_tokens": {"max": max(rows), "mean": sum(rows) / len(rows), "rows": len(rows)},
        "peak_rss_gib": processes, "worst_process_gib": worst, "limit_gib": LIMIT_GIB, "met": worst < LIMIT_GIB}
    for name, gib in sorted(processes.items(), key=lambda kv: -kv[1])[:6]:
        print(f"peak RSS {name:28s} {gib:6.2f} GiB")
    print(f"worst process {worst:.2f} GiB (target < {LIMIT_GIB} GiB): {'met' if record['met'] else 'NOT met'}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2))
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
