"""Introspection of the registered text environments: ids, config keys and defaults."""

from __future__ import annotations

import inspect

import gymnasium as gym

from ragen_rllib.envs import BUILTIN_ENVS


def env_class(env_id: str) -> type:
    """The class behind a registered gymnasium id."""
    entry = gym.spec(env_id).entry_point
    if isinstance(entry, str):
        module, name = entry.split(":")
        return getattr(__import__(module, fromlist=[name]), name)
    return entry


def config_defaults(env_id: str) -> dict:
    """env_config keys of an env and their defaults (from its ``__init__`` signature)."""
    params = inspect.signature(env_class(env_id).__init__).parameters
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {
        name: p.default for name, p in params.items() if name not in ("self", "render_mode") and p.kind in kinds
    }


def describe_envs() -> str:
    """One line per built-in env: id and its env_config keys with defaults."""
    lines = []
    for env_id in BUILTIN_ENVS:
        keys = ", ".join(f"{k}={v!r}" for k, v in config_defaults(env_id).items())
        lines.append(f"{env_id}: {keys}")
    return "\n".join(lines)
