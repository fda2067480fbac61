"""``ragen-rllib train``: train a Ragen algorithm from a config file, with checkpoints, a resolved config, a
per-iteration record and a learning curve under the run directory.

Layout of a run directory::

    config.yaml              the resolved config (loads back with RagenConfig.from_yaml)
                             (``run.ray_init`` holds ``ray.init``'s keyword arguments, e.g. a ``runtime_env``
                             that ships user env modules to the runners)
    progress.jsonl           one line per iteration: the iteration and the headline metrics
    checkpoints/iter_NNNN    links to the RLlib checkpoints (Algorithm.save_to_path layout) Tune saved every
                             run.checkpoint_every iterations and at the end
    trials/                  Tune's experiment: one trial directory per launch (a resume is a new trial) with
                             result.json, progress.csv and the loggers' files (TensorBoard events by default;
                             run.loggers: [tensorboard, wandb, mlflow], see ragen_rllib.run.loggers)
    learning_curve.png       training (and validation) success per iteration (needs matplotlib)

The run is one Tune trial (``tune.Tuner(Ragen, param_space=config)``), so Tune's logger callbacks, stop rules
and checkpointing apply as for any RLlib algorithm.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ray import tune
from ray.rllib.utils.annotations import override

from ragen_rllib.core import keys as K
from ragen_rllib.run.loggers import DEFAULT_LOGGERS, check_loggers, logger_callbacks, logger_env

CONFIG_FILE, PROGRESS_FILE, CHECKPOINTS, CURVE_FILE = "config.yaml", "progress.jsonl", "checkpoints", \
    "learning_curve.png"
TRIALS = "trials"  # Tune's experiment directory inside the run directory


def lookup(result: Mapping[str, Any], key: str) -> Any:
    """``result["a"]["b"]`` for ``key="a/b"`` (Tune's stop-key syntax); a top-level key as is. None if absent."""
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def should_stop(result: Mapping[str, Any], stop: Mapping[str, float]) -> str | None:
    """The first stop criterion ``result`` reached (Tune's semantics: value >= bound), or ``done`` when an
    early-stop rule ended training; None to go on."""
    for key, bound in stop.items():
        value = lookup(result, key)
        if value is not None and value >= bound:
            return f"{key}={value} >= {bound}"
    if result.get("done"):
        return "done (an early-stop rule fired)"
    return None


def progress_line(result: Mapping[str, Any]) -> str:
    """One line per iteration: success, return, valid actions, tokens/s and the phase times."""
    runners, timers = result.get("env_runners", {}), result.get("timers", {})

    def num(value: Any, fmt: str) -> str:
        return format(value, fmt) if isinstance(value, (int, float)) and math.isfinite(value) else "-"

    line = (f"iter {result.get('training_iteration', 0):4d}  success {num(runners.get(K.SUCCESS_RATE), '.1%')}"
            f"  return {num(runners.get(K.EPISODE_RETURN_MEAN), '+.3f')}"
            f"  valid {num(runners.get(K.ACTION_VALID_RATE), '.1%')}"
            f"  tokens/s {num(runners.get(K.GENERATED_TOKENS_PER_S), '.0f')}"
            f"  (sample {num(timers.get('ragen_sample_s'), '.1f')} s, learn {num(timers.get('ragen_learn_s'), '.1f')}"
            f" s, sync {num(timers.get('ragen_weight_sync_s'), '.2f')} s)")
    val = lookup(result, f"evaluation/env_runners/{K.SUCCESS_RATE}")
    return line + (f"  validation {val:.1%}" if isinstance(val, (int, float)) else "")


def headline(result: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics ``progress.jsonl`` keeps per iteration."""
    keys = (K.SUCCESS_RATE, K.EPISODE_RETURN_MEAN, K.ACTION_VALID_RATE, K.GENERATED_TOKENS_PER_S)
    runners = result.get("env_runners", {})
    row = {"iteration": result.get("training_iteration"), **{k: runners.get(k) for k in keys}}
    row["validation_success_rate"] = lookup(result, f"evaluation/env_runners/{K.SUCCESS_RATE}")
    row["num_env_steps_sampled_lifetime"] = result.get("num_env_steps_sampled_lifetime")
    return row


def last_checkpoint(run_dir: Path, log: Callable[[str], None] = print) -> Path:
    """The newest complete ``checkpoints/iter_NNNN`` of a run directory (one whose RLlib metadata file exists:
    a link to a checkpoint that was never finished, or was deleted, is skipped and reported)."""
    found = sorted((run_dir / CHECKPOINTS).glob("iter_*"), reverse=True)
    for path in found:
        if (path / "rllib_checkpoint.json").is_file():
            return path
        log(f"skipping {path}: not a complete checkpoint (no rllib_checkpoint.json)")
    raise FileNotFoundError(f"--resume {run_dir}: no complete checkpoint under {run_dir / CHECKPOINTS}")


#: the run section's defaults, shared by train and sweep
DEFAULT_STOP = {"training_iteration": 10}


def run_stop(run: Mapping[str, Any]) -> dict[str, Any]:
    """``run.stop``, else :data:`DEFAULT_STOP`."""
    return dict(run.get("stop") or DEFAULT_STOP)


def run_loggers(run: Mapping[str, Any]) -> list[str]:
    """``run.loggers`` (checked), else the default loggers whose package is installed."""
    return check_loggers(run.get("loggers") or [n for n in DEFAULT_LOGGERS if find_spec("tensorboardX")])


def load_run_config(config_path: str | Path | None, overrides: list[str], resume: str | Path | None, what: str,
                    log: Callable[[str], None] = print):
    """``(config, run directory)`` of a new run (``CONFIG`` + ``overrides``; its directory ``run.out_dir``, else
    ``runs/<config name>``) or of a resumed one (the directory's ``config.yaml``, the settings the run started
    with, + ``overrides``, each override logged with the value it replaces). ``what`` names the command."""
    from ragen_rllib.algorithms.ragen.config.config_files import load_tree
    from ragen_rllib.algorithms.ragen.ragen_config import RagenConfig

    if resume is not None:
        run_dir = Path(resume)
        saved = run_dir / CONFIG_FILE
        if not saved.is_file():
            noun = "run" if what == "train" else what
            raise FileNotFoundError(f"--resume {run_dir}: not a {noun} directory (no {CONFIG_FILE})")
        config = RagenConfig.from_yaml(saved, overrides)
        if overrides:
            before, after = load_tree(saved), load_tree(saved, overrides)
            for item in overrides:
                path = item.split("=", 1)[0]
                log(f"resume: {path} = {_at(after, path)!r} (the run started with {_at(before, path)!r})")
        return config, run_dir
    if config_path is None:
        raise ValueError(f"{what} needs a CONFIG file (or --resume DIR)")
    config = RagenConfig.from_yaml(config_path, overrides)
    return config, Path(config.run_settings.get("out_dir") or Path("runs") / Path(config_path).stem)


def _at(tree: Mapping[str, Any], path: str) -> Any:
    node: Any = tree
    for part in path.lstrip("+~").split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def train(config_path: str | Path | None, overrides: list[str], resume: str | Path | None = None,
          log: Callable[[str], None] = print) -> Path:
    """Train until ``run.stop`` (default: :data:`DEFAULT_STOP`); returns the run directory."""
    from ragen_rllib.run.ray_init import joins_cluster
    from ragen_rllib.run.resources import check_cluster

    config, run_dir = load_run_config(config_path, overrides, resume, "train", log)
    checkpoint = last_checkpoint(run_dir, log) if resume is not None else None
    run = config.run_settings
    ray_kwargs = ray_kwargs_of(run)
    config.validate()  # every setting checked before any actor starts
    absolute_model(config, config.model_name)
    loggers = run_loggers(run)
    stop = run_stop(run)
    storage, name = experiment_location(run, run_dir, uri_ok=False)
    run_dir.mkdir(parents=True, exist_ok=True)
    config.to_yaml(run_dir / CONFIG_FILE)
    start_ray(ray_kwargs, loggers, run_dir, log)
    check_cluster(config, joins_cluster(ray_kwargs), log)
    if checkpoint is not None:  # RLlib's documented way to start a Tune trial from a checkpoint
        config = config.copy(copy_frozen=False).callbacks(on_algorithm_init=RestoreFrom(checkpoint.resolve()))
        log(f"resumed from {checkpoint}")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # our progress lines only, not Tune's status tables
    progress = RunProgress(run_dir, stop, log)
    tuner = tune.Tuner(config.algo_class, param_space=config, run_config=tune_run_config(
        run, name, storage, progress.stop, [progress, *logger_callbacks(loggers, run_dir, project=run_dir.name)]))
    results = tuner.fit()
    if results.errors:
        raise RuntimeError(f"training failed: {results.errors[0]}")
    plot_curve(run_dir)
    return run_dir


class RestoreFrom:
    """``on_algorithm_init`` callback: load a checkpoint into the new Algorithm (and its engines)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, *, algorithm, **kwargs) -> None:
        algorithm.restore_from_path(self.path)


class RunProgress(tune.Callback):
    """A Tune callback on the driver: the progress line and ``progress.jsonl`` per iteration, the stop rule, and
    ``checkpoints/iter_NNNN`` links to Tune's checkpoints."""

    def __init__(self, run_dir: Path, stop: Mapping[str, float], log: Callable[[str], None]) -> None:
        self.run_dir, self.bounds, self.log = run_dir, dict(stop), log
        self.first, self.reason = True, None

    def __getstate__(self) -> dict:  # Tune pickles its callbacks with the experiment state; `log` may not pickle
        return {k: v for k, v in self.__dict__.items() if k != "log"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, log=print)

    def stop(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        self.reason = should_stop(result, self.bounds)  # logged after the iteration's line (Tune asks first)
        return self.reason is not None

    @override(tune.Callback)
    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        if self.first and result.get("training_iteration", 1) > 1:
            self.log(f"resumed at iteration {result['training_iteration'] - 1}")
        self.first = False
        self.log(progress_line(result))
        with (self.run_dir / PROGRESS_FILE).open("a") as progress:
            progress.write(json.dumps(headline(result)) + "\n")
        if self.reason:
            self.log(f"stopped: {self.reason}")

    @override(tune.Callback)
    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info) -> None:
        step = trial.last_result.get("training_iteration", 0)
        link = link_checkpoint(self.run_dir / CHECKPOINTS / f"iter_{step:04d}", Path(checkpoint.path))
        self.log(f"checkpoint {link}")


def link_checkpoint(link: Path, target: Path) -> Path:
    """Point ``link`` at the checkpoint ``target``: relative when both lie under the run directory (``link``'s
    grandparent), so a moved or copied run directory keeps its links; absolute otherwise (a ``storage_path``)."""
    link.parent.mkdir(exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    target, run_dir = target.resolve(), link.parent.parent.resolve()
    inside = target.is_relative_to(run_dir)
    link.symlink_to(os.path.relpath(target, link.parent.resolve()) if inside else target, target_is_directory=True)
    return link


def experiment_location(run: Mapping[str, Any], out: Path, uri_ok: bool = True) -> tuple[str, str]:
    """``(storage_path, name)`` of the Tune experiment of a run or sweep: ``out/trials`` by default; with
    ``run.storage_path`` (a directory every node reaches, or a URI that pyarrow opens: ``s3://``, ``gs://``, ...)
    ``<storage_path>/<out_dir's name>``. ValueError naming the key and the fix when it cannot be used."""
    storage = run.get("storage_path")
    if not storage:
        return str(out.resolve()), TRIALS
    if "://" not in storage:
        return str(Path(storage).resolve()), out.name
    if not uri_ok:
        raise ValueError(f"run.storage_path={storage!r}: train's --resume follows checkpoint links in the run "
                         "directory, so it needs a directory (a shared filesystem); sweeps take URIs")
    import pyarrow.fs

    try:
        pyarrow.fs.FileSystem.from_uri(storage)
    except Exception as err:  # pyarrow raises ArrowInvalid, OSError or others by scheme
        raise ValueError(f"run.storage_path={storage!r}: pyarrow cannot open it ({err}); use a directory every "
                         "node reaches or a URI such as s3://bucket/path") from err
    return storage.rstrip("/"), out.name


def tune_run_config(run: Mapping[str, Any], name: str, storage: str, stop: Any, callbacks: list) -> tune.RunConfig:
    """Tune's RunConfig of a train or sweep run: where trials go, the stop rule, the callbacks, restarts
    (``run.max_failures``) and checkpoints every ``run.checkpoint_every`` iterations and at the end."""
    every = int(run.get("checkpoint_every") or 0)
    return tune.RunConfig(name=name, storage_path=storage, stop=stop, verbose=0, failure_config=failure_config(run),
                          callbacks=callbacks,
                          checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=every, checkpoint_at_end=True))


def failure_config(run: Mapping[str, Any]) -> tune.FailureConfig:
    """Tune's trial restarts: ``run.max_failures`` times from the trial's last checkpoint (default 0: none)."""
    return tune.FailureConfig(max_failures=int(run.get("max_failures") or 0))


def ray_kwargs_of(run: Mapping[str, Any]) -> dict[str, Any]:
    """``ray.init``'s keyword arguments from a config's ``run.ray_init`` (actors' logs stay in Ray's log files
    unless ``log_to_driver`` is set), with shipped modules made importable here (:func:`add_shipped_paths`)."""
    kwargs = {"log_to_driver": False, **dict(run.get("ray_init") or {})}
    add_shipped_paths(kwargs)
    return kwargs


def absolute_model(config, model_name: str) -> None:
    """A local model directory as an absolute path: Tune's trial actors run in other processes."""
    if Path(model_name).exists():
        # RLlib keeps the user's own model_config keys in _model_config (no public accessor); the public
        # model_config adds the algorithm's defaults (value_head, temperature), which must not be frozen here: they
        # follow the estimator and temperature each sweep trial sets
        own = dict(config._model_config or {})
        config.rl_module(model_config={**own, "model": str(Path(model_name).resolve())})


def start_ray(ray_kwargs: dict[str, Any], loggers: list[str], out: Path, log: Callable[[str], None] = print) -> None:
    """``init_ray`` with the environment the trials need, on the driver and in every Ray worker: relative paths
    keep meaning the driver's directory (no chdir into trial directories), and the loggers' variables. Logs the
    dashboard's URL."""
    from ragen_rllib.run.ray_init import init_ray

    env = {"RAY_CHDIR_TO_TRIAL_DIR": os.environ.get("RAY_CHDIR_TO_TRIAL_DIR", "0"), **logger_env(loggers, out)}
    os.environ.update(env)
    runtime_env = dict(ray_kwargs.get("runtime_env") or {})
    ray_kwargs["runtime_env"] = {**runtime_env, "env_vars": {**env, **(runtime_env.get("env_vars") or {})}}
    context = init_ray(**ray_kwargs)
    if context is not None and context.dashboard_url:
        token = os.environ.get("RAY_AUTH_TOKEN_PATH")
        log(f"Ray dashboard: http://{context.dashboard_url}" + (f" (its login token: {token})" if token else ""))


def add_shipped_paths(ray_kwargs: Mapping[str, Any]) -> None:
    """Make what ``runtime_env`` ships to the workers (``py_modules`` files and packages, ``working_dir``)
    importable on the driver too, so the config's ``env_modules`` are checked here before any actor starts."""
    import sys

    runtime_env = ray_kwargs.get("runtime_env") or {}
    paths = [Path(str(m)).parent for m in runtime_env.get("py_modules") or [] if Path(str(m)).exists()]
    if runtime_env.get("working_dir") and Path(str(runtime_env["working_dir"])).is_dir():
        paths.append(Path(str(runtime_env["working_dir"])))
    for path in paths:
        if str(path.resolve()) not in sys.path:
            sys.path.insert(0, str(path.resolve()))


def plot_curve(run_dir: Path) -> Path | None:
    """``learning_curve.png`` from ``progress.jsonl`` (skipped when matplotlib is not installed)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (run_dir / PROGRESS_FILE).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r[K.SUCCESS_RATE] is not None]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["iteration"] for r in rows], [r[K.SUCCESS_RATE] for r in rows], label="training success")
    val = [(r["iteration"], r["validation_success_rate"]) for r in rows if r["validation_success_rate"] is not None]
    if val:
        ax.plot(*zip(*val), "o-", label="validation success")
    ax.set_xlabel("iteration")
    ax.set_ylabel("success rate")
    ax.legend()
    fig.tight_layout()
    path = run_dir / CURVE_FILE
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
