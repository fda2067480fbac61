"""YAML config files for :class:`~.ragen_config.RagenConfig`.

A file's top-level sections are RagenConfig's builder methods (``environment``, ``env_runners``, ``learners``,
``rl_module``, ``training``, ``evaluation``, ``debugging``), each a mapping of that method's keyword
arguments, plus ``run`` (``stop``: Tune's stop dict, ``checkpoint_every``: iterations, ``out_dir``,
``loggers``, ``ray_init``: keyword arguments of ``ray.init``, e.g. a ``runtime_env``; ``storage_path``: where
Tune keeps trials and checkpoints, a directory every node reaches or a ``s3://``-style URI; ``max_failures``: how
often Tune restarts a failed trial from its last checkpoint) and ``tune`` (free-form,
for sweeps). ``defaults: [base.yaml, ...]`` names files (relative to this
one) that the file extends: they are merged first, in order, then the file, then the OmegaConf dotlist
``overrides`` (``["training.lr=1e-5"]``).

Everything is checked before any actor starts: an unknown section or key names the file, the key path, the
value and the nearest valid keys; a ``training`` value is checked against its declared type and choices
(:mod:`.hyperparams`). ``to_yaml`` writes a file that loads back to an equal config.
"""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from ragen_rllib.algorithms.ragen.hyperparams import HYPERPARAMS, check_value

SECTIONS = ("environment", "env_runners", "learners", "rl_module", "training", "evaluation", "debugging")
RUN_KEYS = {"stop": dict, "checkpoint_every": int, "out_dir": str, "loggers": list, "ray_init": dict,
            "storage_path": str, "max_failures": int}
FREE_SECTIONS = ("tune",)
BASES = "defaults"  # the list of base files a file extends
ENV_KEYS = ("env_tags", "val_env_tags", "env_modules")  # Ragen's own environment() keys (multi-env runs)
#: what ``to_yaml`` writes per builder section (besides every Ragen hyperparameter under ``training``)
DUMPED = {
    "environment": ("env", "env_config", *ENV_KEYS),
    "env_runners": ("num_env_runners", "num_cpus_per_env_runner", "num_gpus_per_env_runner",
                    "custom_resources_per_env_runner", "sample_timeout_s"),
    "learners": ("num_learners", "num_cpus_per_learner", "num_gpus_per_learner"),
    "rl_module": ("model_config",),
    "training": ("lr", "grad_clip", "grad_clip_by", "gamma", "num_epochs", "minibatch_size"),
    "evaluation": ("evaluation_interval",),
    "debugging": ("seed",),
}


class ConfigFileError(ValueError):
    """A config file (or override) that does not fit the schema; the message names file, key path and fix."""


def section_keys(section: str) -> list[str]:
    """The keys a builder section accepts: the builder's keyword arguments (+ Ragen's under ``training``)."""
    params = [p for p in inspect.signature(getattr(AlgorithmConfig, section)).parameters if p != "self"]
    if section == "environment":
        return [*params, *ENV_KEYS]
    return [*HYPERPARAMS, *params] if section == "training" else params


def load_tree(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """The composed, overridden and checked tree of sections (plain dicts and lists)."""
    from omegaconf import OmegaConf

    path = Path(path)
    merged = OmegaConf.merge(_compose(path, ()), OmegaConf.from_dotlist(list(overrides)))
    tree = OmegaConf.to_container(merged, resolve=True)
    check_tree(tree, f"{path}" + (f" (with overrides {list(overrides)})" if overrides else ""))
    return tree


def _compose(path: Path, chain: tuple[Path, ...]):
    from omegaconf import OmegaConf

    if not path.is_file():
        raise ConfigFileError(f"config file {path} does not exist" + (f" (named by {chain[-1]})" if chain else ""))
    if path.resolve() in chain:
        raise ConfigFileError(f"{path}: '{BASES}' makes a cycle: {' -> '.join(map(str, chain))} -> {path}")
    node = OmegaConf.load(path)
    if not OmegaConf.is_dict(node):
        raise ConfigFileError(f"{path}: a config is a mapping of sections, not a {type(node).__name__}")
    bases = node.pop(BASES, []) if BASES in node else []
    if not OmegaConf.is_list(bases) and not isinstance(bases, list):
        raise ConfigFileError(f"{path}: '{BASES}' must be a list of base files, not {bases!r}")
    parts = [_compose(path.parent / str(b), (*chain, path.resolve())) for b in bases]
    return OmegaConf.merge(*parts, node)


def check_tree(tree: Any, where: str) -> None:
    """Reject unknown sections and keys and badly typed ``training``/``run`` values (naming the key path)."""
    if not isinstance(tree, dict):
        raise ConfigFileError(f"{where}: a config is a mapping of sections, not {type(tree).__name__}")
    known = [*SECTIONS, "run", *FREE_SECTIONS]
    for section, body in tree.items():
        if section not in known:
            raise ConfigFileError(f"{where}: section {section!r} is unknown{_nearest(section, known)}")
        if section in FREE_SECTIONS:
            continue
        if not isinstance(body, dict):
            raise ConfigFileError(f"{where}: section {section!r} must be a mapping of keys, not {body!r}")
        keys = list(RUN_KEYS) if section == "run" else section_keys(section)
        for key, value in body.items():
            if key not in keys:
                raise ConfigFileError(f"{where}: {section}.{key}={value!r} is unknown{_nearest(key, keys)}")
            why = _why_bad(section, key, value)
            if why:
                raise ConfigFileError(f"{where}: {section}.{key}={value!r} is invalid: {why}")


def _why_bad(section: str, key: str, value: Any) -> str | None:
    if section == "training" and key in HYPERPARAMS:
        return check_value(key, value)
    if section == "run" and value is not None and not isinstance(value, RUN_KEYS[key]):
        return f"use a value of type {RUN_KEYS[key].__name__}"
    return None


def _nearest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=3)
    return f"; did you mean {', '.join(map(repr, close))}?" if close else f"; known: {sorted(choices)}"


def apply_tree(config, tree: dict[str, Any]):
    """Call each builder section on ``config`` in order; keep ``run`` and ``tune`` on ``config.run_settings``
    / ``config.tune_settings``. Returns ``config``."""
    for section in SECTIONS:
        if tree.get(section):
            getattr(config, section)(**tree[section])
    config.run_settings = dict(tree.get("run") or {})
    config.tune_settings = dict(tree.get("tune") or {})
    return config


def dump_tree(config) -> dict[str, Any]:
    """The sections that reproduce ``config`` (every Ragen hyperparameter, the RLlib keys of :data:`DUMPED`)."""
    tree: dict[str, Any] = {}
    for section, keys in DUMPED.items():
        names = [*HYPERPARAMS, *keys] if section == "training" else list(keys)
        tree[section] = {k: _plain(getattr(config, k)) for k in names}
    tree["rl_module"]["model_config"] = _plain(dict(config.model_config or {}))
    if getattr(config, "run_settings", None):
        tree["run"] = _plain(config.run_settings)
    if getattr(config, "tune_settings", None):
        tree["tune"] = _plain(config.tune_settings)
    return tree


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
