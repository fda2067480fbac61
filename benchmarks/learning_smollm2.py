"""Learning benchmark with the real pretrained SmolLM2-135M-Instruct: validation success zero-shot, after the warm
start and after RL, on SimpleSokoban and FrozenLake-4x4, for 3 sampling seeds.

Run:  .venv/bin/python benchmarks/learning.py --model smollm2 [--envs sokoban frozenlake] [--seeds 0 1 2]
      [--iterations N] [--set KEY=VALUE ...] [--name learning_smollm2] [-- extra example flags]

Each (env, seed) is one run of the real-model example, ``examples/train_smollm2.py --env ENV --seed S``, in its own
process: the same cached warm start (built by the first run), the env's config file
(``configs/runs/<env>_smollm2_cpu.yaml``), validation on the same 128 fixed maps before and after RL; the first seed
of each env also validates the model zero-shot. Writes benchmarks/results/<name>.json after every run (per env and
seed: zero-shot, warm start, after RL, each with its binomial standard error, the lift, RL time, the per-iteration
diagnostics, the CPU model and the command; per env: mean +- std of the lift and how many seeds met the target)
and <name>.png. ``--append`` keeps the record's runs of the other envs, so the envs can run in separate parts
(``--envs frozenlake``, then ``--envs sokoban --append``); every part's command is kept.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
EXAMPLE = ROOT / "examples" / "train_smollm2.py"
#: lift over the warm start (points) every seed must reach
TARGETS = {"sokoban": 10.0, "frozenlake": 20.0, "searchqa": 10.0}


def run(env: str, seed: int, args) -> dict:
    out = Path(args.runs) / f"{env}_seed{seed}"
    cmd = [sys.executable, str(EXAMPLE), "--env", env, "--seed", str(seed), "--out", str(out)]
    cmd += ["--zero-shot"] if seed == args.seeds[0] and not args.no_zero_shot else []
    cmd += ["--iterations", str(args.iterations)] if args.iterations else []
    for item in args.overrides:
        cmd += ["--set", item]
    cmd += args.extra
    shown = " ".join(shlex.quote(c) for c in [".venv/bin/python", str(EXAMPLE.relative_to(ROOT)), *cmd[2:]])
    print(f"[learning] {shown}", flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True)
    record = json.loads((out / "result.json").read_text())
    record.update({"command": shown, "wall_seconds": time.perf_counter() - start})
    return record


def summarize(runs: list[dict]) -> list[dict]:
    cells = []
    for env in dict.fromkeys(r["env"] for r in runs):
        mine = [r for r in runs if r["env"] == env]
        lifts = [r["lift_points"] for r in mine]
        zero = next((r["zero_shot"] for r in mine if "zero_shot" in r), None)
        cells.append({
            "env": env, "seeds": [r["seed"] for r in mine], "lifts": lifts, "mean_lift": statistics.fmean(lifts),
            "std_lift": statistics.stdev(lifts) if len(lifts) > 1 else 0.0,
            "lift_se_points": [r["lift_se_points"] for r in mine],
            "zero_shot": zero and zero["success_rate"],
            "warm_start": [r["warm_start"]["success_rate"] for r in mine],
            "after_rl": [r["after_rl"]["success_rate"] for r in mine],
            "target_points": TARGETS[env], "seeds_meeting_target": sum(x >= TARGETS[env] for x in lifts),
            "max_rl_seconds": max(r["rl_seconds"] for r in mine)})
    return cells


def plot(runs: list[dict], path: Path) -> None:
    """Per env and seed: validation success zero-shot, after the warm start and after RL, +-1 standard error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r["env"] for r in runs))
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.8), squeeze=False)
    for ax, env in zip(axes[0], envs):
        mine = [r for r in runs if r["env"] == env]
        xs = list(range(len(mine)))
        for shift, key, label, color in ((-0.27, "zero_shot", "zero-shot", "tab:grey"),
                                         (0.0, "warm_start", "after the warm start", "tab:blue"),
                                         (0.27, "after_rl", "after RL", "tab:orange")):
            have = [(x, r[key]) for x, r in zip(xs, mine) if key in r]
            ax.bar([x + shift for x, _ in have], [100 * v["success_rate"] for _, v in have], 0.27,
                   yerr=[v["se_points"] for _, v in have], capsize=3, label=label, color=color)
        ax.set_xticks(xs, [f"seed {r['seed']}\n{r['lift_points']:+.1f} pts" for r in mine], fontsize=8)
        ax.set_ylabel(f"validation success (%), {mine[0]['validation_maps']} maps")
        ax.set_title(f"SmolLM2-135M-Instruct, {env} (target: +{TARGETS[env]:.0f} pts)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", nargs="+", default=["sokoban", "frozenlake"], choices=sorted(TARGETS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=None, help="default: the config file's")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config file override for every run (repeatable)")
    p.add_argument("--no-zero-shot", action="store_true", help="skip the zero-shot validation")
    p.add_argument("--name", default="learning_smollm2", help="file stem of the JSON and PNG")
    p.add_argument("--results", default=str(OUT), help="folder of the JSON and PNG")
    p.add_argument("--runs", default=None, help="per-run outputs (default: runs/<name>)")
    p.add_argument("--append", action="store_true",
                   help="keep the existing record's runs of the other envs (a benchmark run in parts)")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra  # flags for every example run, e.g. -- --model DIR
    args.runs = args.runs or str(ROOT / "runs" / args.name)
    out_dir = Path(args.results)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "benchmarks/learning.py", "--model", "smollm2",
                                                *argv])
    path = out_dir / f"{args.name}.json"
    kept: list[dict] = []
    if args.append and path.exists():
        old = json.loads(path.read_text())
        first = (old.get("commands") or [old.get("command")])[0]
        kept = [{"benchmark_command": first, **r} for r in old["runs"] if r["env"] not in args.envs]
    commands = sorted({r["benchmark_command"] for r in kept}) + [command]
    runs: list[dict] = []
    for env in args.envs:
        for seed in args.seeds:
            runs.append({**run(env, seed, args), "benchmark_command": command})
            every = kept + runs
            record = {"commands": commands, "cpu": runs[0]["cpu"], "complete": len(runs) == len(args.envs) *
                      len(args.seeds), "cells": summarize(every), "runs": every}
            path.write_text(json.dumps(record, indent=2, default=str))
            plot(every, out_dir / f"{args.name}.png")
    for c in summarize(kept + runs):
        print(f"{c['env']:10s} lift over the warm start {c['mean_lift']:+.1f} +- {c['std_lift']:.1f} points over "
              f"{len(c['seeds'])} seeds ({', '.join(f'{x:+.1f}' for x in c['lifts'])}); "
              f"{c['seeds_meeting_target']}/{len(c['seeds'])} at >= +{c['target_points']:.0f}")
    print(f"saved {out_dir / (args.name + '.json')} and {out_dir / (args.name + '.png')}")


if __name__ == "__main__":
    main()
