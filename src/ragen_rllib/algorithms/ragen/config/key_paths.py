"""Dotted config key paths (``training.lr``, ``environment.env_config.size``) and grouped settings: checked against
the config file schema (the nearest valid key named), set on a config, and applied as a sweep's grouped setting
(``{name: ..., preset: ..., section.key: value}``, see :mod:`ragen_rllib.sweep.space`)."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import Any

from ragen_rllib.algorithms.ragen.config.config_files import ATTRIBUTE, SECTIONS, section_keys

VARIANT = "variant"  # the param_space key of grouped settings (applied by RagenConfig.update_from_dict)
PRESET = "preset"  # a grouped setting's algorithm preset (RagenConfig.preset), applied before its other keys


def variant_axis(path: str) -> str | None:
    """The axis of a grouped-settings key: ``variant`` -> ``""``, ``variant.algo`` -> ``"algo"``; else None."""
    if path == VARIANT:
        return ""
    return path[len(VARIANT) + 1:] if path.startswith(VARIANT + ".") and len(path) > len(VARIANT) + 1 else None

def check_path(path: str, config) -> tuple[str, list[str]]:
    """``(section, [key, subkey...])`` of a dotted key path, or ValueError naming the nearest valid key."""
    section, _, rest = path.partition(".")
    if section not in SECTIONS or not rest:
        close = difflib.get_close_matches(section, SECTIONS, n=1)
        raise ValueError(f"tune.param_space: {path!r} is not a config key path; use section.key with a section "
                         f"of {list(SECTIONS)}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    keys = rest.split(".")
    known = section_keys(section)
    if keys[0] not in known:
        close = difflib.get_close_matches(keys[0], known, n=3)
        raise ValueError(f"tune.param_space: {path!r}: {section}.{keys[0]} is not a config key"
                         + (f"; did you mean {', '.join(f'{section}.{c}' for c in close)}?" if close else ""))
    if keys[0] == "env_config" and len(keys) > 1 and isinstance(config.env, str):
        from ragen_rllib.envs import BUILTIN_ENVS
        from ragen_rllib.envs.catalog import config_defaults

        if config.env in BUILTIN_ENVS and keys[1] not in config_defaults(config.env):
            env_keys = list(config_defaults(config.env))
            close = difflib.get_close_matches(keys[1], env_keys, n=3)
            raise ValueError(f"tune.param_space: {path!r}: {config.env} takes no env_config key {keys[1]!r}; "
                             + (f"did you mean {close}?" if close else f"its keys are {env_keys}"))
    return section, keys


def set_path(config, path: str, value: Any) -> None:
    """Set a dotted key path on a config (nested dicts such as env_config are copied, not shared)."""
    _, keys = check_path(path, config)
    if len(keys) == 1:
        setattr(config, ATTRIBUTE.get(keys[0], keys[0]), value)
        return
    root = copy.deepcopy(dict(getattr(config, keys[0]) or {}))
    node = root
    for key in keys[1:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    setattr(config, keys[0], root)


def apply_variant(config, variant: Mapping[str, Any]) -> None:
    """Apply one grouped setting (``{name: ..., preset: ..., section.key: value, ...}``; ``name`` labels it,
    ``preset`` names an algorithm preset applied first)."""
    if PRESET in variant:
        config.preset(variant[PRESET])
    for path, value in variant.items():
        if path not in ("name", PRESET):
            set_path(config, path, value)
