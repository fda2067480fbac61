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
                        model_config={"model": "tiny:nano", "autocast": None}).build()


def batch():
    torch.manual_seed(0)
    mask = torch.zeros(3, 7)
    mask[:, 3:6] = 1
    return {K.INPUT_IDS: torch.randint(0, 1000, (3, 7)), K.LOSS_MASK: mask,
            K.SAMPLE_LOGPROBS: -torch.rand(3, 7) * mask, K.ADVANTAGES: torch.randn(3, 7) * mask,
            K.LOSS_SCALE: torch.ones(3), K.MICRO_WEIGHT: torch.ones(3)}


def test_a_batch_without_the_drivers_columns_is_rejected_by_name(module):
    cols = batch()
    del cols[K.LOSS_SCALE]
    with pytest.raises(ValueError, match=r"lacks the columns \['loss_scale'\].*build_batch"):
        prepare_columns(module, cols, config("engine"))


@pytest.mark.parametrize("on_policy", [False, True])
def test_engine_old_logprobs_are_the_sampling_logprobs_and_skip_the_pass(module, on_policy):
    cols = batch()
    assert not needs_forward(config("engine"), on_policy)
    prepared = prepare_columns(module, dict(cols), config("engine"), on_policy=on_policy)
    assert torch.equal(prepared[K.OLD_LOGPROBS], cols[K.SAMPLE_LOGPROBS] * cols[K.LOSS_MASK])
    assert prepared[K.OLD_IS_CURRENT].tolist() == [0.0, 0.0, 0.0]
    # the learner's columns are always written: zeros where no KL / critic is configured
    for key in (K.REF_LOGPROBS, K.OLD_VALUES, K.RETURNS):
        assert torch.equal(prepared[key], torch.zeros(3, 7))


def test_learner_old_logprobs_are_recomputed_off_policy_only(module):
    cols = batch()
    assert needs_forward(config("learner"), on_policy=False)
    prepared = prepare_columns(module, dict(cols), config("learner"), on_policy=False)
    with torch.no_grad():
        expected = module._forward_train({K.INPUT_IDS: cols[K.INPUT_IDS]}, entropy=False)[K.LOGPROBS]
    torch.testing.assert_close(prepared[K.OLD_LOGPROBS], expected * cols[K.LOSS_MASK], atol=1e-6, rtol=1e-6)
    assert not torch.equal(prepared[K.OLD_LOGPROBS], cols[K.SAMPLE_LOGPROBS])
    assert prepared[K.OLD_IS_CURRENT].tolist() == [0.0, 0.0, 0.0]
    # one on-policy step: no pass; the loss takes the current log-probs, detached (OLD_IS_CURRENT = 1)
    assert not needs_forward(config("learner"), on_policy=True)
    current = prepare_columns(module, dict(cols), config("learner"), on_policy=True)
    assert current[K.OLD_IS_CURRENT].tolist() == [1.0, 1.0, 1.0]


def test_critic_or_kl_still_need_the_pass_with_engine_logprobs():
    assert needs_forward(config("engine", adv_estimator="gae"), on_policy=True)
    assert needs_forward(config("engine", use_kl_loss=True), on_policy=True)


def test_last_turn_rewards_put_the_score_on_each_rows_last_turn():
    from ragen_rllib.algorithms.ragen.estimators import last_turn_rewards

    out = last_turn_rewards(torch.tensor([1.0, 2.0]), torch.tensor([[3, 6, 9], [4, -1, -1]]))
    assert out.tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]


def test_bi_level_gae_runs_on_the_learner_with_the_critic():
    from ragen_rllib.rl.advantages import bilevel_gae

    space = text_space()
    critic = RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                          model_config={"model": "tiny:nano", "value_head": True, "autocast": None}).build()
    cols = batch()
    cols[K.LOSS_MASK][:, 3:6] = torch.tensor([1.0, 0.0, 1.0])  # two one-token turns at 3 and 5
    cols[K.TURN_ENDS] = torch.tensor([[3, 5], [3, 5], [3, -1]])
    cols[K.SCORES] = torch.tensor([1.0, 0.0, 2.0])
    cfg = SimpleNamespace(old_logprobs="learner", adv_estimator="bi_level_gae", use_kl_loss=False,
                          micro_batch_size=2, high_level_gamma=0.5, gamma=1.0, lambda_=1.0)
    cols[K.LOSS_MASK][2, 5] = 0.0
    prepared = prepare_columns(critic, dict(cols), cfg, on_policy=True)
    zeros = torch.zeros(3, 7)  # the value head starts at zero
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [2.0, 0.0]])
    adv, ret = bilevel_gae(rewards, cols[K.TURN_ENDS], zeros, cols[K.LOSS_MASK], high_gamma=0.5)
    torch.testing.assert_close(prepared[K.ADVANTAGES], adv.float())
    torch.testing.assert_close(prepared[K.RETURNS], ret.float())
    # unwhitened returns by hand: row 0 turn 1 gets 1, turn 0 gets 0.5 * 1; row 2's single turn gets 2
    assert ret[0, 3].item() == pytest.approx(0.5) and ret[0, 5].item() == pytest.approx(1.0)
    assert ret[2, 3].item() == pytest.approx(2.0)


def test_kl_reference_with_lora_is_the_base_model_with_the_adapter_off():
    from transformers import AutoModelForCausalLM

    from ragen_rllib.logprobs import gather_token_logprobs
    from ragen_rllib.models.tiny import tiny_model_path

    space = text_space()
    lora = RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                        model_config={"model": "tiny:nano", "autocast": None, "lora": {"r": 4, "lora_alpha": 8,
                                                                     "target_modules": ["q_proj", "v_proj"]}}).build()
    with torch.no_grad():
        for name, p in lora.lm.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)  # the adapter now changes the outputs
    cols = batch()
    cfg = SimpleNamespace(old_logprobs="learner", adv_estimator="grpo", use_kl_loss=True, micro_batch_size=2)
    prepared = prepare_columns(lora, dict(cols), cfg, on_policy=True)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path("nano"))
    with torch.no_grad():
        expected = gather_token_logprobs(base(input_ids=cols[K.INPUT_IDS]).logits, cols[K.INPUT_IDS])
        adapted = lora._forward_train({K.INPUT_IDS: cols[K.INPUT_IDS]}, entropy=False)[K.LOGPROBS]
    mask = cols[K.LOSS_MASK]
    torch.testing.assert_close(prepared[K.REF_LOGPROBS], expected * mask, atol=1e-5, rtol=1e-5)
    assert (adapted * mask - expected * mask).abs().max() > 1e-3  # the policy itself differs from the reference


def test_kl_in_the_reward_enters_gae():
    import copy

    from ragen_rllib.rl.advantages import gae
    from ragen_rllib.rl.losses import kl_penalty
    from ragen_rllib.rl.tokens import token_rewards

    space = text_space()
    critic = RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                          model_config={"model": "tiny:nano", "value_head": True, "autocast": None}).build()
    ref = copy.deepcopy(critic.lm)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    cols = batch()
    cols[K.SCORES], cols[K.LAST_INDEX] = torch.tensor([1.0, 0.0, 2.0]), torch.tensor([5, 5, 5])
    cfg = SimpleNamespace(old_logprobs="learner", adv_estimator="gae", use_kl_loss=False, use_kl_in_reward=True,
                          kl_coeff=0.5, kl_type="k1", micro_batch_size=2, use_turn_scores=False, gamma=1.0,
                          lambda_=1.0)
    prepared = prepare_columns(critic, dict(cols), cfg, ref_lm=ref, on_policy=True)
    mask = cols[K.LOSS_MASK]
    with torch.no_grad():
        logp = critic._forward_train({K.INPUT_IDS: cols[K.INPUT_IDS]}, entropy=False)[K.LOGPROBS]
        ref_logp = gather_logprobs(ref, cols[K.INPUT_IDS])
    kl = kl_penalty(logp, ref_logp, "k1") * mask
    assert kl.abs().max() > 1e-4
    rewards = token_rewards(cols[K.SCORES], cols[K.LAST_INDEX], 7) - 0.5 * kl
    adv, _ = gae(rewards, torch.zeros(3, 7), mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(prepared[K.ADVANTAGES], adv, atol=1e-5, rtol=1e-4)


def gather_logprobs(lm, ids):
    from ragen_rllib.logprobs import gather_token_logprobs

    return gather_token_logprobs(lm(input_ids=ids).logits, ids)
