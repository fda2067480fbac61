"""ragen-rllib: multi-turn LLM agents trained with RL (RAGEN's StarPO) as a Ray RLlib plugin.

Public API: ``from ragen_rllib import RagenConfig, Ragen, init_ray``. Everything else by its full path.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Ragen", "RagenConfig", "init_ray"]


def __getattr__(name: str):
    # Lazy: importing the package must not import Ray/RLlib (envs and the agent layer work without them).
    if name == "init_ray":
        from ragen_rllib.run.ray_init import init_ray

        return init_ray
    if name in __all__:
        from ragen_rllib.algorithms.ragen import ragen

        return getattr(ragen, name)
    raise AttributeError(f"module 'ragen_rllib' has no attribute {name!r}")
