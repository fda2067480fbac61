"""YAML configs: every shipped file validates, composition and overrides, a round trip, and bad input named."""

from pathlib import Path

import pytest
import yaml

from ragen_rllib import RagenConfig
from ragen_rllib.algorithms.ragen.config.config_files import SECTIONS, ConfigFileError, _plain, _read, section_keys
from ragen_rllib.algorithms.ragen.config.presets import PRESETS

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = sorted(CONFIGS.rglob("*.yaml"))


def test_configs_are_shipped_for_every_tag_preset_and_run():
    names = {p.relative_to(CONFIGS).as_posix() for p in SHIPPED}
    for tag in ("simple_sokoban", "coord_sokoban", "larger_sokoban", "frozenlake", "coord_frozenlake", "bandit",
                "countdown", "metamathqa", "sudoku", "2048", "rubiks_cube_2x2", "searchqa"):
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


#: a non-default value in every section a file can hold (RLlib's keys and Ragen's)
NON_DEFAULT = {
    "environment": {"env": "ragen/Sokoban-v0", "env_config": {"dim_room": [5, 5]}, "clip_rewards": 2.0,
                    "env_modules": ["my_envs"]},
    "multi_agent": {"agent_to_module": {"x": "attacker", "o": "defender"}, "scripted_agents": {"q": "random"},
                    "policies_to_train": ["attacker"]},
    "env_runners": {"num_env_runners": 2, "max_requests_in_flight_per_env_runner": 3, "sample_timeout_s": 99.0,
                    "custom_resources_per_env_runner": {"rollout": 1}},
    "learners": {"num_learners": 2, "num_cpus_per_learner": 2, "max_requests_in_flight_per_learner": 5},
    "rl_module": {"model_config": {"model": "tiny:small", "logprob_chunk": 64}},
    "training": {"lr": 3e-5, "grad_clip": 0.5, "clip_high": 0.3, "filter_strategy": "top_k", "filter_value": 0.5},
    "evaluation": {"evaluation_interval": 2, "evaluation_duration": 3, "evaluation_parallel_to_training": True},
    "fault_tolerance": {"restart_failed_env_runners": False, "env_runner_health_probe_timeout_s": 7.0,
                        "max_num_env_runner_restarts": 4},
    "reporting": {"metrics_num_episodes_for_smoothing": 7, "min_time_s_per_iteration": 1},
    "checkpointing": {"export_native_model_files": True},
    "resources": {"placement_strategy": "SPREAD"},
    "framework": {"torch_compile_learner": True},
    "debugging": {"seed": 5, "log_level": "INFO"},
}


def _settings(config) -> dict:
    """Every setting a user can put in a file, as YAML types (classes, such as the runner class, as they are)."""
    def as_yaml(value):
        try:
            return _plain(value, "")
        except ConfigFileError:
            return value
    return {f"{section}.{key}": as_yaml(_read(config, key)[1]) for section in SECTIONS for key in section_keys(section)}


def test_every_setting_survives_to_yaml_and_from_yaml(tmp_path):
    """A config with a non-default value in every section loads back from its YAML with every user-settable key
    equal, RLlib's included (the keys a hand-kept list of dumped keys used to lose, e.g. evaluation_duration)."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(NON_DEFAULT))
    c = RagenConfig.from_yaml(path)
    assert set(NON_DEFAULT) == set(SECTIONS)  # every section is exercised
    for body in NON_DEFAULT.values():
        for key, value in body.items():
            got = c.model_config if key == "model_config" else _read(c, key)[1]
            assert _plain(got, key) == value or key == "model_config" and got.items() >= value.items(), key
    c.to_yaml(tmp_path / "back.yaml")
    back = RagenConfig.from_yaml(tmp_path / "back.yaml")
    before, after = _settings(c), _settings(back)
    assert {k: (before[k], after[k]) for k in before if before[k] != after[k]} == {}
    assert _settings(RagenConfig()) != before  # the comparison sees the non-default values


def test_a_setting_yaml_cannot_hold_is_named_not_dropped():
    c = RagenConfig().evaluation(custom_evaluation_function=print)
    with pytest.raises(ConfigFileError, match=r"evaluation.custom_evaluation_function=.* cannot be written to a"):
        c.to_yaml()


def test_a_deprecated_rllib_key_is_pointed_to_its_current_name(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("env_runners:\n  num_rollout_workers: 2\n")
    with pytest.raises(ConfigFileError, match=r"env_runners.num_rollout_workers=2 is unknown"):
        RagenConfig.from_yaml(path)


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


RUNS = [p for p in SHIPPED if p.parent.name in ("runs", "sweeps")]


@pytest.mark.parametrize("bf16_units", [True, False], ids=["bf16-autocast", "fp32"])
@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.relative_to(CONFIGS).as_posix())
def test_every_shipped_run_fits_a_24_gib_machine_with_its_own_model(path, bf16_units, monkeypatch):
    """The learner memory check with the config's own model (SmolLM2 for the real-model runs) on a 24 GiB machine,
    under the bf16-autocast estimate (a CPU with bf16 units) and the fp32 one (an AVX2-only CPU): no shipped run
    needs a setting changed to start."""
    from ragen_rllib.algorithms.ragen import memory
    from ragen_rllib.core import precision

    monkeypatch.setattr(memory, "machine_memory_bytes", lambda: 24 * memory.GIB)
    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: bf16_units)
    config = RagenConfig.from_yaml(path)
    config.validate()
    assert memory.check_config(config) >= config.max_model_len


def test_ragens_3600_token_rows_fit_by_auto_checkpointing_unless_the_user_turned_it_off(monkeypatch, caplog):
    from ragen_rllib.algorithms.ragen import memory
    from ragen_rllib.core import precision

    monkeypatch.setattr(memory, "machine_memory_bytes", lambda: 24 * memory.GIB)
    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: False)  # fp32 activations (an AVX2-only CPU)
    path = CONFIGS / "runs" / "sokoban_smollm2_cpu.yaml"
    with caplog.at_level("INFO", logger="ragen_rllib.memory"):
        RagenConfig.from_yaml(path, ["training.max_model_len=3600"]).validate()
    assert "'auto': on, since one row of max_model_len=3600" in caplog.text
    off = RagenConfig.from_yaml(path, ["training.max_model_len=3600",
                                       "rl_module.model_config.gradient_checkpointing=false"])
    with pytest.raises(ValueError, match=r"max_model_len=3600: .* set model_config\['gradient_checkpointing'\]=True"):
        off.validate()
