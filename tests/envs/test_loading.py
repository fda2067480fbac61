"""Making envs from ids, gymnasium's module:Id form, class import paths, and user env modules."""

import importlib
import sys

import gymnasium as gym
import pytest

from ragen_rllib.envs.games.frozen_lake import FrozenLakeEnv
from ragen_rllib.envs.loading import MOVED_MODULES, import_env_modules, make_env, resolve_env

MODULE = '''
import gymnasium as gym
from ragen_rllib.envs.games.frozen_lake import FrozenLakeEnv

class TinyLake(FrozenLakeEnv):
    pass

gym.register(id="user/TinyLake-v0", entry_point=TinyLake, disable_env_checker=True)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    name = f"user_envs_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    gym.registry.pop("user/TinyLake-v0", None)


def test_ids_and_class_paths_make_envs():
    assert isinstance(make_env("ragen/FrozenLake-v0", {"size": 4}).unwrapped, FrozenLakeEnv)
    env = make_env("ragen_rllib.envs.games.frozen_lake:FrozenLakeEnv", {"size": 3})
    assert isinstance(env, FrozenLakeEnv) and env.reset(seed=1)[0]


def test_env_modules_register_user_envs(user_module):
    with pytest.raises(ValueError, match=r"'user/TinyLake-v0' is not a registered gymnasium id.*env_modules"):
        resolve_env("user/TinyLake-v0")
    import_env_modules([user_module])
    assert type(make_env("user/TinyLake-v0", {"size": 4}).unwrapped).__name__ == "TinyLake"
    assert resolve_env(f"{user_module}:user/TinyLake-v0") == "user/TinyLake-v0"  # gymnasium's module:Id


@pytest.mark.parametrize("env, match", [
    ("no_such_pkg_xyz:Env", r"cannot import 'no_such_pkg_xyz'"),
    ("ragen_rllib.envs.games.frozen_lake:Nope", r"has no env class or registered id 'Nope'"),
    ("ragen/FrozenLak-v0", r"did you mean 'ragen/FrozenLake-v0'"),
])
def test_bad_envs_are_named(env, match):
    with pytest.raises(ValueError, match=match):
        resolve_env(env)


def test_an_env_registered_in_the_driver_only_is_caught_before_any_runner_with_the_fix(user_module):
    """gymnasium.register in the user's own process: the driver knows the id, a fresh process (an env runner)
    does not. validate() says so and names the fix; the same id registered by an env module passes."""
    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.loading import unregistered_in_runners

    gym.register(id="user/DriverOnly-v0", entry_point=FrozenLakeEnv, disable_env_checker=True)
    try:
        assert unregistered_in_runners(["user/DriverOnly-v0", "ragen/FrozenLake-v0"], []) == ["user/DriverOnly-v0"]
        config = RagenConfig().environment("user/DriverOnly-v0", env_config={"size": 4})
        with pytest.raises(ValueError, match=r"env 'user/DriverOnly-v0' is registered in this process only.*"
                                             r"environment.env_modules=\[\].*env='your_module:user/DriverOnly-v0'"):
            config.validate()
    finally:
        gym.registry.pop("user/DriverOnly-v0", None)
    assert unregistered_in_runners(["user/TinyLake-v0"], [user_module]) == []  # its module registers it
    RagenConfig().environment("user/TinyLake-v0", env_config={"size": 4}, env_modules=[user_module]).validate()


def test_a_tool_env_with_thinking_off_is_refused_before_any_runner():
    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.loading import env_offers_tools

    assert env_offers_tools("ragen/SearchQA-v0") and env_offers_tools("ragen_rllib.envs.tools.search_qa:SearchQAEnv")
    assert not env_offers_tools("ragen/FrozenLake-v0")
    config = RagenConfig().environment("ragen/SearchQA-v0").training(enable_think=False)
    with pytest.raises(ValueError, match=r"'ragen/SearchQA-v0' offers tools, which need enable_think=True.*"
                                         r"\.training\(enable_think=True\)"):
        config.validate()
    RagenConfig().environment("ragen/SearchQA-v0").training(enable_think=True).validate()


def test_an_env_path_from_before_the_envs_were_sorted_by_kind_names_its_new_path():
    with pytest.raises(ValueError, match=r"env='ragen_rllib.envs.tictactoe:TicTacToeEnv'.*"
                                         r"use env='ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv'"):
        resolve_env("ragen_rllib.envs.tictactoe:TicTacToeEnv")
    for new in MOVED_MODULES.values():
        importlib.import_module(new)  # every new path exists


@pytest.mark.parametrize("name, expected", [
    ("SimpleSokoban", ("ragen/Sokoban-v0", {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100,
                                            "search_depth": 300})),
    ("FrozenLake", ("ragen/FrozenLake-v0", {"size": 4, "p": 0.9, "success_rate": 0.8, "is_slippery": True})),
    ("frozenlake", ("ragen/FrozenLake-v0", {})),
    ("searchqa", ("ragen/SearchQA-v0", {})),
    ("ragen/Sudoku-v0", ("ragen/Sudoku-v0", {})),
    ("ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv",
     ("ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv", {})),
    ("http://127.0.0.1:8000", ("http://127.0.0.1:8000", {})),
])
def test_an_env_name_has_one_reading(name, expected):
    from ragen_rllib.envs.loading import resolve_env_name
    from ragen_rllib.models.warm_start import resolve_env as warm_start_env

    assert resolve_env_name(name) == expected == warm_start_env(name)


def test_an_unknown_name_lists_what_is_known_and_the_config_points_at_the_id():
    from ragen_rllib.envs.loading import resolve_env_name

    with pytest.raises(ValueError, match=r"env 'Frozen' is not known: .*'SimpleSokoban'.*'frozenlake'"):
        resolve_env_name("Frozen")
    with pytest.raises(ValueError, match=r"a name for env='ragen/Sokoban-v0'\)"):
        resolve_env("sokoban")  # a config's env takes the id


def test_no_other_module_resolves_env_names():
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "ragen_rllib"
    spellings = ('rsplit("-v", 1)', "def resolve_env_id", "RAGEN_TAGS[name].env")
    found = sorted(f"{p.relative_to(src)}: {s}" for p in src.rglob("*.py") for s in spellings
                   if s in p.read_text() and p.name != "loading.py")
    assert found == []
