"""Experiment loggers of ``ragen-rllib train`` (``run.loggers``): Ray Tune's own logger callbacks.

``tensorboard`` (Tune's TBXLoggerCallback; the default when tensorboardX is installed), ``wandb`` (Ray's
WandbLoggerCallback; offline unless ``WANDB_MODE``/``WANDB_API_KEY`` say otherwise, files under the run directory)
and ``mlflow`` (Ray's MLflowLoggerCallback; a local ``mlruns/`` store in the run directory unless
``MLFLOW_TRACKING_URI`` is set). W&B and MLflow are the ``loggers`` extra: ``pip install 'ragen-rllib[loggers]'``.
Tune's JSON and CSV result files are always written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

LOGGERS = ("tensorboard", "wandb", "mlflow")
DEFAULT_LOGGERS = ("tensorboard",)


def check_loggers(names: Sequence[str]) -> list[str]:
    """The names, checked: known, and their package installed (the error names the extra to install)."""
    import importlib.util

    names = list(names)
    for name in names:
        if name not in LOGGERS:
            raise ValueError(f"run.loggers: {name!r} is not a logger; use any of {list(LOGGERS)}")
        module = {"tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow"}[name]
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"run.loggers: {name!r} needs the {module} package: pip install 'ragen-rllib[loggers]' "
                             f"(or drop {name!r} from run.loggers)")
    return names


def logger_env(names: Sequence[str], run_dir: Path) -> dict[str, str]:
    """Environment variables the loggers need, on the driver and (through Ray's runtime env) in Ray's workers,
    where Ray's W&B logging actor runs: W&B offline without an API key, and every W&B/MLflow file in the run
    directory, never in the user's home. Values already set in the environment win."""
    env: dict[str, str] = {}
    if "wandb" in names:
        env["WANDB_MODE"] = "online" if "WANDB_API_KEY" in os.environ else "offline"
        for var, sub in (("WANDB_DIR", ""), ("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"),
                         ("WANDB_DATA_DIR", "data")):
            env[var] = str((run_dir / "wandb_files" / sub).resolve())
    if "mlflow" in names and not os.environ.get("MLFLOW_TRACKING_URI"):
        env["MLFLOW_ALLOW_FILE_STORE"] = "true"  # a local file store in the run directory (MLflow 3 asks to opt in)
    return {k: os.environ.get(k, v) for k, v in env.items()}


def logger_callbacks(names: Sequence[str], run_dir: Path, project: str) -> list:
    """Tune callbacks for the named loggers (JSON and CSV result files always); call after :func:`logger_env`'s
    variables are set."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

    names = check_loggers(names)
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"  # exactly these, not Tune's automatic set
    callbacks: list = [JsonLoggerCallback(), CSVLoggerCallback()]
    if "tensorboard" in names:
        callbacks.append(TBXLoggerCallback())
    if "wandb" in names:
        from ray.air.integrations.wandb import WandbLoggerCallback

        for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            if var in os.environ:
                Path(os.environ[var]).mkdir(parents=True, exist_ok=True)
        callbacks.append(WandbLoggerCallback(project=project, dir=os.environ.get("WANDB_DIR", str(run_dir)),
                                             mode=os.environ.get("WANDB_MODE", "offline")))
    if "mlflow" in names:
        from ray.air.integrations.mlflow import MLflowLoggerCallback

        uri = os.environ.get("MLFLOW_TRACKING_URI") or (run_dir / "mlruns").resolve().as_uri()
        callbacks.append(MLflowLoggerCallback(tracking_uri=uri, experiment_name=project))
    return callbacks
