"""RAGEN's slip-rate finding with a real model, through Ray Tune: validation success after RL falls as FrozenLake's
slip rate rises, and no trial loses the answer format.

What it runs: ``ragen-rllib sweep configs/sweeps/frozenlake_slip_rate_smollm2.yaml`` (SmolLM2-135M-Instruct from its
FrozenLake warm start; slip {0, 20, 50, 100}% x sampling seeds {0, 1, 2}, one Tune trial each, one at a time; each
trial validates on fixed maps before RL and after it). A stopped sweep continues with ``--resume`` (Tune's restore:
finished trials are kept). Then it writes the record: one entry per trial (``slip``, ``seed``, ``success_before``,
``success_after``, ``valid_before``, ``valid_after``, ``wall_s``), per slip the mean and std over seeds, the checks
(the mean after RL falls at each step of the grid; valid actions >= 95% at every validation), the CPU and the command.

Run:  .venv/bin/python benchmarks/slip_study.py [--model DIR] [--resume] [--set KEY=VALUE ...]
      (DIR: default the SmolLM2 FrozenLake warm start, built once under .cache/demo/)
Writes benchmarks/results/slip_study_smollm2.json and .png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "configs" / "sweeps" / "frozenlake_slip_rate_smollm2.yaml"
OUT = Path(__file__).parent / "results"
SLIP_KEY, SEED_KEY = "environment.env_config.success_rate", "debugging.seed"
MIN_VALID = 0.95  # "no trial loses the format": valid actions at every validation


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="warm-started model dir (default: the SmolLM2 demo's)")
    p.add_argument("--resume", action="store_true", help="continue the stopped sweep in --sweep-dir")
    p.add_argument("--sweep-dir", default=str(ROOT / "runs" / "slip_study_smollm2"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--name", default="slip_study_smollm2")
    return p.parse_args(argv)


def record_of(trials: list[dict], command: str, cpu: dict) -> dict:
    """The study's record from the sweep's rows (``ragen_rllib.sweep.run.summarize``)."""
    entries = sorted(({"slip": round(1 - float(t[SLIP_KEY]), 6), "seed": int(t[SEED_KEY]),
                       "success_before": t["validation_success_before"], "success_after": t["validation_success"],
                       "valid_before": t["validation_valid_actions_before"],
                       "valid_after": t["validation_valid_actions"], "wall_s": t["wall_s"],
                       "iterations": t["iterations"], "error": t["error"]} for t in trials),
                     key=lambda e: (e["slip"], e["seed"]))
    done = [e for e in entries if e["error"] is None and e["success_after"] is not None]
    by_slip: dict[float, dict] = {}
    for slip in sorted({e["slip"] for e in done}):
        rows = [e for e in done if e["slip"] == slip]
        after, before = [e["success_after"] for e in rows], [e["success_before"] for e in rows]
        by_slip[slip] = {"seeds": len(rows), "after_mean": statistics.fmean(after),
                         "after_std": statistics.stdev(after) if len(after) > 1 else None,
                         "before_mean": statistics.fmean(before)}
    means = [by_slip[s]["after_mean"] for s in sorted(by_slip)]
    valid = [v for e in done for v in (e["valid_before"], e["valid_after"]) if v is not None]
    return {"command": command, "cpu": cpu, "trials": entries, "by_slip": {str(k): v for k, v in by_slip.items()},
            "checks": {"success_falls_at_each_step": all(a > b for a, b in zip(means, means[1:])),
                       "min_valid": min(valid) if valid else None,
                       "format_kept": bool(valid) and min(valid) >= MIN_VALID,
                       "trials_done": len(done), "trials": len(entries)}}


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for e in record["trials"]:
        if e["success_after"] is not None:
            ax.plot([100 * e["slip"]] * 2, [100 * e["success_before"], 100 * e["success_after"]], ":", color="grey")
            ax.scatter(100 * e["slip"], 100 * e["success_after"], color="C0", s=12)
    slips = sorted(float(s) for s in record["by_slip"])
    for key, label, style in (("before_mean", "before RL (mean over seeds)", "s--"),
                              ("after_mean", "after RL (mean over seeds)", "o-")):
        ax.plot([100 * s for s in slips], [100 * record["by_slip"][str(s)][key] for s in slips], style, label=label)
    ax.set_xlabel("slip rate (%)")
    ax.set_ylabel("validation success (%)")
    ax.set_title(f"SmolLM2-135M on FrozenLake 4x4 by slip rate ({record['cpu']['model']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    from ragen_rllib.core.precision import cpu_info

    args = parse_args(argv)
    sweep_dir = Path(args.sweep_dir).resolve()
    if args.resume:
        cmd = ["-m", "ragen_rllib.cli", "sweep", "--resume", str(sweep_dir)]
    else:
        model = args.model
        if model is None:
            from ragen_rllib.recipes.smollm2_demo import smollm2_model

            model = str(smollm2_model(ROOT / ".cache", "frozenlake", log=print))
        cmd = ["-m", "ragen_rllib.cli", "sweep", str(SWEEP), f"rl_module.model_config.model={model}",
               f"run.out_dir={sweep_dir}", *args.overrides]
    print("running:", " ".join(cmd), flush=True)
    subprocess.run([sys.executable, *cmd], cwd=ROOT, check=True)
    trials = json.loads((sweep_dir / "sweep.json").read_text())["trials"]
    record = record_of(trials, "python benchmarks/slip_study.py " + " ".join(argv or sys.argv[1:]), cpu_info())
    OUT.mkdir(exist_ok=True)
    (OUT / f"{args.name}.json").write_text(json.dumps(record, indent=2))
    plot(record, OUT / f"{args.name}.png")
    print(json.dumps({"by_slip": record["by_slip"], "checks": record["checks"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
