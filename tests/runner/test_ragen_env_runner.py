"""RagenEnvRunner in-process (HF engine, no Ray actors): seed schedule, error containment, weight seq numbers."""

import os
import sys

import gymnasium as gym
import pytest
import torch
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from ragen_rllib import RagenConfig
from ragen_rllib.envs.base import text_space
from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner


class ExplodingEnv(gym.Env):
    """Raises on reset (an env bug: each of its episodes ends as an error)."""

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
    turns = sum(t.metrics["num_turns"] for t in trajectories)
    driver = aggregated(runner)
    assert driver.peek("num_env_steps_sampled") == turns and driver.peek("num_episodes") == len(trajectories)
    assert driver.peek("num_env_steps_sampled_lifetime") == turns == runner.num_env_steps_sampled_lifetime
    runner.sample(step=0, validation=True)  # validation does not count as sampled training steps
    driver.aggregate([runner.get_metrics()])
    assert driver.peek("num_env_steps_sampled_lifetime") == turns == runner.num_env_steps_sampled_lifetime


def resident_mib() -> float:
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc are Linux's")
@pytest.mark.parametrize("call", ["sample", "load_weights"])
def test_sampling_and_loading_weights_hand_freed_heap_memory_back(runner, call):
    """The learner runs after the rollout beside the same engine: what the runner freed must not stay resident."""
    state = {k: v.clone() for k, v in runner.engine.model.state_dict().items()}
    blocks = [bytearray(64 * 1024) for _ in range(4096)]  # 256 MiB of heap blocks (under the mmap threshold)
    pin = bytearray(64 * 1024)  # allocated last: keeps the heap's top in use, so free() alone cannot shrink it
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])  # touch every page
    del blocks
    freed = resident_mib()
    if call == "sample":
        runner.sample(step=0)
    else:
        runner.load_weights(state, runner.weights_seq_no + 1)
    assert freed - resident_mib() > 192, f"{call}() left the freed heap resident"
    del pin


def aggregated(runner, driver=None):
    """The runner's metrics as the driver sees them after ``Ragen`` collected them (RLlib's MetricsLogger)."""
    driver = driver or MetricsLogger(root=True)
    driver.aggregate([runner.get_metrics()])
    return driver


def test_an_env_that_raises_is_counted_and_never_escapes_sample():
    r = runner_for("tests/Exploding-v0")
    try:
        out = r.sample(step=0)
        assert len(out) == 4 and all(t.error == "RuntimeError: env bug" for t in out)
        driver = aggregated(r)
        assert driver.peek("runner_errors_lifetime") == 4
        assert all(t.error for t in r.sample(step=1))  # the runner keeps serving
        assert aggregated(r, driver).peek("runner_errors_lifetime") == 8
    finally:
        r.stop()


def test_weights_are_taken_in_order_and_stale_ones_are_refused(runner):
    state = {k: v.clone() for k, v in runner.engine.model.state_dict().items()}
    bumped = {k: v + 0.01 for k, v in state.items()}
    assert runner.load_weights(bumped, 5) == 5
    assert runner.load_weights(state, 3) == 5  # a stale sync does not overwrite newer weights
    assert torch.equal(runner.engine.model.state_dict()["lm_head.weight"], bumped["lm_head.weight"])
    assert runner.get_state()["weights_seq_no"] == 5


def test_a_lora_adapter_state_pushed_by_rllib_leaves_the_engine_alone(runner):
    before = runner.engine.model.state_dict()["lm_head.weight"].clone()
    seq = runner.weights_seq_no
    adapter = {"lm.base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.ones(2, 64)}
    runner.set_state({"rl_module": {"default_policy": adapter}, "weights_seq_no": seq + 1})
    assert torch.equal(runner.engine.model.state_dict()["lm_head.weight"], before) and runner.weights_seq_no == seq


def test_a_dead_runners_block_samples_as_its_own_runner_would():
    def make(index):
        config = (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4})
                  .env_runners(num_env_runners=2).rl_module(model_config={"model": "tiny:nano"})
                  .training(env_groups=2, group_size=2, max_turns=2, max_response_tokens=16, engine="hf")
                  .debugging(seed=3))
        return RagenEnvRunner(config=config, worker_index=index, num_workers=2)

    first, second = make(1), make(2)
    try:
        own = second.sample(step=4)
        stand_in = first.sample(step=4, block=1)  # runner 1 samples runner 2's groups
        assert [t.group_id for t in stand_in] == [t.group_id for t in own] == [10009, 10009]
        assert [t.response_ids for t in stand_in] == [t.response_ids for t in own]
        assert [t.group_id for t in first.sample(step=4)] == [10008, 10008]  # its own block is untouched
    finally:
        first.stop()
        second.stop()


def test_the_hf_engine_follows_the_runners_gpus(runner, monkeypatch):
    import torch

    from ragen_rllib.runner.ragen_env_runner import engine_device

    assert runner.engine.device == "cpu" and engine_device(0) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert engine_device(1) == "cuda" and engine_device(0.5) == "cuda" and engine_device(0) == "cpu"
