"""``ragen-rllib sweep``: a Tune experiment from a config file's ``tune`` section (search space, scheduler), one
trial per point, and a summary a person can read.

The ``tune`` section (search space syntax: :mod:`ragen_rllib.sweep.space`)::

    tune:
      param_space: {...}                    # config key paths -> values / distributions / a grouped variant
      metric: evaluation/env_runners/success_rate   # what schedulers and "best" use (validation success)
      mode: max
      scheduler: {type: fifo}               # or {type: asha, grace_period: 2, ...} / {type: pbt, ...}
      num_samples: 1                        # repeats of the grid (random spaces: samples)
      max_concurrent_trials: null           # null: as many as the resources fit

Every trial starts from the same model (the config's). Under ``run.out_dir``: ``trials/`` (Tune's experiment,
one directory per trial with its checkpoints and TensorBoard events), ``sweep.json`` (one row per trial: its
swept values, final validation success, return, valid-action rate, iterations, best checkpoint) and
``sweep.md`` (the same as a table). ``--resume`` continues a killed sweep (``tune.Tuner.restore``): finished
trials are kept, unfinished ones continue from their last checkpoint.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ray import tune

from ragen_rllib.core import keys as K

RECORD, TABLE = "sweep.json", "sweep.md"
#: what a row of the record holds besides the swept values (summarize writes them; sweep_report reads them)
OUTCOME_KEYS = ("validation_success_before", "validation_valid_actions_before", "validation_success",
                "validation_return", "validation_valid_actions", "iterations", "wall_s", "error", "best_checkpoint")
DEFAULT_METRIC = f"evaluation/env_runners/{K.SUCCESS_RATE}"


def swept_values(config: Mapping[str, Any], space: Mapping[str, Any]) -> dict[str, Any]:
    """The values a trial got for each swept key path (a variant by its ``name``)."""
    from ragen_rllib.run.train import lookup
    from ragen_rllib.sweep.space import variant_axis

    out = {}
    for path in space:
        axis = variant_axis(path)
        if axis is not None:
            variant = (config.get("sweep_variants") or {}).get(axis) if axis else config.get("sweep_variant")
            variant = variant or {}
            out[path] = variant.get("name", json.dumps(variant, sort_keys=True))
            continue
        _, _, rest = path.partition(".")
        out[path] = lookup(config, rest.replace(".", "/"))
    return out


def _before(frame, metric: str = K.SUCCESS_RATE) -> float | None:
    """A validation metric before training (``val_before_train``) from a trial's per-iteration dataframe."""
    column = f"evaluation_before_training/env_runners/{metric}"
    if frame is None or column not in getattr(frame, "columns", ()):
        return None
    values = frame[column].dropna()
    return float(values.iloc[0]) if len(values) else None


def summarize(results, space: Mapping[str, Any], metric: str, mode: str) -> list[dict[str, Any]]:
    """One row per trial, sorted by the swept values."""
    rows = []
    for result in results:
        last = result.metrics or {}
        val = (last.get("evaluation") or {}).get("env_runners") or {}
        frame = getattr(result, "metrics_dataframe", None)
        best = None
        if result.checkpoint is not None:
            try:
                best = result.get_best_checkpoint(metric, mode)
            except (KeyError, RuntimeError, ValueError):
                best = None
        rows.append({**swept_values(result.config, space),
                     "validation_success_before": _before(frame),
                     "validation_valid_actions_before": _before(frame, K.ACTION_VALID_RATE),
                     "validation_success": val.get(K.SUCCESS_RATE),
                     "validation_return": val.get(K.EPISODE_RETURN_MEAN),
                     "validation_valid_actions": val.get(K.ACTION_VALID_RATE),
                     "iterations": last.get("training_iteration"), "wall_s": last.get("time_total_s"),
                     "error": repr(result.error) if result.error else None,
                     "best_checkpoint": str(best.path) if best is not None else None})
    return sorted(rows, key=lambda r: json.dumps([r[k] for k in swept_values({}, space)], default=str))


def table(rows: list[dict[str, Any]], space: Mapping[str, Any]) -> str:
    """Markdown table: swept values -> validation success, return, valid-action rate, iterations."""
    keys = list(swept_values({}, space))

    def fmt(value: Any, kind: str = "") -> str:
        if isinstance(value, float) and math.isfinite(value):
            return f"{value:.1%}" if kind == "%" else f"{value:+.3f}" if kind == "+" else f"{value:g}"
        return "-" if value is None else str(value)

    head = [*keys, "success before", "validation success", "return", "valid actions", "iterations"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [fmt(r[k]) for k in keys] + [fmt(r.get("validation_success_before"), "%"),
                                             fmt(r["validation_success"], "%"), fmt(r["validation_return"], "+"),
                                             fmt(r["validation_valid_actions"], "%"), fmt(r["iterations"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], space: Mapping[str, Any], path: Path) -> Path | None:
    """Validation success against the first swept key, one line per value of the others (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(swept_values({}, space))
    x_key, rest = keys[0], keys[1:]
    lines: dict[str, list[tuple[Any, float]]] = {}
    for r in rows:
        if isinstance(r["validation_success"], float):
            label = ", ".join(f"{k.split('.')[-1]}={r[k]}" for k in rest) or "trials"
            lines.setdefault(label, []).append((r[x_key], r["validation_success"]))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, points in lines.items():
        points.sort(key=lambda p: (str(type(p[0])), p[0]))
        ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label=label)
    ax.set_xlabel(x_key)
    ax.set_ylabel("validation success")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def sweep(config_path: str | Path | None, overrides: list[str], resume: str | Path | None = None,
          log: Callable[[str], None] = print) -> Path:
    """Run (or resume) the sweep; returns the sweep directory."""
    from ragen_rllib.algorithms.ragen.ragen import Ragen
    from ragen_rllib.run.loggers import logger_callbacks
    from ragen_rllib.run.ray_init import joins_cluster
    from ragen_rllib.run.resources import check_cluster
    from ragen_rllib.run.train import (
        absolute_model,
        experiment_location,
        load_run_config,
        ray_kwargs_of,
        run_loggers,
        run_stop,
        start_ray,
        tune_run_config,
    )
    from ragen_rllib.sweep.space import apply_param_space, make_scheduler
    from ragen_rllib.sweep.state import mend_experiment_state, ray_temp_dir

    if resume is not None and overrides:  # Tune restores each trial with the config it started with
        raise ValueError(f"sweep --resume {resume} takes no overrides (got {overrides}): the restored trials keep the "
                         "settings they started with; start a new sweep to change them")
    config, out = load_run_config(config_path, overrides, resume, "sweep", log)
    settings, run = dict(config.tune_settings), config.run_settings
    space = dict(settings.get("param_space") or {})
    if not space:
        raise ValueError("the config's tune.param_space is empty: name at least one key to sweep")
    metric, mode = settings.get("metric", DEFAULT_METRIC), settings.get("mode", "max")
    ray_kwargs = ray_kwargs_of(run)
    storage, name = experiment_location(run, out)
    config.tune_settings = {}  # the raw YAML space would read as a second grid_search to Tune
    config, sample = apply_param_space(config, space)
    sample.validate()  # one point of the space, checked whole, before any trial starts
    scheduler = make_scheduler(settings.get("scheduler"), metric, mode, sample)
    absolute_model(config, sample.model_name)
    out.mkdir(parents=True, exist_ok=True)
    if resume is None:  # the composed file, with the command line's overrides, for --resume
        (out / "config.yaml").write_text(_with_overrides(config_path, overrides))
    loggers = run_loggers(run)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")  # validation runs every N iterations only
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "0")  # experiment state after every event: a kill loses little
    start_ray(ray_kwargs, loggers, out, log)
    check_cluster(sample, joins_cluster(ray_kwargs), log)
    if resume is not None:
        if "://" not in storage:  # a local or shared directory: a kill may have truncated Tune's state there
            mend_experiment_state(Path(storage) / name, ray_temp_dir(ray_kwargs), log)
        tuner = tune.Tuner.restore(f"{storage}/{name}", trainable=Ragen, resume_unfinished=True,
                                   resume_errored=True)
        log(f"resuming {storage}/{name}")
    else:
        tuner = tune.Tuner(Ragen, param_space=config, tune_config=tune.TuneConfig(
            scheduler=scheduler, num_samples=int(settings.get("num_samples", 1)),
            max_concurrent_trials=settings.get("max_concurrent_trials")), run_config=tune_run_config(
            run, name, storage, run_stop(run), [TrialLines(log), *logger_callbacks(loggers, out, project=out.name)]))
    results = tuner.fit()
    rows = summarize(results, space, metric, mode)
    (out / RECORD).write_text(json.dumps({"metric": metric, "mode": mode, "param_space": space, "trials": rows},
                                         indent=2, default=str))
    (out / TABLE).write_text(table(rows, space))
    plot(rows, space, out / "sweep.png")
    log(table(rows, space))
    log(f"sweep saved to {out}: {RECORD}, {TABLE}; trials and checkpoints in {storage}/{name}")
    return out


class TrialLines(tune.Callback):
    """One line per trial iteration on the driver (the trial's name and the progress line of ``train``)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log

    def __getstate__(self) -> dict:  # Tune pickles its callbacks with the experiment state
        return {}

    def __setstate__(self, state: dict) -> None:
        self.log = print

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        from ragen_rllib.run.train import progress_line

        self.log(f"{trial}: {progress_line(result)}")

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self.log(f"{trial}: done")


def _with_overrides(config_path: str | Path, overrides: list[str]) -> str:
    """The composed config file with the command line's overrides merged in (so --resume sees the same run)."""
    from omegaconf import OmegaConf

    from ragen_rllib.algorithms.ragen.config.config_files import load_tree

    return OmegaConf.to_yaml(OmegaConf.create(load_tree(config_path, overrides)))
