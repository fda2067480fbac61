"""The learner's no-grad preparation: where old log-probs come from, and when the extra pass runs."""

from types import SimpleNamespace

import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from ragen_rllib.algorithms.ragen import keys as K
from ragen_rllib.algorithms.ragen.ragen_learner import needs_forward, prepare_columns
from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule
from ragen_rllib.envs.base import text_space


def config(old_logprobs: str, adv_estimator: str = "grpo", use_kl_loss: bool = False):
    return SimpleNamespace(old_logprobs=old_logprobs, adv_estimator=adv_estimator, use_kl_loss=use_kl_loss,
                           micro_batch_size=2)


@pytest.fixture(scope="module")
def module():
    space = text_space()
    return RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                        model_config={"model": "tiny:nano"}).build()


def batch():
    torch.manual_seed(0)
    mask = torch.zeros(3, 7)
    mask[:, 3:6] = 1
    return {K.INPUT_IDS: torch.randint(0, 1000, (3, 7)), K.LOSS_MASK: mask,
            K.SAMPLE_LOGPROBS: -torch.rand(3, 7) * mask, K.ADVANTAGES: torch.randn(3, 7) * mask}


@pytest.mark.parametrize("on_policy", [False, True])
def test_engine_old_logprobs_are_the_sampling_logprobs_and_skip_the_pass(module, on_policy):
    cols = batch()
    assert not needs_forward(config("engine"), on_policy)
    prepared = prepare_columns(module, dict(cols), config("engine"), on_policy=on_policy)
    assert torch.equal(prepared[K.OLD_LOGPROBS], cols[K.SAMPLE_LOGPROBS] * cols[K.LOSS_MASK])


def test_learner_old_logprobs_are_recomputed_off_policy_only(module):
    cols = batch()
    assert needs_forward(config("learner"), on_policy=False)
    prepared = prepare_columns(module, dict(cols), config("learner"), on_policy=False)
    with torch.no_grad():
        expected = module._forward_train({K.INPUT_IDS: cols[K.INPUT_IDS]}, entropy=False)[K.LOGPROBS]
    torch.testing.assert_close(prepared[K.OLD_LOGPROBS], expected * cols[K.LOSS_MASK], atol=1e-6, rtol=1e-6)
    assert not torch.equal(prepared[K.OLD_LOGPROBS], cols[K.SAMPLE_LOGPROBS])
    assert not needs_forward(config("learner"), on_policy=True)
    assert K.OLD_LOGPROBS not in prepare_columns(module, dict(cols), config("learner"), on_policy=True)


def test_critic_or_kl_still_need_the_pass_with_engine_logprobs():
    assert needs_forward(config("engine", adv_estimator="gae"), on_policy=True)
    assert needs_forward(config("engine", use_kl_loss=True), on_policy=True)
