"""What the multi-agent learning records share (benchmarks/learning_tictactoe.py, benchmarks/learning_pair.py): the
SmolLM2 RL settings, the per-iteration update diagnostics and the lift plot. Not a benchmark itself."""

from __future__ import annotations

from pathlib import Path

#: SmolLM2's RL settings beside each record's own (those of configs/runs/*_smollm2_cpu.yaml): Dr. GRPO, warm-up and
#: cosine decay, a rollout filter with a 0.1 floor (groups differing only by format penalties make no update)
SMOLLM2_TRAINING = {"adv_estimator": "dr_grpo", "loss_agg_mode": "seq-mean-token-mean", "lr_warmup_steps": 2,
                    "lr_decay": "cosine", "lr_min_ratio": 0.1, "filter_strategy": "top_p", "filter_value": 1.0,
                    "filter_include_zero": False, "filter_min_std": 0.1, "reject_empty_actions": True}


def learner_stats(result: dict) -> dict:
    """Each trained module's update diagnostics of one iteration (approx. KL, grad norm, clip fraction, loss)."""
    keys = ("approx_kl", "grad_norm", "clip_frac", "policy_loss")
    return {f"{module}/{key}": float(value) for module, stats in result.get("learners", {}).items()
            if module != "__all_modules__" for key, value in stats.items() if any(k in key for k in keys)
            and isinstance(value, (int, float))}


def plot_lift(record: dict, path: Path, metric: str, ylabel: str, title: str, label: str) -> None:
    """The warm start's ``record["before"][metric]`` as a line, each seed's ``after`` value with its SE
    (``<metric>_se``) as a point; the title ends with the mean +- std lift."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, before = record["runs"], record["before"][metric]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.axhline(100 * before, color="grey", ls="--", label=f"warm start {100 * before:.1f}%")
    xs = [r["seed"] for r in runs]
    ax.errorbar(xs, [100 * r["after"][metric] for r in runs], yerr=[100 * r["after"][f"{metric}_se"] for r in runs],
                fmt="o", capsize=4, label=label)
    ax.set_xticks(xs, [f"seed {s}" for s in xs])
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}: lift {record['mean_lift_points']:+.1f} +- {record['std_lift_points']:.1f} pts", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run_seeds(seeds, run_one, header: dict, out: Path, name: str, plot, started: float,
              prior_runs: list[dict] | None = None) -> dict:
    """``run_one(seed)`` for each seed (each returns a dict with ``lift_points`` and ``lift_se_points``); after
    every seed the record (``header`` + ``prior_runs`` (a resumed record's seeds) + the runs + mean and std of the
    lifts) is saved as ``out/<name>.json`` and plotted by ``plot(record, path)``, so a stopped run keeps the seeds
    it finished."""
    import json
    import time

    runs: list[dict] = list(prior_runs or [])
    for seed in seeds:
        runs.append(run_one(seed))
        record = {**header, "runs": runs, **lift_spread(runs), "seconds": time.perf_counter() - started}
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(record, indent=2))
        plot(record, out / f"{name}.png")
    lifts = [r["lift_points"] for r in runs]
    ses = ", ".join(f"{r['lift_se_points']:.1f}" for r in runs)
    print(f"lift {record['mean_lift_points']:+.1f} +- {record['std_lift_points']:.1f} points over {len(lifts)} seeds "
          f"({', '.join(f'{x:+.1f}' for x in lifts)}); per-run SE {ses}; saved {out / (name + '.json')}")
    return record


def command_line(root: Path) -> str:
    """This process's command, the script relative to the repository ``root``."""
    import sys

    return "python " + " ".join([Path(sys.argv[0]).as_posix().split(str(root) + "/")[-1], *sys.argv[1:]])


def lift_spread(runs: list[dict]) -> dict:
    """Mean and standard deviation over seeds of the runs' ``lift_points`` (std 0 for one seed)."""
    import statistics

    lifts = [r["lift_points"] for r in runs]
    return {"mean_lift_points": statistics.fmean(lifts),
            "std_lift_points": statistics.stdev(lifts) if len(lifts) > 1 else 0.0}


#: the arguments that may differ between the processes whose seeds make up one record
PER_PROCESS_ARGS = ("seeds", "resume", "name", "merge_from")


def merge_records(path: Path, other: Path, plot) -> dict:
    """Adds the seeds of the record ``other`` (run in its own process, e.g. after the first process ran out of
    memory) to the record at ``path``: the same settings (every argument but :data:`PER_PROCESS_ARGS`), CPU and
    warm-start evaluation, else an error naming what differs; no seed twice. Saves and plots ``path``."""
    import json

    extra = json.loads(other.read_text())
    record = resumed(path, extra["args"], what=f"merge of {other.name}")
    def timeless(value):  # an evaluation's wall time may differ between processes; nothing else may
        return {k: v for k, v in value.items() if k != "seconds"}

    for key in ("cpu", "before"):
        if timeless(record[key]) != timeless(extra[key]):
            raise ValueError(f"merge: {path.name} and {other.name} differ in {key!r}; not one record")
    twice = {r["seed"] for r in record["runs"]} & {r["seed"] for r in extra["runs"]}
    if twice:
        raise ValueError(f"merge: seeds {sorted(twice)} are in both {path.name} and {other.name}")
    runs = record["runs"] + extra["runs"]
    record.update(runs=runs, **lift_spread(runs),
                  merged_from=[*record.get("merged_from", []), {"record": other.name, "command": extra["command"],
                                                                "seeds": [r["seed"] for r in extra["runs"]]}],
                  seconds=record["seconds"] + extra["seconds"])
    record["args"]["seeds"] = [r["seed"] for r in runs]
    path.write_text(json.dumps(record, indent=2))
    plot(record, path.with_suffix(".png"))
    return record


def resumed(path: Path, args: dict, ignore: tuple[str, ...] = PER_PROCESS_ARGS, what: str = "--resume") -> dict:
    """The record at ``path`` to extend with more seeds, after checking that it was run with the same ``args``
    (every key but ``ignore``; a differing key is an error naming it, so no two settings share a record)."""
    import json

    if not path.exists():
        raise FileNotFoundError(f"{what}: no record at {path}; run without --resume first")
    record = json.loads(path.read_text())
    stored = record["args"]
    for key in sorted(set(stored) | set(args)):
        if key not in ignore and stored.get(key) != args.get(key):
            raise ValueError(f"{what}: {path.name} was run with {key}={stored.get(key)!r}, this command has "
                             f"{key}={args.get(key)!r}; give the same settings, or a new --name")
    return record
