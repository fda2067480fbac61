"""RAGEN's rollout-filter finding on Sokoban with a real model: SmolLM2-135M-Instruct trained by StarPO-PPO (GAE with
a critic, groups of 16) with the top-p 0.9 filter and without it, validation success before and after RL on 128
fixed SimpleSokoban maps, and RAGEN-2's collapse diagnostics over training (in-group reward std, entropy,
reasoning MI, valid actions).

One (arm, seed) per process: ``ragen-rllib train configs/runs/sokoban_ragen_smollm2_cpu.yaml`` from the SmolLM2
Sokoban warm start (built once under .cache/demo/), the arm's overrides, the seed, the run in
``runs/sokoban_filter_smollm2/<arm>_seed<seed>``. A stopped run continues with the same command plus ``--resume``
(``ragen-rllib train --resume``: from its last checkpoint, every ``run.checkpoint_every`` iterations). After each
launch the run's entry is merged into the record (the other runs' entries are kept), so the arms and seeds can run
in separate processes and sessions.

Run:  .venv/bin/python benchmarks/sokoban_filter.py --arm filter --seed 0 [--resume] [--iterations N]
      [--model DIR] [--set KEY=VALUE ...]
      .venv/bin/python benchmarks/sokoban_filter.py --record-only   (rebuild the record from the run dirs)
Writes benchmarks/results/sokoban_filter_smollm2.json (one entry per run: ``arm``, ``seed``, ``lift_points``,
``lift_se_points``, ``before``, ``after``, ``iterations``, ``rl_seconds``, its curves and diagnostics, its
commands; the CPU model) and .png.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "runs" / "sokoban_ragen_smollm2_cpu.yaml"
OUT = Path(__file__).parent / "results"
RUNS = ROOT / "runs" / "sokoban_filter_smollm2"
#: the arms: overrides of the recipe (the filter arm is the recipe as shipped)
ARMS = {"filter": [], "no_filter": ["training.filter_strategy=null"]}
TARGET_POINTS = 10.0  # lift over the warm start every filter seed must reach
#: per-iteration curves: name -> (result section, key); "learners" is searched over its modules
CURVES = {"success_rate": ("env_runners", "success_rate"), "action_valid_rate": ("env_runners", "action_valid_rate"),
          "in_group_reward_std": ("env_runners", "in_group_reward_std_mean"),
          "filter_kept_ratio": ("env_runners", "filter_kept_ratio"), "pass_at_k": ("env_runners", "pass_at_k"),
          "reasoning_mi": ("env_runners", "reasoning_mi"), "response_tokens": ("env_runners", "response_tokens_mean"),
          "entropy": ("learners", "entropy"), "sample_s": ("timers", "ragen_sample_s"),
          "learn_s": ("timers", "ragen_learn_s"), "seconds": ("", "time_this_iter_s")}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arm", choices=sorted(ARMS))
    p.add_argument("--seed", type=int)
    p.add_argument("--resume", action="store_true", help="continue the stopped run of this arm and seed")
    p.add_argument("--iterations", type=int, default=None, help="training iterations (default: the config's)")
    p.add_argument("--model", default=None, help="warm-started model dir (default: the SmolLM2 Sokoban demo's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--runs", default=str(RUNS), help="folder of the run directories")
    p.add_argument("--name", default="sokoban_filter_smollm2", help="file stem of the JSON and PNG")
    p.add_argument("--record-only", action="store_true", help="only rebuild the record from the run directories")
    args = p.parse_args(argv)
    if not args.record_only and (args.arm is None or args.seed is None):
        p.error("--arm and --seed are required (or --record-only)")
    return args


def train_command(args, run_dir: Path) -> list[str]:
    """The ``ragen-rllib train`` arguments of this launch."""
    extra = [*args.overrides] + ([f"run.stop.training_iteration={args.iterations}",
                                  f"evaluation.evaluation_interval={args.iterations}"] if args.iterations else [])
    if args.resume:
        if not (run_dir / "config.yaml").is_file():
            raise SystemExit(f"--resume: {run_dir} holds no run (no config.yaml); start it without --resume")
        return ["train", "--resume", str(run_dir), *extra]
    if (run_dir / "config.yaml").is_file():
        raise SystemExit(f"{run_dir} already holds a run: continue it with --resume, or delete the directory")
    model = args.model
    if model is None:
        from ragen_rllib.recipes.smollm2_demo import smollm2_model

        model = str(smollm2_model(ROOT / ".cache", "sokoban", log=print))
    return ["train", str(CONFIG), *ARMS[args.arm], f"rl_module.model_config.model={model}",
            f"debugging.seed={args.seed}", f"run.out_dir={run_dir}", *extra]


def _get(result: dict, section: str, key: str) -> Any:
    if not section:
        return result.get(key)
    node = result.get(section) or {}
    if section == "learners":  # per module; the first that has it
        return next((m[key] for m in node.values() if isinstance(m, dict) and key in m), None)
    return node.get(key)


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def results_of(run_dir: Path) -> list[dict]:
    """Every iteration's Tune result of a run, one per iteration (a later launch's replaces an earlier one's)."""
    by_iter: dict[int, dict] = {}
    for path in sorted((run_dir / "trials").glob("*/result.json"), key=lambda p: p.stat().st_mtime):
        for line in path.read_text().splitlines():
            if line.strip():
                result = json.loads(line)
                by_iter[int(result["training_iteration"])] = result
    return [by_iter[i] for i in sorted(by_iter)]


def binomial_se_points(p: float, n: int) -> float:
    """Standard error of a success rate ``p`` over ``n`` episodes, in percentage points."""
    return 100.0 * math.sqrt(max(p * (1 - p), 0.0) / n)


def entry_of(run_dir: Path, arm: str, seed: int) -> dict | None:
    """The record's entry for one run (None if it has not finished an iteration)."""
    from ragen_rllib.algorithms.ragen.config.config_files import load_tree

    results = results_of(run_dir)
    if not results:
        return None
    tree = load_tree(run_dir / "config.yaml")
    maps = sum(int(t.get("groups", 1)) for t in tree["environment"]["val_env_tags"])
    planned = int(tree["run"]["stop"]["training_iteration"])
    first = results[0].get("evaluation_before_training", {}).get("env_runners", {})
    validations = [(r["training_iteration"], r["evaluation"]["env_runners"]) for r in results
                   if (r.get("evaluation") or {}).get("env_runners", {}).get("success_rate") is not None]
    before = first.get("success_rate")
    after = validations[-1][1]["success_rate"] if validations else None
    done = results[-1]["training_iteration"]
    entry = {"arm": arm, "seed": seed, "before": before, "after": after,
             "lift_points": None if before is None or after is None else 100.0 * (after - before),
             "lift_se_points": None if before is None or after is None else math.hypot(
                 binomial_se_points(before, maps), binomial_se_points(after, maps)),
             "iterations": done, "planned_iterations": planned, "complete": done >= planned,
             "after_iteration": validations[-1][0] if validations else None,
             "rl_seconds": sum(float(r.get("time_this_iter_s") or 0.0) for r in results),
             "validation_maps": maps, "valid_before": first.get("action_valid_rate"),
             "validation": [{"iteration": i, "success_rate": v["success_rate"],
                             "action_valid_rate": v.get("action_valid_rate")} for i, v in validations],
             "curves": {name: [_finite(_get(r, *where)) for r in results] for name, where in CURVES.items()},
             "run_dir": str(run_dir.relative_to(ROOT)) if run_dir.is_relative_to(ROOT) else str(run_dir)}
    return entry


def merge(path: Path, entry: dict, command: str, cpu: dict) -> dict:
    """The record at ``path`` with ``entry`` in place of its (arm, seed) entry; ``command`` kept per entry."""
    record = json.loads(path.read_text()) if path.exists() else {"entries": []}
    old = next((e for e in record["entries"] if (e["arm"], e["seed"]) == (entry["arm"], entry["seed"])), None)
    commands = (old or {}).get("commands", [])
    entry["commands"] = commands + ([command] if command and command not in commands else [])
    entries = [e for e in record["entries"] if (e["arm"], e["seed"]) != (entry["arm"], entry["seed"])] + [entry]
    record.update({"cpu": cpu, "config": str(CONFIG.relative_to(ROOT)), "target_points": TARGET_POINTS,
                   "entries": sorted(entries, key=lambda e: (e["arm"], e["seed"]))})
    record["summary"] = summary(record["entries"])
    return record


def summary(entries: list[dict]) -> dict:
    """Per arm: seeds done, lifts, their mean and std, seeds meeting the target."""
    out = {}
    for arm in sorted({e["arm"] for e in entries}):
        done = [e for e in entries if e["arm"] == arm and e["complete"] and e["lift_points"] is not None]
        lifts = [e["lift_points"] for e in done]
        mean = statistics.fmean(lifts) if lifts else None
        std = statistics.stdev(lifts) if len(lifts) > 1 else None
        out[arm] = {"seeds_complete": [e["seed"] for e in done], "lifts": lifts, "mean_lift": mean, "std_lift": std,
                    "seeds_meeting_target": sum(x >= TARGET_POINTS for x in lifts)}
    return out


def plot(record: dict, path: Path) -> None:
    """Per run: training success, in-group reward std, entropy, valid actions, and validation success."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("success_rate", "training success (%)", 100), ("in_group_reward_std", "in-group reward std", 1),
              ("entropy", "entropy (nats/token)", 1), ("action_valid_rate", "valid actions (%)", 100),
              ("reasoning_mi", "reasoning MI (nats)", 1), ("validation", "validation success (%)", 100)]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for ax, (name, label, scale) in zip(axes.flat, panels):
        for e in record["entries"]:
            style = "-" if e["arm"] == "filter" else "--"
            color = f"C{e['seed']}"
            if name == "validation":
                xs = [0] + [v["iteration"] for v in e["validation"]]
                ys = [e["before"]] + [v["success_rate"] for v in e["validation"]]
                ax.plot(xs, [scale * y for y in ys], style + "o", color=color, label=f"{e['arm']} seed {e['seed']}")
            else:
                pts = [(i + 1, v) for i, v in enumerate(e["curves"][name]) if v is not None]
                ax.plot([x for x, _ in pts], [scale * y for _, y in pts], style, color=color, lw=1)
        ax.set_xlabel("iteration")
        ax.set_ylabel(label)
    axes.flat[-1].legend(fontsize=7)
    fig.suptitle(f"SmolLM2-135M-Instruct, SimpleSokoban, StarPO-PPO with (solid) and without (dashed) the top-p 0.9 "
                 f"filter ({record['cpu']['model']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    from ragen_rllib.core.precision import cpu_info

    args = parse_args(argv)
    runs = Path(args.runs).resolve()
    todo = [(args.arm, args.seed)] if not args.record_only else [
        (d.name.rsplit("_seed", 1)[0], int(d.name.rsplit("_seed", 1)[1])) for d in sorted(runs.glob("*_seed*"))]
    command = ""
    if not args.record_only:
        run_dir = runs / f"{args.arm}_seed{args.seed}"
        cmd = train_command(args, run_dir)
        command = " ".join(shlex.quote(a) for a in ["python", "benchmarks/sokoban_filter.py",
                                                    *(argv if argv is not None else sys.argv[1:])])
        print("running: ragen-rllib " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        subprocess.run([sys.executable, "-m", "ragen_rllib.cli", *cmd], cwd=ROOT, check=True)
    path = OUT / f"{args.name}.json"
    OUT.mkdir(exist_ok=True)
    for arm, seed in todo:
        entry = entry_of(runs / f"{arm}_seed{seed}", arm, seed)
        if entry is None:
            print(f"{arm} seed {seed}: no finished iteration yet, nothing recorded")
            continue
        launch = f"python benchmarks/sokoban_filter.py --arm {arm} --seed {seed} (then --resume after each stop)"
        record = merge(path, entry, command if (arm, seed) == (args.arm, args.seed) else launch, cpu_info())
        path.write_text(json.dumps(record, indent=2))
        plot(record, OUT / f"{args.name}.png")
        print(f"{arm} seed {seed}: {entry['iterations']}/{entry['planned_iterations']} iterations, before "
              f"{entry['before']}, after {entry['after']}, lift {entry['lift_points']} +- {entry['lift_se_points']}; "
              f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
