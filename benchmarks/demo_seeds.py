"""Seed study of the FrozenLake demo: the same demo run with sampling seeds 0, 1, 2, one after another.

Run:  .venv/bin/python benchmarks/demo_seeds.py [--seeds 0 1 2] [-- extra demo flags, e.g. --iterations 10]

Each seed runs ``examples/train_frozenlake.py --seed S`` in its own process (its own Ray instance), from the same
warm start (built once by the first run and cached). Writes benchmarks/results/demo_seeds.json (``runs``: seed,
before, after, lift_points, iterations, seconds, curve; ``summary``: median/min/max lift; ``cpu``: model and bf16
units) and benchmarks/results/demo_seeds.png (all validation curves).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
DEMO = ROOT / "examples" / "train_frozenlake.py"


def run_seed(seed: int, out: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, str(DEMO), "--seed", str(seed), "--out", str(out), *extra]
    print(f"[seeds] {' '.join(cmd)}", flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True)
    record = json.loads((out / "result.json").read_text())
    return {"seed": seed, "before": record["success_before"], "after": record["success_after"],
            "lift_points": record["lift_points"], "iterations": record["iterations"],
            "seconds": record["train_seconds"], "validation_seconds": record["validation_seconds"],
            "wall_seconds": time.perf_counter() - start,
            "curve": {"validation": record["history"]["eval"], "train_success": record["history"]["train_success"],
                      "train_valid": record["history"]["train_valid"], "grad_norm": record["history"]["grad_norm"]},
            "model": record["model"], "cpu": record["cpu"], "args": record["args"],
            "validation_se_points": record["validation_se_points"]}


def summarize(runs: list[dict]) -> dict:
    lifts = [r["lift_points"] for r in runs]
    return {"median_lift": statistics.median(lifts), "min_lift": min(lifts), "max_lift": max(lifts),
            "mean_lift": statistics.fmean(lifts), "std_lift": statistics.stdev(lifts) if len(lifts) > 1 else 0.0,
            "runs_with_lift_ge_20": sum(lift >= 20 for lift in lifts),
            "runs_below_their_start": sum(r["after"] < r["before"] for r in runs),
            "max_train_seconds": max(r["seconds"] for r in runs)}


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        points = r["curve"]["validation"]
        line, = ax.plot([p["iteration"] for p in points], [100 * p["success_rate"] for p in points], "o-",
                        label=f"seed {r['seed']}: {100 * r['before']:.1f} -> {100 * r['after']:.1f}% "
                              f"({r['lift_points']:+.1f})")
        ax.plot(range(1, len(r["curve"]["train_success"]) + 1), [100 * x for x in r["curve"]["train_success"]],
                ":", color=line.get_color(), alpha=0.6)
    se = runs[0]["validation_se_points"]
    ax.set_xlabel("training iteration (8 groups x 8 trajectories each)")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"FrozenLake-4x4 demo, {len(runs)} seeds (validation o-, +-{se:.1f} pts SE; training :)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default=str(ROOT / "runs" / "demo_seeds"), help="per-seed demo outputs")
    p.add_argument("--name", default="demo_seeds", help="file stem of the JSON and PNG")
    p.add_argument("--results", default=str(OUT), help="folder of the JSON and PNG")
    p.add_argument("demo_args", nargs=argparse.REMAINDER, help="after --: flags passed to every demo run")
    args = p.parse_args()
    extra = [a for a in args.demo_args if a != "--"]
    runs = [run_seed(seed, Path(args.out) / f"seed{seed}", extra) for seed in args.seeds]
    summary = summarize(runs)
    record = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "cpu": runs[0]["cpu"],
              "settings": runs[0]["args"], "model": runs[0]["model"], "summary": summary, "runs": runs}
    warm = Path(runs[0]["model"]) / "warm_start.json"
    if warm.exists():
        record["warm_start"] = json.loads(warm.read_text())
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{args.name}.json").write_text(json.dumps(record, indent=2))
    plot(runs, results / f"{args.name}.png")
    for r in runs:
        print(f"seed {r['seed']}: {100 * r['before']:.1f}% -> {100 * r['after']:.1f}% ({r['lift_points']:+.1f} points) "
              f"in {r['iterations']} iterations, {r['seconds']:.0f} s of training")
    print(f"lift median {summary['median_lift']:+.1f}, min {summary['min_lift']:+.1f}, max {summary['max_lift']:+.1f} "
          f"points; CPU {record['cpu']['model']} (bf16 units: {record['cpu']['bf16_units']})")
    print(f"saved {results / (args.name + '.json')} and {results / (args.name + '.png')}")


if __name__ == "__main__":
    main()
