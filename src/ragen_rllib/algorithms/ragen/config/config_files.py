"""YAML config files for :class:`~.ragen_config.RagenConfig`.

A file's top-level sections are RagenConfig's builder methods (``environment``, ``multi_agent``, ``env_runners``,
``learners``, ``rl_module``, ``training``, ``evaluation``, ``fault_tolerance``, ``reporting``, ``checkpointing``,
``resources``, ``framework``, ``debugging``), each a mapping of that method's keyword arguments, plus ``run``
(``stop``: Tune's stop dict, ``checkpoint_every``: iterations, ``out_dir``,
``loggers``, ``ray_init``: keyword arguments of ``ray.init``, e.g. a ``runtime_env``; ``storage_path``: where
Tune keeps trials and checkpoints, a directory every node reaches or a ``s3://``-style URI; ``max_failures``: how
often Tune restarts a failed trial from its last checkpoint) and ``tune`` (free-form,
for sweeps). ``defaults: [base.yaml, ...]`` names files (relative to this
one) that the file extends: they are merged first, in order, then the file, then the OmegaConf dotlist
``overrides`` (``["training.lr=1e-5"]``).

Everything is checked before any actor starts: an unknown section or key names the file, the key path, the
value and the nearest valid keys; a ``training`` value is checked against its declared type and choices
(:mod:`.hyperparams`). ``to_yaml`` writes a file that loads back to an equal config: every setting a file can
hold, with no hand-kept list (:func:`dump_tree`).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import warnings
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS, check_value

#: the builder methods a file's sections call, in this order (RLlib's own names and keyword arguments)
SECTIONS = ("environment", "multi_agent", "env_runners", "learners", "rl_module", "training", "evaluation",
            "fault_tolerance", "reporting", "checkpointing", "resources", "framework", "debugging")
RUN_KEYS = {"stop": dict, "checkpoint_every": int, "out_dir": str, "loggers": list, "ray_init": dict,
            "storage_path": str, "max_failures": int}
FREE_SECTIONS = ("tune",)
BASES = "defaults"  # the list of base files a file extends
ENV_KEYS = ("env_tags", "val_env_tags", "env_modules")  # Ragen's own environment() keys (multi-env runs)
MULTI_AGENT_KEYS = ("agent_to_module", "scripted_agents")  # Ragen's own multi_agent() keys
#: Ragen's own keys of each section (always written by dump_tree)
OWN_KEYS = {"environment": ENV_KEYS, "multi_agent": MULTI_AGENT_KEYS}
#: builder keyword -> the config attribute that holds it, where RLlib names the two apart
ATTRIBUTE = {"framework": "framework_str"}
#: YAML's scalar types (plus lists and mappings of them): what a config file can hold
_SCALARS = (type(None), bool, int, float, str)


class ConfigFileError(ValueError):
    """A config file (or override) that does not fit the schema; the message names file, key path and fix."""


def section_keys(section: str) -> list[str]:
    """The keys a builder section accepts: the builder's keyword arguments that a config holds as a readable
    setting (RLlib's deprecated aliases are left out, so a file naming one is told the current key), plus Ragen's
    (its multi-env keys under ``environment``, its hyperparameters under ``training``)."""
    params = [p for p in inspect.signature(getattr(AlgorithmConfig, section)).parameters
              if p not in ("self", "kwargs") and _readable(p)]
    if section in OWN_KEYS:
        return [*params, *OWN_KEYS[section]]
    return [*HYPERPARAMS, *params] if section == "training" else params


@functools.cache
def _readable(key: str) -> bool:
    return _read(_rllib_defaults(), key)[0]


@functools.cache
def _rllib_defaults() -> AlgorithmConfig:
    return AlgorithmConfig()


def _read(config, key: str) -> tuple[bool, Any]:
    """``(True, value)`` of a builder keyword on ``config``; ``(False, None)`` where no setting holds it (a
    deprecated alias raises when read)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return True, getattr(config, ATTRIBUTE.get(key, key))
        except Exception:  # noqa: BLE001 - RLlib's deprecation shims raise ValueError or DeprecationWarning
            return False, None


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
    """The sections that reproduce ``config``: every Ragen hyperparameter and multi-env key (so a resumed run keeps
    them even if a default changes), and every RLlib builder setting whose value differs from a fresh config's.
    Raises :class:`ConfigFileError` naming the key when such a setting cannot be written to YAML (a class, a
    function): nothing is dropped silently."""
    default = type(config)()
    tree: dict[str, Any] = {}
    for section in SECTIONS:
        body = {}
        for key in section_keys(section):
            value = _read(config, key)[1]
            ours = (section == "training" and key in HYPERPARAMS) or key in OWN_KEYS.get(section, ())
            if section == "multi_agent":
                value = _multi_agent_value(config, key, value)
            if ours or not _same(value, _read(default, key)[1]):
                body[key] = _plain(value, f"{section}.{key}")
        if body:
            tree[section] = body
    if getattr(config, "run_settings", None):
        tree["run"] = _plain(config.run_settings, "run")
    if getattr(config, "tune_settings", None):
        tree["tune"] = _plain(config.tune_settings, "tune")
    return tree


def _multi_agent_value(config, key: str, value: Any) -> Any:
    """RLlib's multi-agent settings as a file holds them: ``policies`` as their ids (every module is a Ragen module
    built from the run's model settings); a ``policy_mapping_fn`` that ``agent_to_module`` made as the default (the
    file's ``agent_to_module`` makes it again)."""
    from ray.rllib.policy.policy import PolicySpec

    from ragen_rllib.core.modules import AgentToModule

    if key == "policies" and isinstance(value, dict) and all(spec == PolicySpec() for spec in value.values()):
        return value if set(value) == set(_rllib_defaults().policies) else sorted(value)
    if key == "policy_mapping_fn" and value == AgentToModule(config.agent_to_module):
        return _read(_rllib_defaults(), key)[1]
    return value


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. arrays: compare what YAML would hold
        return repr(a) == repr(b)


def _plain(value: Any, where: str) -> Any:
    """``value`` as YAML types (tuples become lists); a value YAML cannot hold raises, naming its key path."""
    if isinstance(value, dict):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, _SCALARS):
        return value
    raise ConfigFileError(f"{where}={value!r} cannot be written to a config file ({type(value).__name__} is not a "
                          "YAML value): set it in Python after loading the file, or give it as a string the builder "
                          "accepts (an import path such as 'my_pkg.envs:MyEnv' for `env`)")
