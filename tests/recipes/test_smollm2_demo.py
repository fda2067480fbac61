"""The real-model demo's warm starts: found in one place, named by their recipe, consistent with the RL configs."""

import pytest

from ragen_rllib.core import precision
from ragen_rllib.recipes.smollm2_demo import AGENT, RECIPES, smollm2_model, smollm2_model_path

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("bf16_units, tag", [(True, "bf16"), (False, "fp32")])
def test_the_path_names_the_recipe_and_the_precision(monkeypatch, tmp_path, bf16_units, tag):
    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: bf16_units)
    r = RECIPES["sokoban"]
    assert smollm2_model_path(tmp_path, "sokoban") == (
        tmp_path / "demo" / f"smollm2-sokoban-{r.episodes}x{r.epochs}ep-noise{r.noise:g}-{tag}")


def test_the_path_names_switched_on_env_options_per_agent_noise_the_warmup_and_the_batching(monkeypatch, tmp_path):
    """Recipes that differ only in a switched-on env option, per-agent noise, SFT warm-up or batching must not share
    a cached model."""
    from dataclasses import replace

    from ragen_rllib.recipes import smollm2_demo

    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: False)
    base = replace(RECIPES["solver_verifier"], episodes=256, epochs=1, noise=0.5, agent_noise=None, warmup_steps=0,
                   batching="length", env_config={"num_numbers": 2, "max_rounds": 2, "show_value": False})
    tuned = replace(base, agent_noise={"verifier": 0.0, "solver": 0.25}, warmup_steps=32)
    names = []
    shown = replace(base, env_config={**base.env_config, "show_value": True, "max_rounds": 2})
    for recipe in (base, tuned, replace(base, batching="random"), shown):
        monkeypatch.setitem(smollm2_demo.RECIPES, "solver_verifier", recipe)
        names.append(smollm2_model_path(tmp_path, "solver_verifier").name)
    assert names == ["smollm2-solver_verifier-256x1ep-noise0.5-fp32",
                     "smollm2-solver_verifier-256x1ep-noise0.5-solver0.25-verifier0-wu32-fp32",
                     "smollm2-solver_verifier-256x1ep-noise0.5-randombatch-fp32",
                     "smollm2-solver_verifier-256x1ep-noise0.5-showvalue-fp32"]


def test_an_unknown_env_is_refused_with_the_choices(tmp_path):
    choices = r"\['frozenlake', 'guided_lake', 'searchqa', 'sokoban', 'solver_verifier', 'tictactoe'\]"
    with pytest.raises(ValueError, match=r"env='chess'.*" + choices):
        smollm2_model_path(tmp_path, "chess")


def test_a_missing_model_raises_and_says_how_to_build_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing at .*smollm2-frozenlake.*--model smollm2 --env frozenlake"):
        smollm2_model(tmp_path, "frozenlake", build=False)


@pytest.mark.parametrize("env", sorted(RECIPES))
def test_the_warm_start_teaches_the_prompt_and_env_its_rl_config_trains_on(env):
    """The demonstrations use the agent settings and env of configs/runs/<env>_smollm2_cpu.yaml, so RL starts
    from a model that was taught exactly the prompt it will see."""
    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.loading import resolve_env_name

    config = RagenConfig.from_yaml(ROOT / "configs" / "runs" / f"{env}_smollm2_cpu.yaml")
    for key, value in (RECIPES[env].agent or AGENT).items():
        assert getattr(config, key) == value, key
    tag_env, tag_config = resolve_env_name(RECIPES[env].tag)  # a RAGEN tag, a short name or an import path
    assert config.env == tag_env
    demo_env = {**tag_config, **RECIPES[env].env_config}
    assert {k: (list(v) if isinstance(v, tuple) else v) for k, v in demo_env.items()} == dict(config.env_config)


def test_a_failed_build_in_the_child_process_raises_and_leaves_no_model(tmp_path, monkeypatch):
    import shutil
    import sys

    monkeypatch.setattr(sys, "executable", shutil.which("false"))  # the build's child process exits with 1
    with pytest.raises(RuntimeError, match="building the warm-started SmolLM2 for frozenlake failed"):
        smollm2_model(tmp_path, "frozenlake")
    assert not smollm2_model_path(tmp_path, "frozenlake").exists()
