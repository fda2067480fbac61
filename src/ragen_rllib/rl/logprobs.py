"""Token log-probabilities of a causal LM and their masked mean: the one definition shared by SFT, the RL
learner and tests."""

from __future__ import annotations

from collections.abc import Callable

import torch


def gather_token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-prob of each token given the tokens before it.

    Args:
        logits: ``[B, T, V]`` next-token logits (``logits[:, t]`` predicts ``input_ids[:, t + 1]``).
        input_ids: ``[B, T]`` token ids.
        temperature: logits are divided by it first (0 or 1: unchanged), as the engines sample.

    Returns:
        ``[B, T]`` where ``out[:, t] = log p(input_ids[:, t] | input_ids[:, :t])`` and ``out[:, 0] = 0``.
    """
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(picked, (1, 0), value=0.0)


def bool_mask(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` as bool (bool or 0/1 input)."""
    return mask if mask.dtype == torch.bool else mask != 0


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is true (0 where nothing is masked in). The one definition, shared by
    SFT, the RL losses and the advantage estimators.

    Args:
        values: any shape ``S``.
        mask: shape ``S`` (bool or 0/1). Positions outside it may hold NaN/inf: they are never read.
        dim: reduce over this dim only (``None``: over everything, scalar result).
    """
    m = bool_mask(mask)
    picked = torch.where(m, values, torch.zeros((), dtype=values.dtype, device=values.device))
    count = m.sum() if dim is None else m.sum(dim)
    total = picked.sum() if dim is None else picked.sum(dim)
    return total / count.clamp(min=1).to(values.dtype)


def chunked_token_logprobs(
    hidden: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    input_ids: torch.Tensor,
    temperature: float = 1.0,
    chunk: int = 256,
    entropy: bool = False,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Token log-probs (and entropies) from the last hidden states, never holding more than ``chunk``
    positions of vocabulary-sized logits: equal to ``gather_token_logprobs(head(hidden), ...)`` and the
    shifted entropy of ``head(hidden)``, in a fraction of the memory.

    A plain ``torch.nn.Linear`` head takes the fused step (:class:`_LinearLogprobs`): all positions at once,
    the vocabulary a slice at a time, backward recomputing each slice once with the closed-form gradient. Any
    other head goes a chunk of ``chunk`` positions at a time, under activation checkpointing when gradients
    are on. Either way memory scales with the hidden size, not the vocabulary.

    Args:
        hidden: ``[B, T, H]`` last hidden states (after the final norm).
        head: maps ``[B, C, H]`` to ``[B, C, V]`` logits (the LM head).
        input_ids: ``[B, T]`` token ids.
        temperature: logits are divided by it first (0 or 1: unchanged).
        chunk: positions per chunk.
        entropy: also return the entropies.
        entropy_grad: whether the entropies carry gradients (else detached).

    Returns:
        ``([B, T] log-probs, [B, T] entropies or None)``, both float32 and 0 at ``t = 0``.
    """
    from torch.utils.checkpoint import checkpoint

    temp = 1.0 if temperature in (0.0, 1.0) else float(temperature)
    linear = type(head) is torch.nn.Linear

    def piece(h: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = torch.log_softmax(head(h).float() / temp, dim=-1)
        picked = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return picked, (-(logp.exp() * logp).sum(-1) if entropy else picked.new_zeros(()))

    steps = input_ids.shape[1] - 1
    grad = torch.is_grad_enabled() and (hidden.requires_grad or any(p.requires_grad for p in head.parameters()))
    if linear and steps > 0:  # every position at once, the vocabulary in slices (see _LinearLogprobs)
        picked, ent = _LinearLogprobs.apply(hidden[:, :steps], head.weight, head.bias, input_ids[:, 1:], temp,
                                            entropy)  # without grad mode, autograd keeps nothing for backward
        pad = torch.nn.functional.pad
        ent_out = pad(ent if entropy_grad else ent.detach(), (1, 0), value=0.0) if entropy else None
        return pad(picked, (1, 0), value=0.0), ent_out
    logps, ents = [], []
    for start in range(0, max(steps, 0), chunk):
        h, targets = hidden[:, start:min(start + chunk, steps)], input_ids[:, start + 1:min(start + chunk, steps) + 1]
        if grad:
            picked, ent = checkpoint(piece, h, targets, use_reentrant=False)
        else:
            picked, ent = piece(h, targets)
        logps.append(picked)
        ents.append(ent if entropy_grad else ent.detach())
    pad = torch.nn.functional.pad
    empty = hidden.new_zeros((hidden.shape[0], 0), dtype=torch.float32)
    logp = pad(torch.cat(logps, dim=1) if logps else empty, (1, 0), value=0.0)
    ent = pad(torch.cat(ents, dim=1) if ents else empty, (1, 0), value=0.0) if entropy else None
    return logp, ent


class _LinearLogprobs(torch.autograd.Function):
    """Log-probs of ``targets`` and entropies under ``softmax((h @ W.T + b) / temp)`` for all positions at once,
    a slice of the vocabulary at a time (``VOCAB_SLICE`` rows of ``W``): logits never exist for more than one
    slice. Forward keeps a running logsumexp and a running ``sum exp(z) * z`` (the entropy); backward recomputes
    each slice once and applies the closed-form gradient ``d logp_y / d z = onehot(y) - p`` and
    ``d H / d z = -p * (log p + H)`` (z: the scaled logits). Each slice of ``W``'s gradient is written once, and
    the gradient of ``h`` (small: positions x hidden) is accumulated. Matmuls run in the autocast dtype active in
    forward (as ``head(h)`` would), the softmax math in float32."""

    @staticmethod
    def forward(ctx, h, weight, bias, targets, temp, entropy):
        kind = h.device.type
        amp = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None
        shape = h.shape[:-1]
        flat, idx = h.reshape(-1, h.shape[-1]), targets.reshape(-1)
        dtype = amp or h.dtype
        hd = flat.to(dtype)
        n = flat.shape[0]
        big = torch.full((n,), -float("inf"), device=h.device)
        total = torch.zeros(n, device=h.device)  # sum exp(z - big)
        weighted = torch.zeros(n, device=h.device)  # sum exp(z - big) * z
        picked = torch.zeros(n, device=h.device)
        with torch.autocast(kind, enabled=False):
            for v0 in range(0, weight.shape[0], VOCAB_SLICE):
                z = _slice_logits(hd, weight, bias, v0, dtype, temp)
                new = torch.maximum(big, z.max(-1).values)
                rescale = torch.exp(big - new)
                e = torch.exp(z - new.unsqueeze(-1))
                total = total * rescale + e.sum(-1)
                weighted = weighted * rescale + (e * z).sum(-1)
                big = new
                inside = (idx >= v0) & (idx < v0 + z.shape[-1])
                picked = torch.where(inside, z.gather(-1, (idx - v0).clamp(0, z.shape[-1] - 1).unsqueeze(-1))
                                     .squeeze(-1), picked)
        lse = big + torch.log(total)
        ent = lse - weighted / total  # H = logsumexp(z) - sum p z
        ctx.save_for_backward(h, weight, bias, targets, lse, ent)
        ctx.temp, ctx.entropy, ctx.amp = temp, entropy, amp
        out_ent = ent.view(shape) if entropy else torch.zeros(shape, device=h.device)
        return (picked - lse).view(shape), out_ent

    @staticmethod
    def backward(ctx, g_picked, g_ent):
        h, weight, bias, targets, lse, ent = ctx.saved_tensors
        dtype = ctx.amp or h.dtype
        flat, idx = h.reshape(-1, h.shape[-1]), targets.reshape(-1)
        hd = flat.to(dtype)
        gp = g_picked.reshape(-1).float()
        ge = g_ent.reshape(-1).float() if ctx.entropy and g_ent is not None else None
        grad_h = torch.zeros(flat.shape, dtype=torch.float32, device=h.device) if ctx.needs_input_grad[0] else None
        grad_w = torch.empty_like(weight) if ctx.needs_input_grad[1] else None
        grad_b = torch.empty_like(bias) if bias is not None and ctx.needs_input_grad[2] else None
        with torch.autocast(h.device.type, enabled=False):
            for v0 in range(0, weight.shape[0], VOCAB_SLICE):
                z = _slice_logits(hd, weight, bias, v0, dtype, ctx.temp)
                v1 = v0 + z.shape[-1]
                logp = z - lse.unsqueeze(-1)
                p = torch.exp(logp)
                grad_z = p * (-gp).unsqueeze(-1)
                inside = (idx >= v0) & (idx < v1)
                rows = inside.nonzero().squeeze(-1)
                grad_z[rows, idx[rows] - v0] += gp[rows]
                if ge is not None:
                    grad_z -= p * (logp + ent.unsqueeze(-1)) * ge.unsqueeze(-1)
                if ctx.temp != 1.0:
                    grad_z /= ctx.temp
                gz = grad_z.to(dtype)
                if grad_h is not None:
                    grad_h += (gz @ weight[v0:v1].to(dtype)).float()
                if grad_w is not None:
                    grad_w[v0:v1] = (gz.T @ hd).to(weight.dtype)
                if grad_b is not None:
                    grad_b[v0:v1] = grad_z.sum(0).to(bias.dtype)
        grad_h = grad_h.to(h.dtype).view(h.shape) if grad_h is not None else None
        return grad_h, grad_w, grad_b, None, None, None


#: vocabulary rows per slice of the fused log-prob step (logits of one slice: positions x VOCAB_SLICE floats)
VOCAB_SLICE = 16384


def _slice_logits(hd: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, v0: int, dtype: torch.dtype,
                  temp: float) -> torch.Tensor:
    """float32 logits ``[N, slice]`` of vocabulary rows ``v0:v0 + VOCAB_SLICE``, divided by ``temp``."""
    w = weight[v0:v0 + VOCAB_SLICE].to(dtype)
    b = None if bias is None else bias[v0:v0 + VOCAB_SLICE].to(dtype)
    z = torch.nn.functional.linear(hd, w, b).float()
    return z / temp if temp != 1.0 else z


def masked_token_logprobs(
    hidden: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    input_ids: torch.Tensor,
    mask: torch.Tensor,
    temperature: float = 1.0,
    chunk: int = 256,
    entropy: bool = False,
    entropy_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`chunked_token_logprobs` at the positions of ``mask`` only, zeros elsewhere: the LM head (the
    vocabulary-sized part of the pass) runs on the masked tokens alone. In multi-turn RL those are the sampled
    responses, a few percent of a row, while the head is a large share of a learner update when it runs on every
    position.

    Args:
        hidden: ``[B, T, H]`` last hidden states; ``head``, ``input_ids``, ``temperature``, ``chunk``,
            ``entropy``, ``entropy_grad``: as :func:`chunked_token_logprobs`.
        mask: ``[B, T]`` (bool or 0/1): the tokens whose log-probs (and entropies) are needed; ``t = 0`` is
            never scored.

    Returns:
        ``([B, T] log-probs, [B, T] entropies or None)``, float32; equal to :func:`chunked_token_logprobs`'s
        outputs where ``mask`` is set (t >= 1) and 0 elsewhere, gradients included.
    """
    keep = bool_mask(mask).clone()
    keep[:, 0] = False
    rows, cols = keep.nonzero(as_tuple=True)  # token (b, t) is predicted from hidden[b, t - 1]
    # one row: the selected hidden states, then a dummy state that predicts nothing the caller reads
    picked_hidden = torch.cat([hidden[rows, cols - 1], hidden.new_zeros((1, hidden.shape[-1]))])[None]
    targets = torch.cat([input_ids.new_zeros(1), input_ids[rows, cols]])[None]
    logp, ent = chunked_token_logprobs(picked_hidden, head, targets, temperature, chunk, entropy, entropy_grad)
    shape = input_ids.shape

    def scatter(values: torch.Tensor) -> torch.Tensor:
        out = values.new_zeros(shape)
        return out.index_put((rows, cols), values[0, 1:])

    return scatter(logp), (scatter(ent) if ent is not None else None)


def model_token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, temperature: float = 1.0,
                         chunk: int = 256) -> torch.Tensor:
    """``[B, T]`` log-probs of ``input_ids`` under a Hugging Face causal LM ``model`` (0 at t = 0), float32.

    With ``chunk`` > 0 and a model whose logits are its head applied to the last hidden states, the chunked path
    (:func:`chunked_token_logprobs`: no ``[B, T, V]`` logits, equal results); ``chunk=0``, models without a
    decoder or that post-process logits (``final_logit_softcapping``): the full logits.
    """
    decoder = getattr(model, "get_decoder", lambda: None)()
    softcap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    if not chunk or decoder is None or softcap:
        return gather_token_logprobs(model(input_ids=input_ids).logits, input_ids, temperature).float()
    hidden = decoder(input_ids=input_ids).last_hidden_state
    return chunked_token_logprobs(hidden, model.get_output_embeddings(), input_ids, temperature, chunk=chunk)[0]
