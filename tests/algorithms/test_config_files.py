"""YAML configs: every shipped file validates, composition and overrides, a round trip, and bad input named."""

from pathlib import Path

import pytest
import yaml

from ragen_rllib import RagenConfig
from ragen_rllib.algorithms.ragen.config_files import ConfigFileError
from ragen_rllib.algorithms.ragen.presets import PRESETS

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = sorted(CONFIGS.rglob("*.yaml"))


def test_configs_are_shipped_for_every_tag_preset_and_run():
    names = {p.relative_to(CONFIGS).as_posix() for p in SHIPPED}
    for tag in ("simple_sokoban", "coord_sokoban", "larger_sokoban", "frozenlake", "coord_frozenlake", "bandit",
                "countdown", "metamathqa", "sudoku", "2048", "rubiks_cube_2x2"):
        assert f"envs/{tag}.yaml" in names
    assert {f"algorithms/{p}.yaml" for p in PRESETS} <= names
    assert {"runs/sokoban_ppo.yaml", "runs/frozenlake_grpo_cpu.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(CONFIGS).as_posix())
def test_every_shipped_config_validates(path):
    config = RagenConfig.from_yaml(path)
    config.rl_module(model_config={**config.model_config, "model": "tiny:nano"})
    if "environment" not in yaml.safe_load(path.read_text()) and "defaults" not in path.read_text():
        config.environment("ragen/FrozenLake-v0")  # a preset file names no env
    config.validate()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_files_equal_the_presets(name):
    from_file = RagenConfig.from_yaml(CONFIGS / "algorithms" / f"{name}.yaml")
    from_code = RagenConfig().preset(name)
    assert from_file.to_yaml() == from_code.to_yaml()


def test_runs_compose_env_and_algorithm_and_keep_run_settings():
    c = RagenConfig.from_yaml(CONFIGS / "runs" / "sokoban_ppo.yaml")
    assert c.env == "ragen/Sokoban-v0" and c.env_config["num_boxes"] == 1 and c.adv_estimator == "gae"
    assert c.run_settings == {"stop": {"training_iteration": 200}, "checkpoint_every": 20,
                              "out_dir": "runs/sokoban_ppo"}
    coord = RagenConfig.from_yaml(CONFIGS / "envs" / "coord_sokoban.yaml")  # extends simple_sokoban
    assert coord.env_config == {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300,
                                "observation_format": "grid_coord"}


def test_dotlist_overrides_win():
    c = RagenConfig.from_yaml(CONFIGS / "runs" / "frozenlake_grpo_cpu.yaml",
                              overrides=["training.lr=1e-5", "environment.env_config.size=6", "debugging.seed=3"])
    assert (c.lr, c.env_config["size"], c.seed, c.adv_estimator) == (1e-5, 6, 3, "dr_grpo")


def test_to_yaml_loads_back_to_an_equal_config(tmp_path):
    c = (RagenConfig.from_yaml(CONFIGS / "runs" / "frozenlake_grpo_cpu.yaml")
         .training(clip_high=0.3, engine_kwargs={"kv_cache_gib": 1}))
    path = tmp_path / "resolved.yaml"
    c.to_yaml(path)
    back = RagenConfig.from_yaml(path)
    assert back.to_yaml() == c.to_yaml()
    assert (back.clip_high, back.engine_kwargs, back.lr_decay_steps, back.run_settings) == \
        (0.3, {"kv_cache_gib": 1}, 28, c.run_settings)


@pytest.mark.parametrize("text, match", [
    ("training:\n  clip_hihg: 0.3\n", r"bad.yaml: training.clip_hihg=0.3 is unknown; did you mean 'clip_high'"),
    ("trainig:\n  lr: 0.1\n", r"bad.yaml: section 'trainig' is unknown; did you mean 'training'"),
    ("training:\n  env_groups: eight\n", r"training.env_groups='eight' is invalid: use a value of type int"),
    ("training:\n  loss_agg_mode: nonsense\n", r"training.loss_agg_mode='nonsense' is invalid: use one of"),
    ("env_runners:\n  num_env_runner: 2\n", r"env_runners.num_env_runner=2 is unknown; did you mean 'num_env_runners'"),
    ("run:\n  checkpoint_every: often\n", r"run.checkpoint_every='often' is invalid: use a value of type int"),
    ("defaults: [missing.yaml]\n", r"config file .*missing.yaml does not exist \(named by .*bad.yaml\)"),
    ("- just\n- a list\n", r"a config is a mapping of sections"),
])
def test_bad_files_are_rejected_naming_file_key_value_and_fix(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError, match=match):
        RagenConfig.from_yaml(path)


def test_a_missing_file_and_a_bad_override_are_named(tmp_path):
    with pytest.raises(ConfigFileError, match="nothing.yaml does not exist"):
        RagenConfig.from_yaml(tmp_path / "nothing.yaml")
    with pytest.raises(ConfigFileError, match=r"with overrides \['training.lr_decay=sometimes'\].*lr_decay"):
        RagenConfig.from_yaml(CONFIGS / "algorithms" / "grpo.yaml", overrides=["training.lr_decay=sometimes"])


def test_a_cycle_of_defaults_is_named(tmp_path):
    (tmp_path / "a.yaml").write_text("defaults: [b.yaml]\n")
    (tmp_path / "b.yaml").write_text("defaults: [a.yaml]\n")
    with pytest.raises(ConfigFileError, match="makes a cycle"):
        RagenConfig.from_yaml(tmp_path / "a.yaml")
