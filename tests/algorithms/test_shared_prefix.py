"""The common prefix of a batch computed once: equal hidden states, log-probs and gradients to the plain pass."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from ragen_rllib.algorithms.ragen.torch.shared_prefix import common_prefix_length, shared_prefix_hidden
from ragen_rllib.models.tiny import tiny_model_path


def test_common_prefix_length_on_hand_made_rows():
    ids = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 7, 4]])
    assert common_prefix_length(ids) == 2
    assert common_prefix_length(ids[:2]) == 3
    assert common_prefix_length(ids[:1]) == 4  # one row: all of it
    assert common_prefix_length(torch.tensor([[5, 1], [6, 1]])) == 0


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_pretrained(tiny_model_path("nano"), dtype=torch.float32)
    return lm.train()


def rows(prefix: int, rest: int, n: int = 4) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    head = torch.randint(5, 500, (1, prefix), generator=gen).expand(n, -1)
    return torch.cat([head, torch.randint(5, 500, (n, rest), generator=gen)], dim=1)


def grads_of(model, fn):
    model.zero_grad()
    out = fn()
    out.pow(2).mean().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_shared_prefix_equals_the_plain_pass_in_values_and_gradients(model):
    ids = rows(40, 12)
    decoder = model.get_decoder()
    plain, plain_grads = grads_of(model, lambda: decoder(input_ids=ids).last_hidden_state)
    shared, shared_grads = grads_of(model, lambda: shared_prefix_hidden(decoder, ids))
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-5)
    assert plain_grads.keys() == shared_grads.keys() and plain_grads
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_short_prefixes_and_single_rows_take_the_plain_pass(model, monkeypatch):
    decoder = model.get_decoder()
    calls = []
    original = decoder.forward
    monkeypatch.setattr(decoder, "forward", lambda *a, **k: calls.append(k.get("input_ids").shape) or original(*a, **k))
    shared_prefix_hidden(decoder, rows(8, 20))  # 8 < MIN_SHARED_PREFIX
    shared_prefix_hidden(decoder, rows(40, 12, n=1))
    shared_prefix_hidden(decoder, rows(40, 60))  # 40 of 100 tokens < MIN_SHARED_FRACTION
    shared_prefix_hidden(decoder, rows(40, 12))
    assert calls == [(4, 28), (1, 52), (4, 100), (1, 40), (4, 12)]


def test_the_rl_module_gives_the_same_logprobs_with_and_without_sharing():
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule
    from ragen_rllib.core import keys as K
    from ragen_rllib.envs.base import text_space

    def build(share):
        torch.manual_seed(0)
        return RLModuleSpec(module_class=RagenTorchRLModule, observation_space=text_space(),
                            action_space=text_space(),
                            model_config={"model": "tiny:nano", "autocast": None, "share_prompt_prefix": share,
                                          "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj"]}}).build()

    ids = rows(48, 10)
    out = {share: build(share)._forward_train({K.INPUT_IDS: ids}) for share in (True, False)}
    for key in (K.LOGPROBS, K.ENTROPY):
        torch.testing.assert_close(out[True][key], out[False][key], rtol=0, atol=1e-5)
