"""RagenEnvRunner in-process (HF engine, no Ray actors): seed schedule, error containment, weight seq numbers."""

import gymnasium as gym
import pytest
import torch

from ragen_rllib import RagenConfig
from ragen_rllib.env.ragen_env_runner import RagenEnvRunner
from ragen_rllib.envs.base import text_space


class ExplodingEnv(gym.Env):
    """Raises on reset (an env bug that takes the whole rollout down)."""

    instruction = "Say anything."
    action_names: list[str] = []
    observation_space = action_space = text_space()

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("env bug")


gym.register("tests/Exploding-v0", entry_point=ExplodingEnv)


def runner_for(env="ragen/FrozenLake-v0", **training):
    kw = dict(env_groups=2, group_size=2, max_turns=2, max_response_tokens=16, engine="hf")
    kw.update(training)
    config = (RagenConfig().environment(env, env_config={} if env.startswith("tests/") else {"size": 4})
              .rl_module(model_config={"model": "tiny:nano"}).training(**kw))
    return RagenEnvRunner(config=config)


@pytest.fixture(scope="module")
def runner():
    r = runner_for()
    yield r
    r.stop()


def test_groups_follow_ragens_seed_schedule_and_share_a_seed(runner):
    assert runner.group_seeds(step=0) == [10000, 10001]
    assert runner.group_seeds(step=3) == [10006, 10007]
    assert runner.group_seeds(step=3, validation=True) == runner.group_seeds(step=0, validation=True)
    trajectories = runner.sample(step=1)
    assert [t.group_id for t in trajectories] == [10002, 10002, 10003, 10003]
    assert all(t.error is None and t.response_ids and t.samples for t in trajectories)
    assert runner.get_metrics()["num_env_steps_sampled"] == sum(t.metrics["num_turns"] for t in trajectories)


def test_an_env_that_raises_is_counted_and_never_escapes_sample():
    r = runner_for("tests/Exploding-v0")
    try:
        out = r.sample(step=0)
        assert len(out) == 1 and "env bug" in out[0].error
        assert r.errors == 1 and r.get_metrics()["runner_errors"] == 1
        assert r.sample(step=1)[0].error and r.errors == 2  # the runner keeps serving
    finally:
        r.stop()


def test_weights_are_taken_in_order_and_stale_ones_are_refused(runner):
    state = {k: v.clone() for k, v in runner.engine.model.state_dict().items()}
    bumped = {k: v + 0.01 for k, v in state.items()}
    assert runner.load_weights(bumped, 5) == 5
    assert runner.load_weights(state, 3) == 5  # a stale sync does not overwrite newer weights
    assert torch.equal(runner.engine.model.state_dict()["lm_head.weight"], bumped["lm_head.weight"])
    assert runner.get_state()["weights_seq_no"] == 5
