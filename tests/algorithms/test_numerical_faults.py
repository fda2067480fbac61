"""Numerical faults: a NaN or inf in the loss or gradient skips the optimizer step, counts it, and leaves the
weights finite and unchanged (so the engines keep the last good weights)."""

import math

import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from ragen_rllib import RagenConfig
from ragen_rllib.algorithms.ragen.torch.ragen_torch_learner import all_finite
from ragen_rllib.core import keys as K
from ragen_rllib.envs.base import text_space


@pytest.fixture(scope="module")
def learner():
    config = (RagenConfig().environment("ragen/FrozenLake-v0")
              .rl_module(model_config={"model": "tiny:nano", "autocast": "none"})
              .training(adv_estimator="grpo", env_groups=1, group_size=4, minibatch_size=4, lr=1e-3,
                        old_logprobs="engine"))
    config.validate()
    return config.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})


def columns(advantage: float):
    torch.manual_seed(0)
    mask = torch.zeros(4, 9)
    mask[:, 4:8] = 1
    adv = torch.ones(4, 9) * mask
    adv[0, 5] = advantage
    return {K.INPUT_IDS: torch.randint(0, 500, (4, 9)), K.LOSS_MASK: mask,
            K.SAMPLE_LOGPROBS: -torch.ones(4, 9) * mask, K.ADVANTAGES: adv,
            K.LOSS_SCALE: torch.ones(4), K.MICRO_WEIGHT: torch.ones(4)}


def update(learner, cols):
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    before = {k: v.detach().clone() for k, v in module.lm.state_dict().items()}
    batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch({k: v.numpy() for k, v in cols.items()})}, env_steps=4)
    results = learner.update(batch=batch, minibatch_size=4, num_epochs=1, num_total_minibatches=1)
    after = module.lm.state_dict()
    moved = any(not torch.equal(before[k], after[k]) for k in before)
    return results[DEFAULT_MODULE_ID], moved, all_finite(after.values())


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_loss_skips_the_step_and_counts_it(learner, bad):
    stats, moved, finite = update(learner, columns(bad))
    assert stats[K.SKIPPED_UPDATES].peek() == 1
    assert not moved and finite
    stats, moved, finite = update(learner, columns(1.0))  # the next good batch trains as usual
    assert stats[K.SKIPPED_UPDATES].peek() == 0
    assert moved and finite and math.isfinite(stats[K.GRAD_NORM].peek())


def test_all_finite():
    assert all_finite([torch.ones(2), torch.zeros(3)]) and all_finite([])
    assert not all_finite([torch.ones(2), torch.tensor([1.0, math.nan])])
    assert not all_finite([torch.tensor([-math.inf])])
