"""Factories of tiny Ragen configs for the end-to-end algorithm tests (the shared Ray instance: tests/conftest.py)."""

from pathlib import Path

import pytest

CACHE = Path(__file__).resolve().parents[2] / ".cache"


@pytest.fixture(scope="session")
def tiny_config():
    """Factory of seconds-per-iteration Ragen configs (see ``_tiny_config``)."""
    return _tiny_config


def _tiny_config(num_env_runners=1, num_learners=0, **training):
    """A seconds-per-iteration Ragen config: nano model, FrozenLake 4x4, short responses, real vLLM engines."""
    from ragen_rllib import RagenConfig

    kw = dict(adv_estimator="gae", env_groups=2, group_size=2, minibatch_size=2, max_turns=2, max_response_tokens=24,
              lr=1e-3, critic_lr=1e-3, val_env_groups=2, engine="vllm", engine_kwargs={"max_model_len": 1024})
    kw.update(training)
    return (RagenConfig()
            .environment("ragen/FrozenLake-v0", env_config={"size": 4, "success_rate": 1.0})
            .env_runners(num_env_runners=num_env_runners)
            .learners(num_learners=num_learners)
            .rl_module(model_config={"model": "tiny:nano", "autocast": None})  # fp32: engine == learner to 1e-4
            .training(**kw)
            .debugging(seed=0))
