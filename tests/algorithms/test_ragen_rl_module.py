"""The LLM RLModule: token log-probs, value head kept off inference, state in the model's dtype."""

import copy

import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from transformers import AutoModelForCausalLM

from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import VALUE_HEAD, RagenTorchRLModule
from ragen_rllib.core import keys as K
from ragen_rllib.envs.base import text_space
from ragen_rllib.models.tiny import tiny_model_path
from ragen_rllib.rl.logprobs import gather_token_logprobs


def build(**model_config):
    space = text_space()
    spec = RLModuleSpec(module_class=RagenTorchRLModule, observation_space=space, action_space=space,
                        model_config={"model": "tiny:nano", **model_config})
    return spec.build()


def test_forward_gives_token_logprobs_values_and_entropy():
    module = build(value_head=True, temperature=0.7, autocast=None)  # fp32, compared with the HF model
    hf = AutoModelForCausalLM.from_pretrained(tiny_model_path("nano"))
    ids = torch.randint(0, 1000, (2, 9))
    out = module.forward_train({K.INPUT_IDS: ids})
    expected = gather_token_logprobs(hf(input_ids=ids).logits, ids, temperature=0.7)
    torch.testing.assert_close(out[K.LOGPROBS], expected, atol=1e-5, rtol=1e-5)
    assert out[K.VALUES].shape == (2, 9) and torch.all(out[K.VALUES] == 0)  # zero-initialised head
    assert out[K.ENTROPY].shape == (2, 9) and torch.all(out[K.ENTROPY][:, 1:] > 0)


def test_state_keeps_dtype_and_leaves_the_value_head_off_inference():
    module = build(value_head=True, dtype="bfloat16")
    full = module.get_state()
    light = module.get_state(inference_only=True)
    assert any(k.startswith(VALUE_HEAD) for k in full) and not any(k.startswith(VALUE_HEAD) for k in light)
    assert all(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in light.values())
    other = build(value_head=True, dtype="bfloat16")
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.5)
    other.set_state(module.get_state())
    for (n1, p1), (n2, p2) in zip(module.state_dict().items(), other.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)


def test_hf_state_dict_uses_hugging_face_names():
    module = build()
    hf = AutoModelForCausalLM.from_pretrained(tiny_model_path("nano"))
    names = set(module.hf_state_dict())
    assert names == set(hf.state_dict())


def test_lora_ships_adapters_only_and_merges_for_engines():
    module = build(lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    state = module.get_state(inference_only=True)
    assert state and all("lora_" in k for k in state)
    hf_names = set(AutoModelForCausalLM.from_pretrained(tiny_model_path("nano")).state_dict())
    with torch.no_grad():  # a trained adapter (B starts at zero, which would hide a missing delta)
        for name, p in module.lm.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    before = {k: v.clone() for k, v in module.lm.state_dict().items()}
    shipped = module.hf_state_dict()
    assert set(shipped) == hf_names
    reference = copy.deepcopy(module.lm).merge_and_unload().state_dict()  # peft's own merge
    for name, tensor in reference.items():
        torch.testing.assert_close(shipped[name], tensor, rtol=0, atol=1e-6, msg=name)
    assert not torch.equal(shipped["model.layers.0.self_attn.q_proj.weight"],
                           before["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"])
    for name, tensor in module.lm.state_dict().items():  # the module itself is left exactly as it was
        assert torch.equal(tensor, before[name]), name


@pytest.mark.parametrize("bf16_units", [False, True])
def test_auto_precision_resolves_lazily_on_the_input_device(monkeypatch, bf16_units):
    """dtype/autocast at "auto": fp32 weights on CPU; autocast resolved at the first forward on the ids' device."""
    from ragen_rllib.core import precision

    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: bf16_units)
    module = build()  # both keys left at their "auto" default
    assert all(p.dtype == torch.float32 for p in module.parameters())
    assert module._autocast_dtypes == {}  # nothing resolved at build time (RLlib moves the module later)
    ids = torch.randint(0, 1000, (2, 9))
    with torch.no_grad():
        auto = module.forward_train({K.INPUT_IDS: ids})[K.LOGPROBS]
        expected = gather_token_logprobs(module.lm(input_ids=ids).logits, ids)  # fp32 reference
    assert module._autocast_dtypes == {"cpu": torch.bfloat16 if bf16_units else None}
    gap = (auto - expected).abs().max().item()
    assert gap > 1e-4 if bf16_units else gap < 1e-5


@pytest.mark.parametrize("key, value", [("autocast", "fp16"), ("dtype", "fp8")])
def test_bad_precision_values_are_rejected_at_build(key, value):
    with pytest.raises(ValueError, match=rf"model_config\['{key}'\]='{value}' is invalid"):
        build(**{key: value})


@pytest.mark.parametrize("entropy_coeff", [0.0, 0.01])
def test_entropy_carries_gradients_only_when_the_loss_uses_it(entropy_coeff):
    from ray.rllib.core import DEFAULT_MODULE_ID

    from ragen_rllib import RagenConfig

    config = (RagenConfig().environment("ragen/FrozenLake-v0")
              .rl_module(model_config={"model": "tiny:nano"})
              .training(adv_estimator="grpo", entropy_coeff=entropy_coeff))
    learner = config.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    assert module.entropy_requires_grad is (entropy_coeff != 0)
    out = module.forward_train({K.INPUT_IDS: torch.randint(0, 1000, (2, 9))})
    assert out[K.LOGPROBS].requires_grad
    assert out[K.ENTROPY].requires_grad is (entropy_coeff != 0)
    assert torch.all(out[K.ENTROPY][:, 1:] > 0)  # still computed for the metric


def test_micro_batched_update_takes_the_same_step_as_one_pass():
    """Gradient accumulation over micro-batches of 1 and 3 rows == one pass over the whole minibatch."""
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from ragen_rllib import RagenConfig

    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (6, 10))
    mask = torch.zeros(6, 10)
    mask[:, 4:] = 1
    mask[2, 7:] = 0
    batch = {K.INPUT_IDS: ids.numpy(), K.ATTENTION_MASK: torch.ones(6, 10).numpy(), K.LOSS_MASK: mask.numpy(),
             K.ADVANTAGES: (torch.randn(6, 1) * mask).numpy(), K.SAMPLE_LOGPROBS: torch.zeros(6, 10).numpy(),
             K.LOSS_SCALE: torch.ones(6).numpy(), K.MICRO_WEIGHT: torch.ones(6).numpy()}
    params, metrics = [], []
    for micro in (6, 1, 3):
        config = (RagenConfig().environment("ragen/FrozenLake-v0")
                  .rl_module(model_config={"model": "tiny:nano", "autocast": None})  # fp32 numerics
                  .training(adv_estimator="grpo", micro_batch_size=micro, lr=1e-2, grad_clip=None, entropy_coeff=0.01))
        learner = config.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})
        result = learner.update(batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(dict(batch))}, env_steps=6),
                                minibatch_size=6, num_epochs=1, num_total_minibatches=1)
        module = learner.module[DEFAULT_MODULE_ID].unwrapped()
        params.append(torch.cat([p.detach().flatten() for p in module.lm.parameters()]))
        metrics.append([result[DEFAULT_MODULE_ID][key].peek() for key in (K.ENTROPY_METRIC, K.GRAD_NORM)])
    # Adam's step g / (sqrt(v) + eps) amplifies summation-order noise on near-zero gradients (seen on AMX CPUs:
    # one weight of 160k off by 2.5e-5); 1e-4 is 1% of the lr-sized step, and the grad norm check below is exact.
    torch.testing.assert_close(params[1], params[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(params[2], params[0], atol=1e-4, rtol=1e-4)
    # Adam hides a gradient scale error in the step; the gradient norm does not
    assert metrics[1] == pytest.approx(metrics[0], rel=1e-4) and metrics[2] == pytest.approx(metrics[0], rel=1e-4)


@pytest.mark.parametrize("variant", [{"logprob_chunk": 4}, {"logprob_chunk": 0, "gradient_checkpointing": True},
                                     {"logprob_chunk": 3, "gradient_checkpointing": True,
                                      "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}}])
def test_chunked_logits_and_gradient_checkpointing_change_memory_not_results(variant):
    """Every output and every gradient equals the plain full-logits pass of the same weights."""
    lora = variant.get("lora")
    plain = build(value_head=True, autocast=None, logprob_chunk=0, lora=lora)
    other = build(value_head=True, autocast=None, **variant)
    other.load_state_dict(plain.state_dict())
    torch.manual_seed(0)
    with torch.no_grad():
        for module in (plain, other):  # a non-zero value head, the same in both
            getattr(module, VALUE_HEAD).weight.copy_(torch.linspace(-1, 1, module.value_head.weight.numel())
                                                     .view_as(module.value_head.weight))
    ids = torch.randint(0, 1000, (2, 11))
    outs, grads = [], []
    for module in (plain, other):
        module.train()
        out = module.forward_train({K.INPUT_IDS: ids})
        loss = out[K.LOGPROBS].sum() + 0.1 * out[K.ENTROPY].sum() + out[K.VALUES].pow(2).sum()
        params = [p for p in module.parameters() if p.requires_grad]
        outs.append(out)
        grads.append(torch.autograd.grad(loss, params))
    for key in (K.LOGPROBS, K.ENTROPY, K.VALUES):
        torch.testing.assert_close(outs[1][key], outs[0][key], atol=1e-5, rtol=1e-5)
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(*grads):  # equal up to float summation order (chunks sum the tied head's gradient in parts)
        assert (b - a).norm() <= 1e-5 * a.norm() + 1e-7, ((b - a).norm(), a.norm())


@pytest.mark.parametrize("detach", [False, True])
def test_a_detached_value_head_keeps_the_value_loss_off_the_backbone(detach):
    """With ``detach_value_head`` the value loss trains the head only; without it, it moves the backbone too. The
    values themselves are the same either way."""
    module = build(value_head=True, autocast=None, detach_value_head=detach)
    with torch.no_grad():  # a non-zero head, so the value loss has a gradient below the head
        module.value_head.weight.copy_(torch.linspace(-1, 1, module.value_head.weight.numel())
                                       .view_as(module.value_head.weight))
    ids = torch.randint(0, 1000, (2, 7))
    out = module.forward_train({K.INPUT_IDS: ids})
    backbone = [p for p in module.lm.parameters() if p.requires_grad]
    head_grad, *grads = torch.autograd.grad((out[K.VALUES] - 1).pow(2).sum(), [module.value_head.weight, *backbone],
                                            allow_unused=True)
    assert head_grad.norm() > 0
    moved = sum(float(g.norm()) for g in grads if g is not None)
    assert (moved == 0) if detach else (moved > 0)
    other = build(value_head=True, autocast=None, detach_value_head=not detach)
    other.load_state_dict(module.state_dict())
    torch.testing.assert_close(other.forward_train({K.INPUT_IDS: ids})[K.VALUES], out[K.VALUES])
