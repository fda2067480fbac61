import math

import pytest
import torch

from ragen_rllib.rl.logprobs import gather_token_logprobs, masked_mean


def test_gather_token_logprobs_by_hand():
    # vocab 2; logits at t=0 favour token 1 by log(3): p(1) = 3/4
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0], [5.0, 5.0]]])
    ids = torch.tensor([[0, 1, 0]])
    out = gather_token_logprobs(logits, ids)
    assert out.shape == (1, 3)
    assert torch.allclose(out, torch.tensor([[0.0, math.log(0.75), math.log(0.5)]]))
    # temperature 2 halves the logit gap: p(1) = sqrt(3) / (1 + sqrt(3))
    t2 = gather_token_logprobs(logits, ids, temperature=2.0)
    assert torch.isclose(t2[0, 1], torch.tensor(math.log(math.sqrt(3) / (1 + math.sqrt(3)))))


def test_masked_mean():
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = torch.tensor([[0, 1, 1], [1, 0, 0]])
    assert masked_mean(v, m).item() == (2 + 3 + 4) / 3
    assert masked_mean(v, torch.zeros_like(m)).item() == 0.0


def _full_entropy(logits, temperature):
    from ragen_rllib.rl.losses import entropy_from_logits

    scaled = logits / temperature if temperature not in (0.0, 1.0) else logits
    return torch.nn.functional.pad(entropy_from_logits(scaled[:, :-1]), (1, 0))


class ScaledHead(torch.nn.Module):
    """Not a plain Linear: chunks go through activation checkpointing instead of the fused step."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(8, 11)

    @property
    def weight(self):
        return self.inner.weight

    def forward(self, h):
        return 0.5 * self.inner(h)


@pytest.mark.parametrize("chunk", [1, 3, 7, 50])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("kind", ["linear", "linear_bias", "module"])
@pytest.mark.parametrize("vocab_slice", [16384, 3])
def test_chunked_logprobs_and_entropy_equal_the_full_pass_with_the_same_gradients(chunk, temperature, kind,
                                                                                   vocab_slice, monkeypatch):
    from ragen_rllib.rl import logprobs
    from ragen_rllib.rl.logprobs import chunked_token_logprobs

    monkeypatch.setattr(logprobs, "VOCAB_SLICE", vocab_slice)  # 3: the 11-token vocabulary in 4 slices
    torch.manual_seed(0)
    head = {"linear": lambda: torch.nn.Linear(8, 11, bias=False), "linear_bias": lambda: torch.nn.Linear(8, 11),
            "module": ScaledHead}[kind]()
    hidden = torch.randn(2, 7, 8, requires_grad=True)
    ids = torch.randint(0, 11, (2, 7))
    logits = head(hidden)
    full_logp, full_ent = gather_token_logprobs(logits, ids, temperature), _full_entropy(logits, temperature)
    logp, ent = chunked_token_logprobs(hidden, head, ids, temperature, chunk=chunk, entropy=True)
    assert logp.shape == ent.shape == (2, 7) and logp[:, 0].eq(0).all() and ent[:, 0].eq(0).all()
    assert torch.allclose(logp, full_logp, atol=1e-6) and torch.allclose(ent, full_ent, atol=1e-6)
    weights = torch.randn(2, 7)
    grads = torch.autograd.grad((full_logp * weights).sum() + full_ent.sum(), [hidden, head.weight])
    chunked = torch.autograd.grad((logp * weights).sum() + ent.sum(), [hidden, head.weight])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, chunked))


def test_chunked_entropy_can_be_detached_and_skipped():
    from ragen_rllib.rl.logprobs import chunked_token_logprobs

    head = torch.nn.Linear(4, 5)
    hidden = torch.randn(1, 6, 4, requires_grad=True)
    ids = torch.randint(0, 5, (1, 6))
    logp, ent = chunked_token_logprobs(hidden, head, ids, chunk=2, entropy=True, entropy_grad=False)
    assert ent.shape == logp.shape == (1, 6)
    assert logp.requires_grad and not ent.requires_grad
    assert chunked_token_logprobs(hidden, head, ids, entropy=False)[1] is None
    with torch.no_grad():
        assert torch.equal(chunked_token_logprobs(hidden, head, ids, chunk=2)[0], logp.detach())


def test_chunked_fused_step_under_bf16_autocast_matches_autograd(monkeypatch):
    from ragen_rllib.rl import logprobs
    from ragen_rllib.rl.logprobs import chunked_token_logprobs

    monkeypatch.setattr(logprobs, "VOCAB_SLICE", 16)
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 40, bias=False)
    hidden = torch.randn(2, 9, 16, requires_grad=True)
    ids = torch.randint(0, 40, (2, 9))
    weights = torch.randn(2, 9)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = head(hidden)
        full_logp, full_ent = gather_token_logprobs(logits, ids), _full_entropy(logits, 1.0)
        logp, ent = chunked_token_logprobs(hidden, head, ids, chunk=4, entropy=True)
    torch.testing.assert_close(logp, full_logp)
    torch.testing.assert_close(ent, full_ent)
    full = torch.autograd.grad((full_logp * weights).sum() + full_ent.sum(), [hidden, head.weight])
    fused = torch.autograd.grad((logp * weights).sum() + ent.sum(), [hidden, head.weight])
    for a, b in zip(full, fused):
        assert (a - b).norm() <= 2e-2 * a.norm(), ((a - b).norm(), a.norm())  # bf16 matmuls on both sides


@pytest.mark.parametrize("linear", [True, False])
def test_masked_token_logprobs_equal_the_chunked_ones_on_the_mask_with_gradients(linear):
    from ragen_rllib.rl.logprobs import chunked_token_logprobs, masked_token_logprobs

    torch.manual_seed(0)
    hidden = torch.randn(3, 17, 8, requires_grad=True)
    lin = torch.nn.Linear(8, 50)
    head = lin if linear else (lambda h: lin(h) * 1.0)  # a non-Linear head takes the chunked path
    ids = torch.randint(0, 50, (3, 17))
    mask = torch.rand(3, 17) > 0.6
    mask[0, 0] = True  # t = 0 is never scored
    full, full_ent = chunked_token_logprobs(hidden, head, ids, 0.7, chunk=4, entropy=True)
    part, part_ent = masked_token_logprobs(hidden, head, ids, mask, 0.7, chunk=4, entropy=True)
    scored = mask.clone()
    scored[:, 0] = False
    assert torch.allclose(part, full * scored, atol=1e-6) and torch.allclose(part_ent, full_ent * scored, atol=1e-6)
    assert (part[~scored] == 0).all() and (part[scored] != 0).all()
    want = torch.autograd.grad((full * scored).sum() + (full_ent * scored).sum(), [hidden, lin.weight])
    got = torch.autograd.grad(part.sum() + part_ent.sum(), [hidden, lin.weight])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(want, got))
    empty, _ = masked_token_logprobs(hidden, head, ids, torch.zeros_like(mask))
    assert empty.shape == ids.shape and (empty == 0).all()
