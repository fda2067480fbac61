"""`ragen-rllib sweep`: the tune section in YAML (search spaces, variants, schedulers), bad keys named before any
trial starts, and a 2-trial sweep end to end from a config file."""

import json

import pytest
import yaml
from ray import tune

from ragen_rllib import RagenConfig
from ragen_rllib.sweep import table
from ragen_rllib.sweep_space import apply_param_space, make_scheduler, to_tune

BASE = {
    "environment": {"env": "ragen/FrozenLake-v0", "env_config": {"size": 4, "success_rate": 1.0}},
    "env_runners": {"num_env_runners": 1},
    "learners": {"num_learners": 0},
    "rl_module": {"model_config": {"model": "tiny:nano", "autocast": None}},
    "training": {"adv_estimator": "grpo", "env_groups": 2, "group_size": 2, "minibatch_size": 4, "max_turns": 2,
                 "max_response_tokens": 16, "lr": 1.0e-3, "val_env_groups": 2, "engine": "vllm",
                 "engine_kwargs": {"max_model_len": 1024}, "val_before_train": True},
    "evaluation": {"evaluation_interval": 1},
    "debugging": {"seed": 0},
    "run": {"stop": {"training_iteration": 1}},
}


def test_yaml_distributions_become_tune_objects():
    assert isinstance(to_tune({"grid_search": [1, 2]}, "k"), dict)  # tune.grid_search is a marked dict
    assert to_tune({"grid_search": [1, 2]}, "k") == tune.grid_search([1, 2])
    assert type(to_tune({"loguniform": [1e-6, 1e-4]}, "k")).__name__ == "Float"
    assert to_tune({"not_a_distribution": 3}, "k") == {"not_a_distribution": 3}
    with pytest.raises(ValueError, match=r"k: uniform takes \[low, high\]"):
        to_tune({"uniform": [1]}, "k")


def test_param_space_sets_keys_and_validates_one_sample():
    c = RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4}).rl_module(
        model_config={"model": "tiny:nano"})
    c, sample = apply_param_space(c, {
        "environment.env_config.success_rate": {"grid_search": [1.0, 0.5]},
        "training.lr": {"loguniform": [1e-6, 1e-4]},
        "variant": {"grid_search": [{"name": "on", "training.filter_strategy": "top_p", "training.filter_value": 0.9},
                                    {"name": "off", "training.filter_strategy": None}]}})
    assert c.env_config == {"size": 4, "success_rate": tune.grid_search([1.0, 0.5])}
    assert (sample.env_config["success_rate"], sample.lr, sample.filter_strategy) == (1.0, 1e-6, "top_p")
    sample.validate()
    trial = RagenConfig().update_from_dict({**c.to_dict(), "lr": 3e-5, "env_config": {"size": 4, "success_rate": 0.5},
                                            "sweep_variant": {"name": "on", "training.filter_value": 0.7}})
    assert (trial.lr, trial.filter_value, trial.env_config["success_rate"]) == (3e-5, 0.7, 0.5)


@pytest.mark.parametrize("space, match", [
    ({"training.lrr": 1.0}, r"training.lrr is not a config key; did you mean training.lr"),
    ({"trainig.lr": 1.0}, r"'trainig.lr' is not a config key path.*did you mean 'training'"),
    ({"environment.env_config.sucess_rate": {"grid_search": [1.0]}},
     r"ragen/FrozenLake-v0 takes no env_config key 'sucess_rate'; did you mean \['success_rate'\]"),
    ({"variant": {"grid_search": [{"name": "x", "training.filter_valu": 0.9}]}}, r"did you mean training.filter_value"),
    ({"training.filter_strategy": {"grid_search": ["top_q"]}}, r"filter_strategy='top_q' is invalid"),
])
def test_bad_search_space_keys_fail_before_any_trial(space, match):
    c = RagenConfig().environment("ragen/FrozenLake-v0").rl_module(model_config={"model": "tiny:nano"})
    with pytest.raises(ValueError, match=match):
        _, sample = apply_param_space(c, space)
        sample.validate()


def test_schedulers_by_name():
    c = RagenConfig().environment("ragen/FrozenLake-v0")
    assert type(make_scheduler({"type": "asha", "grace_period": 1, "max_t": 4}, "m", "max", c)).__name__ == \
        "AsyncHyperBandScheduler"
    pbt = make_scheduler({"type": "pbt", "perturbation_interval": 2,
                          "hyperparam_mutations": {"training.lr": {"loguniform": [1e-6, 1e-4]},
                                                   "environment.env_config.success_rate": [0.5, 1.0]}}, "m", "max", c)
    assert set(pbt._hyperparam_mutations) == {"lr", "env_config"}
    with pytest.raises(ValueError, match="tune.scheduler.type='hyperband' is unknown"):
        make_scheduler({"type": "hyperband"}, "m", "max", c)
    with pytest.raises(ValueError, match="pbt needs hyperparam_mutations"):
        make_scheduler({"type": "pbt"}, "m", "max", c)


def test_table_has_one_row_per_trial():
    rows = [{"variant": "on", "validation_success": 0.5, "validation_return": 0.4, "validation_valid_actions": 1.0,
             "iterations": 3}]
    text = table(rows, {"variant": {}})
    assert "| on | - | 50.0% | +0.400 | 100.0% | 3 |" in text


@pytest.mark.slow
def test_sweep_runs_a_two_trial_grid_from_a_config(ray_session, tmp_path, capsys):
    from ragen_rllib.cli import main

    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({**BASE, "run": {**BASE["run"], "out_dir": str(tmp_path / "out")}, "tune": {
        "param_space": {"environment.env_config.success_rate": {"grid_search": [1.0, 0.5]}},
        "max_concurrent_trials": 1}}))
    assert main(["sweep", str(cfg)]) == 0
    record = json.loads((tmp_path / "out" / "sweep.json").read_text())
    rates = [r["environment.env_config.success_rate"] for r in record["trials"]]
    assert sorted(rates) == [0.5, 1.0] and all(r["error"] is None for r in record["trials"])
    assert all(0.0 <= r["validation_success"] <= 1.0 and r["iterations"] == 1 for r in record["trials"])
    assert all(0.0 <= r["validation_success_before"] <= 1.0 for r in record["trials"])  # val_before_train
    assert (tmp_path / "out" / "sweep.md").read_text().count("\n") == 4 and (tmp_path / "out" / "sweep.png").is_file()
