"""One config and seed, four entry points: do they train alike? The Python API (``build_algo().train()``),
``ragen-rllib train``, a ``ragen-rllib sweep`` trial and ``examples/train_smollm2.py`` each train ``--iterations``
iterations of the shipped SmolLM2 FrozenLake run (``configs/runs/frozenlake_smollm2_cpu.yaml``) on slippery ice
(``success_rate`` 0.8, so slip noise is in the rewards) at a small budget, from the model ``--model``, with
``training.trace_dir`` on. Each iteration's trace (the update batch's sampled token ids, scores and advantages, and
the learner's losses; ``ragen_rllib.algorithms.ragen.driver.trace``) must equal the API's: rows, token ids and
scores exactly, advantages to float32 rounding, losses within float tolerance. Iterations after the first also
check the update and the weight sync, since their samples come from the updated engine.

Run:  .venv/bin/python benchmarks/entry_points.py --model DIR [--iterations 2] [--name entry_points_smollm2] [--jobs N]
      (DIR: a warm start in the run's agent settings, e.g. the SmolLM2 demo's .cache/demo/smollm2-frozenlake-...)
Prints one line per entry point and iteration; exits 1 on a mismatch; with --name writes
benchmarks/results/<name>.json. tests/test_entry_points.py runs it with a warm-started tiny model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "configs" / "runs" / "frozenlake_smollm2_cpu.yaml"
OUT = Path(__file__).parent / "results"
#: the shipped run at a small budget with slip; the example takes these with --set
SHARED = ["environment.env_config.is_slippery=true", "environment.env_config.success_rate=0.8",
          "training.env_groups=3", "training.group_size=4", "training.minibatch_size=12", "training.max_turns=3",
          "training.val_env_groups=4", "training.lr_warmup_steps=0", "training.engine_kwargs.kv_cache_gib=1",
          "training.filter_min_std=0.0"]  # every group whose rewards differ trains (the shipped floor is 0.1)
ENTRY_POINTS = ("api", "train", "sweep", "example")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="the model directory every entry point starts from")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default=None, help="where the runs and traces go (default: a temp dir)")
    p.add_argument("--name", default=None, help="write benchmarks/results/<name>.json")
    p.add_argument("--jobs", type=int, default=1, help="entry points run at once (the test runs 2: start-ups overlap; "
                   "a record's wall_s is then not each path's own time)")
    return p.parse_args(argv)


def compare(got: dict, want: dict) -> str | None:
    """None if the trace ``got`` equals ``want`` (see the module docstring), else what differs first."""
    if got["modules"].keys() != want["modules"].keys():
        return f"modules {sorted(got['modules'])} != {sorted(want['modules'])}"
    for module, w in want["modules"].items():
        g = got["modules"][module]
        for key in ("group_ids", "scores", "token_ids"):
            if g[key] != w[key]:
                rows = [i for i, (a, b) in enumerate(zip(g[key], w[key])) if a != b]
                return f"{module}: {key} differ (rows {rows[:8]} of {len(w[key])})"
        for r, (a, b) in enumerate(zip(g["advantages"], w["advantages"])):
            if not np.allclose(a, b, rtol=1e-6, atol=1e-7):
                return f"{module}: advantages of row {r} differ"
        if g["learner"].keys() != w["learner"].keys():
            return f"{module}: learner metrics {sorted(g['learner'])} != {sorted(w['learner'])}"
        for key, value in w["learner"].items():
            if not np.isclose(g["learner"][key], value, rtol=1e-3, atol=1e-5):
                return f"{module}: learner {key} {g['learner'][key]!r} != {value!r}"
    return None


def _run(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed:\n{proc.stderr[-3000:]}")


def run_entry_point(name: str, args, work: Path) -> Path:
    """Train through entry point ``name``; returns its trace directory."""
    trace = work / name / "trace"
    model, seed = f"rl_module.model_config.model={Path(args.model).resolve()}", f"debugging.seed={args.seed}"
    schedule = f"training.lr_decay_steps={args.iterations}"  # what the example sets from --iterations
    common = [model, *SHARED, f"training.trace_dir={trace}"]
    stop = [f"run.stop.training_iteration={args.iterations}", "run.checkpoint_every=0", f"run.out_dir={work / name}"]
    if name == "api":
        _run(["-c", "import sys; from ragen_rllib import RagenConfig, init_ray; init_ray(num_cpus=4); "
              "algo = RagenConfig.from_yaml(sys.argv[1], sys.argv[3:]).build_algo(); "
              "[algo.train() for _ in range(int(sys.argv[2]))]; algo.stop()",
              str(RUN), str(args.iterations), *common, seed, schedule])
    elif name == "train":
        _run(["-m", "ragen_rllib.cli", "train", str(RUN), *common, seed, schedule, *stop])
    elif name == "sweep":  # the run swept over one value of the seed: one Tune trial
        sweep = work / "sweep.yaml"
        grid = f"debugging.seed: {{grid_search: [{args.seed}]}}"
        sweep.write_text(f"defaults: [{RUN}]\ntune:\n  param_space:\n    {grid}\n")
        _run(["-m", "ragen_rllib.cli", "sweep", str(sweep), *common, schedule, *stop])
    else:
        _run(["examples/train_smollm2.py", "--env", "frozenlake", "--model", str(Path(args.model).resolve()),
              "--iterations", str(args.iterations), "--seed", str(args.seed), "--out", str(work / name),
              *(a for s in common[1:] for a in ("--set", s))])
    return trace


def main(argv=None) -> int:
    from ragen_rllib.algorithms.ragen.driver.trace import read_trace
    from ragen_rllib.core.precision import cpu_info

    args = parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="entry-points-")).resolve()
    seconds, traces = {}, {}

    def timed(name: str) -> None:
        start = time.perf_counter()
        traces[name] = run_entry_point(name, args, work)
        seconds[name] = round(time.perf_counter() - start, 1)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for future in [pool.submit(timed, name) for name in ENTRY_POINTS]:
            future.result()
    def trace(name: str, it: int) -> dict:  # an iteration whose filter kept no group trains nothing, traces nothing
        path = traces[name] / f"iter_{it:04d}.json"
        return read_trace(path) if path.exists() else {"modules": {}}

    results, failed = {}, False
    for it in range(1, args.iterations + 1):
        want = trace("api", it)
        rows = want["modules"].get("default_policy", {"scores": [], "advantages": [], "learner": {}})
        summary = {"rows": len(rows["scores"]), "distinct_scores": len(set(rows["scores"])),
                   "nonzero_advantages": sum(any(a != 0 for a in row) for row in rows["advantages"]),
                   "learner": rows["learner"]}
        for name in ENTRY_POINTS[1:]:
            problem = compare(trace(name, it), want)
            summary[name] = problem or "equal"
            failed |= problem is not None
            print(f"iteration {it}  {name:8s} vs api: {problem or 'equal'}", flush=True)
        results[f"iteration_{it}"] = summary
    if args.name:
        record = {"command": "python " + " ".join(["benchmarks/entry_points.py", *(argv or sys.argv[1:])]),
                  "cpu": cpu_info(), "model": str(args.model), "iterations": args.iterations, "seed": args.seed,
                  "overrides": SHARED, "wall_s": seconds, "all_equal": not failed, **results}
        OUT.mkdir(exist_ok=True)
        (OUT / f"{args.name}.json").write_text(json.dumps(record, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
