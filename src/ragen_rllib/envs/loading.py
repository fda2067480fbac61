"""Making an env from a config: a registered gymnasium id (``ragen/FrozenLake-v0``), gymnasium's
``module:Id`` form, or an import path of a class (``my_pkg.envs:MyEnv``), after importing the modules that
register user envs (``environment.env_modules``). Used by the driver (to check a config before any actor starts)
and by every env runner (whose process has its own gymnasium registry)."""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

#: Built-in env modules by their paths before the envs were sorted by kind (games, tools, multi-agent): an import
#: path saved with an old name gets the new one in its error.
MOVED_MODULES = {f"ragen_rllib.envs.{name}": f"ragen_rllib.envs.{kind}.{name}" for kind, names in {
    "games": ("bandit", "countdown", "frozen_lake", "game_2048", "metamathqa", "rubiks_cube", "sokoban", "sudoku"),
    "tools": ("bfcl", "search_qa"),
    "multi_agent": ("guided_lake", "solver_verifier", "tictactoe"),
}.items() for name in names}


def import_env_modules(modules: Iterable[str], key: str = "env_modules") -> None:
    """Import each module (they register envs with ``gymnasium.register`` when imported)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise ValueError(f"{key}: cannot import {name!r} ({err}); put it on the Python path here and, for "
                             "remote env runners, on theirs (e.g. Ray's runtime_env py_modules or working_dir)") \
                from err


def resolve_env_name(name: str) -> tuple[str, dict]:
    """The one reading of an env name a person types (``ragen-rllib serve-env``, warm starts, benchmarks):
    ``(env, settings)``. A RAGEN tag (``SimpleSokoban``, ``FrozenLake``): its env id and settings. A built-in's
    short name, case-insensitive (``sokoban``, ``frozenlake``): its id and no settings. A registered id,
    gymnasium's ``module:Id``, a class import path or a server URL: itself. The caller lays the user's own
    env_config over ``settings``. Anything else: ValueError listing what is known."""
    import ragen_rllib.envs  # noqa: F401  (registers the built-in envs)
    from ragen_rllib.envs import BUILTIN_ENVS
    from ragen_rllib.envs.remote.served import is_url
    from ragen_rllib.envs.tags import RAGEN_TAGS

    if name in RAGEN_TAGS:
        return RAGEN_TAGS[name].env, dict(RAGEN_TAGS[name].env_config)
    short = {env_id.split("/")[-1].rsplit("-v", 1)[0].lower(): env_id for env_id in BUILTIN_ENVS}
    if name.lower() in short:
        return short[name.lower()], {}
    if name in gym.registry or ":" in name or is_url(name):
        return name, {}
    raise ValueError(f"env {name!r} is not known: use a registered gymnasium id, a RAGEN tag {sorted(RAGEN_TAGS)}, "
                     f"a built-in's short name {sorted(short)}, an import path 'my_pkg.envs:MyEnv' or a server URL")


def resolve_env(env: str) -> str | type:
    """The registered id, or the class an import path names (an env server's URL: :class:`ServedEnv`);
    ValueError (with the known ids) otherwise."""
    import ragen_rllib.envs  # noqa: F401  (registers the built-in envs)
    from ragen_rllib.envs.remote.served import ServedEnv, is_url

    if is_url(env):
        return ServedEnv
    if env in gym.registry:
        return env
    if ":" in env:
        module_name, name = env.split(":", 1)
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            moved = MOVED_MODULES.get(module_name)
            fix = f"; that module is now {moved!r}: use env={moved + ':' + name!r}" if moved else ""
            raise ValueError(f"env={env!r}: cannot import {module_name!r} ({err}){fix}") from err
        if name in gym.registry:  # gymnasium's "module:Id": the module registers the id
            return name
        obj = getattr(module, name, None)
        if isinstance(obj, type):
            return obj
        raise ValueError(f"env={env!r}: {module_name!r} has no env class or registered id {name!r}")
    ours = sorted(k for k in gym.registry if k.startswith("ragen/"))
    close = difflib.get_close_matches(env, list(gym.registry), n=3)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    try:
        named, settings = resolve_env_name(env)
        hint = f" (a name for env={named!r}" + (f" with env_config {settings}; or name it in env_tags)" if settings
                                                 else ")")
    except ValueError:
        pass
    raise ValueError(f"env={env!r} is not a registered gymnasium id{hint}; the built-in ones are {ours}; register "
                     "your own with gymnasium.register in a module named in environment.env_modules, or give an "
                     "import path 'my_pkg.envs:MyEnv'")


def multi_agent_class(env: str) -> type | None:
    """The class of the turn-based multi-agent env that ``env`` names (an import path); None for any other env."""
    from ragen_rllib.envs.multi_agent.turn_based import is_multi_agent

    resolved = resolve_env(env)
    return resolved if isinstance(resolved, type) and is_multi_agent(resolved) else None


def unregistered_in_runners(envs: Iterable[str], modules: Iterable[str]) -> list[str]:
    """The plain gymnasium ids among ``envs`` that a fresh process does not know after importing the built-in envs
    and ``modules`` (the driver's ``sys.path``): what an env runner, a process of its own, would fail to make.

    An id registered with ``gymnasium.register`` in the driver's script only passes :func:`resolve_env` there;
    this asks a fresh Python process instead (built-in ``ragen/`` ids, ``module:Id`` forms and class import paths
    are known to the runners by construction and are not asked about)."""
    ids = sorted({e for e in envs if ":" not in e and not e.startswith("ragen/")})
    if not ids:
        return []
    probe = ("import importlib, json, sys\nimport gymnasium as gym\nimport ragen_rllib.envs\n"
             "for m in sys.argv[2:]:\n    importlib.import_module(m)\n"
             "print(json.dumps([i for i in json.loads(sys.argv[1]) if i not in gym.registry]))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", probe, json.dumps(ids), *modules], capture_output=True, text=True,
                          env=env, timeout=120)
    if proc.returncode != 0:
        raise ValueError(f"checking that the env runners can make {ids} failed in a fresh Python process: "
                         f"{proc.stderr.strip()[-600:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: Keyword arguments ``gymnasium.make`` takes itself (not passed to the env's constructor).
_MAKE_KWARGS = frozenset({"max_episode_steps", "autoreset", "apply_api_compatibility", "disable_env_checker"})


def check_env_config(env: str, env_config: Mapping[str, Any] | None) -> None:
    """ValueError unless ``env`` resolves and takes every key of ``env_config`` (the parameters of its class
    or creator; any key when it takes ``**kwargs``), naming the unknown key, the nearest valid ones and all."""
    target = resolve_env(env)
    if isinstance(target, type):
        creator, preset = target, {}
    else:
        spec = gym.spec(target)
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
        preset = dict(spec.kwargs or {})
    try:
        params = inspect.signature(creator).parameters
    except (TypeError, ValueError):  # a builtin or C creator: nothing to check against
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    valid = {name for name, p in params.items()
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)} - {"self"}
    valid |= set(preset) | _MAKE_KWARGS
    for key in dict(env_config or {}):
        if key not in valid:
            close = difflib.get_close_matches(str(key), sorted(valid), n=3)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            name = getattr(creator, "__name__", str(creator))
            raise ValueError(f"env_config key {key!r} is not a parameter of {env!r} ({name}){hint}; it takes "
                             f"{sorted(valid - _MAKE_KWARGS)}: drop or rename the key")


def env_offers_tools(env: str) -> bool:
    """The env class behind ``env`` (an id or import path) declares tools (a
    :class:`~ragen_rllib.envs.tools.tool_env.ToolEnv` or any class with a non-empty ``tools`` attribute)."""
    target = resolve_env(env)
    if not isinstance(target, type):
        target = load_env_creator(gym.spec(target).entry_point) if isinstance(gym.spec(target).entry_point, str) \
            else gym.spec(target).entry_point
    from ragen_rllib.envs.tools.tool_env import ToolEnv

    return bool(getattr(target, "tools", None)) or (isinstance(target, type) and issubclass(target, ToolEnv))


def make_env(env: str, env_config: Mapping[str, Any] | None = None) -> gym.Env:
    """An env instance from an id or import path (see :func:`resolve_env`)."""
    from ragen_rllib.envs.remote.served import ServedEnv, is_url

    target = resolve_env(env)
    kwargs = dict(env_config or {})
    if is_url(env):
        return ServedEnv(url=env, **kwargs)
    return target(**kwargs) if isinstance(target, type) else gym.make(target, **kwargs)
