"""RAGEN's main table, quick CPU variant: ppo, grpo, dapo, starpo_s and gigpo x SimpleSokoban, FrozenLake and
Bandit, 3 sampling seeds per cell, rendered by ``ragen-rllib report``.

Run:  .venv/bin/python benchmarks/main_table.py [--config configs/sweeps/main_table_quick.yaml] [KEY=VALUE ...]

Builds one warm start of the small tiny model on the three envs (oracle demonstrations with random actions mixed in;
built once, cached under .cache/bench/), then runs the sweep ``ragen-rllib sweep CONFIG
rl_module.model_config.model=DIR`` (every trial from those weights, one at a time) and ``ragen-rllib report`` on it
(algorithm rows x env columns: mean +- std over the seeds of validation success after training and of its lift
over the same maps before training). Writes benchmarks/results/main_table_quick.json (the sweep's trial rows, the
commands, the warm start's report, the CPU), .md (the report's table) and .png (its figure).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results"
#: the warm start: env tag -> demonstrations' env_config (the sweep's variant.env settings)
WARM_ENVS = {"SimpleSokoban": {"dim_room": (6, 6), "num_boxes": 1},
             "FrozenLake": {"size": 4, "p": 0.9, "success_rate": 0.8, "is_slippery": True},
             "Bandit": {"split": "train"}}
WARM = {"episodes_per_env": 480, "epochs": 2, "noise": 0.3}


def warm_model() -> tuple[Path, dict]:
    from ragen_rllib.models.warm_start import REPORT_FILE

    sys.path.insert(0, str(Path(__file__).parent))
    from learning import build_warm_model

    path = build_warm_model(WARM_ENVS, WARM, "main-table", eval_env="FrozenLake")
    return path, json.loads((path / REPORT_FILE).read_text())


def cli(*args: str) -> list[str]:
    command = [sys.executable, "-m", "ragen_rllib.cli", *args]
    print(f"[main-table] {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=ROOT, check=True)
    return command


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/sweeps/main_table_quick.yaml")
    p.add_argument("--out", default="runs/main_table_quick", help="the sweep's run.out_dir")
    p.add_argument("--name", default="main_table_quick", help="file stem under benchmarks/results/")
    p.add_argument("--results", default=str(OUT))
    p.add_argument("overrides", nargs="*", help="KEY=VALUE config overrides passed to the sweep")
    args = p.parse_args()
    from ragen_rllib.core.precision import cpu_info

    model, warm_report = warm_model()
    out = Path(args.out).resolve()
    start = time.perf_counter()
    sweep = cli("sweep", args.config, f"rl_module.model_config.model={model}", f"run.out_dir={out}",
                *args.overrides)
    seconds = time.perf_counter() - start
    report = cli("report", str(out), "--rows", "variant.algo", "--cols", "variant.env")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    trials = json.loads((out / "sweep.json").read_text())["trials"]
    record = {"config": args.config, "overrides": args.overrides, "commands": [" ".join(sweep), " ".join(report)],
              "sweep_seconds": seconds, "warm_start": {"settings": WARM, "envs": WARM_ENVS, "report": warm_report},
              "cpu": cpu_info(), "trials": trials}
    (results / f"{args.name}.json").write_text(json.dumps(record, indent=1, default=str))
    shutil.copy(out / "report.md", results / f"{args.name}.md")
    shutil.copy(out / "report.png", results / f"{args.name}.png")
    print(f"[main-table] {len(trials)} trials in {seconds / 60:.1f} min on {record['cpu']['model']}; wrote "
          f"{results / args.name}.json, .md and .png", flush=True)


if __name__ == "__main__":
    main()
