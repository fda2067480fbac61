"""``ray.init`` the RAGEN way: user keyword arguments pass straight through (RAGEN's ``ray_kwargs.ray_init``),
and ``runtime_env.env_vars`` start from RAGEN's defaults, which user values override.

A Ray that :func:`init_ray` starts itself (no ``address`` given, no ``RAY_ADDRESS``) stays on this machine: every
Ray process listens on and advertises 127.0.0.1 only, the dashboard is on at http://127.0.0.1:8265, the cluster's
token-authentication secret lives in a file of its own under Ray's temp dir (not in ``~/.ray``), and a reaper ends
Ray's processes if the driver dies without shutting Ray down (:mod:`ragen_rllib.run.ray_reaper`). Joining a cluster
(``address=...``) leaves all of that to the cluster.
"""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from ragen_rllib.core.threads import CPU_ENV_VARS, OMP_DEFAULTED

logger = logging.getLogger(__name__)

#: Env vars every Ray worker gets unless the user sets them (RAGEN's defaults, plus the CPU thread fix).
DEFAULT_ENV_VARS: dict[str, str] = {
    "TOKENIZERS_PARALLELISM": "true",  # RAGEN's default
    "NCCL_DEBUG": "WARN",  # RAGEN's default
    "VLLM_LOGGING_LEVEL": "WARN",  # RAGEN's default
}
#: The only address a Ray started here listens on and advertises (dashboard included), unless the user names one.
LOOPBACK = "127.0.0.1"
#: Ray's switch between a loopback-only node (its mode on macOS / Windows) and a cluster node (Linux's default).
LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: ``RAGEN_RLLIB_DASHBOARD=0`` turns the dashboard off for every Ray started here (as ``include_dashboard=False``).
DASHBOARD_SWITCH = "RAGEN_RLLIB_DASHBOARD"
#: Ray's token-authentication variables (Ray 2.60 turns token auth on for a new local Ray).
AUTH_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
#: The longest Unix socket path a local Ray's dashboard opens under its temp dir (one socket per dashboard module;
#: the session name holds the start time and the pid), and Linux's limit on such a path.
DASHBOARD_SOCKET_TAIL = "session_2026-12-05_18-03-34_331055_4194304/sockets/dash_MetricsHead"
UNIX_SOCKET_PATH_MAX = 107


def joins_cluster(ray_kwargs: dict[str, Any]) -> bool:
    """Whether ``ray.init`` would connect to a running Ray (``address`` or ``RAY_ADDRESS``) instead of starting one."""
    return bool(ray_kwargs.get("address") or os.environ.get("RAY_ADDRESS"))


def ray_init_kwargs(**ray_kwargs: Any) -> dict[str, Any]:
    """The arguments :func:`init_ray` passes to ``ray.init`` (defaults merged under the user's values)."""
    from ragen_rllib.core.device import device_type

    kwargs = dict(ray_kwargs)
    runtime_env = dict(kwargs.pop("runtime_env", None) or {})
    env_vars = dict(DEFAULT_ENV_VARS)
    user_vars = runtime_env.get("env_vars") or {}
    if device_type() == "cpu":  # a machine without a GPU
        env_vars.update(CPU_ENV_VARS)
        if "OMP_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in user_vars:
            env_vars[OMP_DEFAULTED] = "1"
    for key in ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM"):  # the caller's own environment wins
        if key in os.environ:
            env_vars[key] = os.environ[key]
    env_vars.update(user_vars)
    runtime_env["env_vars"] = {k: str(v) for k, v in env_vars.items()}
    kwargs["runtime_env"] = runtime_env
    if not joins_cluster(kwargs):
        asked = "include_dashboard" in kwargs
        kwargs.setdefault("include_dashboard", os.environ.get(DASHBOARD_SWITCH, "1") != "0")
        kwargs.setdefault("dashboard_host", LOOPBACK)
        temp = os.path.abspath(kwargs.get("_temp_dir") or os.path.join(tempfile.gettempdir(), "ray"))
        longest = len(os.path.join(temp, DASHBOARD_SOCKET_TAIL))
        if kwargs["include_dashboard"] and longest > UNIX_SOCKET_PATH_MAX:
            why = (f"the dashboard's Unix sockets under _temp_dir={temp!r} would be {longest} bytes long, over "
                   f"Linux's {UNIX_SOCKET_PATH_MAX} (Ray then fails to start: 'Module MetricsHead failed to start')")
            if asked:
                raise ValueError(f"include_dashboard=True: {why}; use a shorter _temp_dir (e.g. /tmp/ray) or "
                                 "include_dashboard=False")
            logger.warning("dashboard off: %s; a shorter _temp_dir (e.g. /tmp/ray) keeps it on", why)
            kwargs["include_dashboard"] = False
    return kwargs


def keep_on_loopback() -> None:
    """Make the Ray this process starts listen on and advertise 127.0.0.1 only.

    Ray 2.60 rewrites ``_node_ip_address="127.0.0.1"`` to the machine's network address and then binds its gRPC
    servers to every interface. Its loopback-only mode (the one it uses on macOS and Windows) is the only way to keep
    them on 127.0.0.1: the variable reaches the processes Ray starts, and the module constant is set here because
    Ray read the variable once, when it was imported. A user who set the variable keeps their value.
    """
    if os.environ.get(LOOPBACK_SWITCH) is not None:
        return
    os.environ[LOOPBACK_SWITCH] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # private: see the docstring (no public switch in Ray 2.60)


def local_auth_token(temp_dir: str | None) -> None:
    """Give a new local Ray its token-authentication secret: a fresh token in a file of its own (mode 0600) under
    ``temp_dir`` (Ray's ``_temp_dir``, else the system temp dir), named by ``RAY_AUTH_TOKEN_PATH`` for every Ray
    process it starts, so Ray does not write one to ``~/.ray/auth_token``. The dashboard asks for this token.
    A token the user set up (the variables, or their own ``~/.ray/auth_token``) and ``RAY_AUTH_MODE=disabled`` are
    left as they are."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled" or any(os.environ.get(v) for v in AUTH_VARS):
        return
    if (Path.home() / ".ray" / "auth_token").is_file():
        return
    path = Path(temp_dir or tempfile.gettempdir()) / f"ragen_rllib_auth_token_{os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(secrets.token_hex(32))
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)


def init_ray(**ray_kwargs: Any):
    """Start (or join) Ray with RAGEN's env-var defaults; e.g. ``init_ray(num_cpus=16, _temp_dir=...)``.

    A Ray started here stays on 127.0.0.1 (see the module docstring) unless ``_node_ip_address`` names another
    address; ``include_dashboard=False`` turns the dashboard off. Returns ``ray.init``'s context (its
    ``dashboard_url`` is ``host:port``, or empty without a dashboard); a no-op returning None when Ray is already up.
    """
    import ray

    if ray.is_initialized():
        return None
    kwargs = ray_init_kwargs(**ray_kwargs)
    local = not joins_cluster(kwargs)
    if local:
        if "_node_ip_address" not in kwargs:
            keep_on_loopback()
        local_auth_token(kwargs.get("_temp_dir"))
    context = ray.init(**kwargs)
    if local:
        from ragen_rllib.run.ray_reaper import start_reaper

        start_reaper(os.getpid())
    return context
