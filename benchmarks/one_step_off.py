"""Synchronous vs one-step-off rollout on the FrozenLake demo's settings, side by side in one run.

Run:  .venv/bin/python benchmarks/one_step_off.py [--iterations 8] [--seed 0] [-- extra demo flags]

Each variant runs ``examples/train_frozenlake.py`` (the demo: its warm-started model, 8 x 8 trajectories per
iteration, 400-token turns, one runner + a local learner) in its own process for ``--iterations`` iterations,
with a small validation (``--val-groups``) that is not timed. Variants: ``sync`` (the learner on every core
while the runner waits), ``one_step_off`` (runner and learner on disjoint cores: the learner takes all but the
runner's one) and ``one_step_off_shared`` (the learner keeps every core, with passive OpenMP waits). The first
iteration of each is a warm-up (one-step-off samples two batches in it) and is left out. Reported per variant:
seconds per iteration, iterations per hour, mean phase times (sample, learn, weight sync, the learner's wait for
the next batch) and the idle shares of the learner and the engine; the ratios of iterations per hour to the
synchronous run, and the ratio a cluster would see
(runner and learner on separate hardware: an iteration takes max(sample, learn + sync) instead of their sum),
computed on paper from the synchronous run's phase times. Writes benchmarks/results/one_step_off.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "train_frozenlake.py"
OUT = Path(__file__).parent / "results" / "one_step_off.json"
CORES = os.cpu_count() or 1
#: variant -> (rollout mode, learner threads, extra environment)
VARIANTS = {
    "sync": ("sync", CORES, {}),
    # the runner's vLLM thread and the learner's threads on disjoint cores
    "one_step_off": ("one_step_off", max(CORES - 1, 1), {}),
    # the learner keeps every core and shares one with the runner; passive OpenMP waits stop its idle threads
    # from spinning on the runner's core
    "one_step_off_shared": ("one_step_off", CORES, {"OMP_WAIT_POLICY": "PASSIVE"}),
}


def run_mode(variant: str, args, extra: list[str]) -> dict:
    mode, threads, env = VARIANTS[variant]
    out = ROOT / "runs" / "one_step_off" / variant
    cmd = [sys.executable, str(DEMO), "--rollout-mode", mode, "--learner-threads", str(threads),
           "--iterations", str(args.iterations), "--eval-every", str(10 ** 6), "--val-groups", str(args.val_groups),
           "--seed", str(args.seed), "--lr-decay", "constant", "--out", str(out), *extra]
    print(f"[one_step_off] {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, **env})
    record = json.loads((out / "result.json").read_text())
    phases = record["history"]["phases"][1:]  # iteration 1: warm-up
    seconds = [p["iteration_s"] for p in phases]
    mean = {key: statistics.fmean(p[key] for p in phases) for key in ("sample_s", "learn_s", "weight_sync_s",
                                                                      "wait_s", "iteration_s")}
    busy_learner = mean["learn_s"] + mean["weight_sync_s"]
    return {"variant": variant, "mode": mode, "environment": env, "seconds_per_iteration": statistics.fmean(seconds),
            "seconds_per_iteration_std": statistics.stdev(seconds) if len(seconds) > 1 else 0.0,
            "iterations_per_hour": 3600 / statistics.fmean(seconds), "phases_mean": mean,
            "learner_idle_share": max(0.0, 1 - busy_learner / mean["iteration_s"]),
            "engine_idle_share": max(0.0, 1 - mean["sample_s"] / mean["iteration_s"]),
            "success_before": record["success_before"], "success_after": record["success_after"],
            "learner_threads": record["args"]["learner_threads"], "per_iteration": phases, "cpu": record["cpu"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--val-groups", type=int, default=16, help="validation maps (not timed)")
    p.add_argument("demo_args", nargs=argparse.REMAINDER, help="after --: flags passed to both demo runs")
    args = p.parse_args()
    extra = [a for a in args.demo_args if a != "--"]
    runs = {variant: run_mode(variant, args, extra) for variant in VARIANTS}
    sync = runs["sync"]["phases_mean"]
    ratios = {v: runs[v]["iterations_per_hour"] / runs["sync"]["iterations_per_hour"] for v in VARIANTS if v != "sync"}
    cluster = (sync["sample_s"] + sync["learn_s"] + sync["weight_sync_s"]) / max(
        sync["sample_s"], sync["learn_s"] + sync["weight_sync_s"])
    record = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "cpu": runs["sync"]["cpu"],
              "ratio_iterations_per_hour": max(ratios.values()), "ratios_iterations_per_hour": ratios,
              "cluster_expected_ratio": cluster, "runs": runs}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2))
    for variant, r in runs.items():
        m = r["phases_mean"]
        print(f"{variant:19s}: {r['seconds_per_iteration']:.1f} +- {r['seconds_per_iteration_std']:.1f} s/iteration "
              f"({r['iterations_per_hour']:.0f}/h; learner threads {r['learner_threads']}); sample {m['sample_s']:.1f} "
              f"s, learn {m['learn_s']:.1f} s, sync {m['weight_sync_s']:.2f} s, wait {m['wait_s']:.1f} s; idle: "
              f"learner {r['learner_idle_share']:.0%}, engine {r['engine_idle_share']:.0%}")
    print(f"iterations per hour / sync: {', '.join(f'{v} {x:.2f}x' for v, x in ratios.items())}; on separate "
          f"hardware (from the sync phase times): {cluster:.2f}x; CPU {record['cpu']['model']} "
          f"(bf16 units: {record['cpu']['bf16_units']})")
    print(f"saved {OUT}")


if __name__ == "__main__":
    main()
