"""The learner's no-grad preparation: where old log-probs come from, and when the extra pass runs."""

import copy
from types import SimpleNamespace

import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from ragen_rllib.algorithms.ragen.ragen_learner import needs_forward, prepare_columns
from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule
from ragen_rllib.core import keys as K
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

    from ragen_rllib.models.tiny import tiny_model_path
    from ragen_rllib.rl.logprobs import gather_token_logprobs

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
    from ragen_rllib.rl.logprobs import gather_token_logprobs

    return gather_token_logprobs(lm(input_ids=ids).logits, ids)


def right_padded_batch():
    """Six right-padded rows of lengths 10, 4, 7, 3, 9, 5 (width 10), the driver's columns as numpy."""
    torch.manual_seed(0)
    lengths = torch.tensor([10, 4, 7, 3, 9, 5])
    real = (torch.arange(10).unsqueeze(0) < lengths.unsqueeze(1)).float()
    mask = real.clone()
    mask[:, :2] = 0  # the prompt
    ids = torch.randint(0, 1000, (6, 10)) * real.long()
    return {K.INPUT_IDS: ids, K.ATTENTION_MASK: real, K.LOSS_MASK: mask,
            K.ADVANTAGES: torch.randn(6, 1) * mask, K.SAMPLE_LOGPROBS: -torch.rand(6, 10) * mask,
            K.LOSS_SCALE: torch.ones(6), K.MICRO_WEIGHT: torch.ones(6), K.TURN_ENDS: torch.full((6, 10), -1)}


def test_the_no_grad_pass_on_token_packed_micro_batches_equals_one_pass(module):
    cols = right_padded_batch()
    cfg = SimpleNamespace(old_logprobs="learner", adv_estimator="grpo", use_kl_loss=True, micro_batch_size=6)
    ref = copy.deepcopy(module.lm)
    with torch.no_grad():
        for p in ref.parameters():
            p.mul_(0.9)  # a reference policy other than the current one
    whole = prepare_columns(module, dict(cols), cfg, ref_lm=ref)
    cfg.micro_batch_size = 3
    # micro-batches [0], [4], [2, 5], [1, 3], cut to 10, 9, 7 and 4 positions
    packed = prepare_columns(module, dict(cols), cfg, ref_lm=ref, max_tokens=16)
    for key in (K.OLD_LOGPROBS, K.REF_LOGPROBS):
        torch.testing.assert_close(packed[key], whole[key], atol=1e-5, rtol=1e-5)
        assert torch.count_nonzero(whole[key]) > 0


def test_select_rows_cuts_token_columns_only():
    from ragen_rllib.algorithms.ragen.ragen_learner import select_rows

    cols = right_padded_batch()
    part = select_rows(cols, torch.tensor([1, 3]), 4)
    assert part[K.INPUT_IDS].shape == (2, 4) and part[K.LOSS_MASK].shape == (2, 4)
    assert torch.equal(part[K.INPUT_IDS], cols[K.INPUT_IDS][[1, 3], :4])
    assert part[K.TURN_ENDS].shape == (2, 10) and part[K.LOSS_SCALE].shape == (2,)  # [B, N] and [B] kept whole


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-sum-norm"])
def test_token_packed_update_takes_the_same_step_as_one_pass(agg):
    """micro_batch_size=6 without a token limit (one pass over the whole width) == micro-batches of at most
    3 rows and 16 tokens, each cut to its longest row: the same weights and gradient norm after the step."""
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from ragen_rllib import RagenConfig

    cols = {k: v.numpy() for k, v in right_padded_batch().items() if k != K.TURN_ENDS}
    params, norms, counts = [], [], []
    for micro, budget in ((6, 60), (3, 16)):
        config = (RagenConfig().environment("ragen/FrozenLake-v0")
                  .rl_module(model_config={"model": "tiny:nano", "autocast": None})
                  .training(adv_estimator="grpo", micro_batch_size=micro, max_tokens_per_micro_batch=budget,
                            loss_agg_mode=agg, lr=1e-2, grad_clip=None, entropy_coeff=0.01))
        learner = config.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})
        result = learner.update(batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(dict(cols))}, env_steps=6),
                                minibatch_size=6, num_epochs=1, num_total_minibatches=1)
        module = learner.module[DEFAULT_MODULE_ID].unwrapped()
        params.append(torch.cat([p.detach().flatten() for p in module.lm.parameters()]))
        norms.append(result[DEFAULT_MODULE_ID][K.GRAD_NORM].peek())
        counts.append(result[DEFAULT_MODULE_ID][K.MICRO_BATCHES].peek())
        assert result[DEFAULT_MODULE_ID][K.MICRO_BATCH_TOKENS].peek() == budget
    assert counts == [1, 4]  # rows [0] (10 tokens), [4] (9), [2, 5] (2 x 7), [1, 3] (2 x 4) under 16 tokens
    torch.testing.assert_close(params[1], params[0], atol=1e-4, rtol=1e-4)
    assert norms[1] == pytest.approx(norms[0], rel=1e-4)
