"""Policy and value losses for StarPO (PPO-style, verl semantics unless a docstring says otherwise).

Shapes: ``[B, T]`` per-token tensors, ``mask`` marks the trained tokens (bool or 0/1). Metrics come
back as detached 0-dim tensors (no host sync here; call ``.item()`` when logging).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ragen_rllib.rl.logprobs import masked_mean

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_KINDS = ("k1", "k2", "k3", "abs")
LOGRATIO_CLAMP = 20.0  # |log ratio| is clamped to this before exp (verl), so a ratio never overflows
K3_CLAMP = 10.0  # the k3 estimate is clamped to [-K3_CLAMP, K3_CLAMP] (verl low_var_kl)


def _check_choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key}={value!r} is not supported; allowed values: {', '.join(allowed)}")


def aggregate(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",  # how per-token losses become one scalar (RAGEN default token-mean)
    norm: float | None = None,  # constant divisor for "seq-mean-token-sum-norm" (None: T = mask.shape[-1])
) -> torch.Tensor:
    """Reduce a per-token loss ``[B, T]`` to a scalar over the trained tokens.

    Modes:
        - ``"token-mean"``: sum over all trained tokens / their number (every token weighs the same).
        - ``"seq-mean-token-mean"``: mean over tokens per sequence, then mean over sequences.
        - ``"seq-mean-token-sum"``: sum over tokens per sequence, then mean over sequences.
        - ``"seq-mean-token-sum-norm"`` (Dr. GRPO): sum over all trained tokens / a constant, ``norm``
          or ``mask.shape[-1]`` (verl divides by ``T`` only, not by ``B``).

    Sequence means run over rows with at least one trained token; an all-masked batch gives 0.

    Raises:
        ValueError: unknown ``mode``.
    """
    _check_choice("mode", mode, AGG_MODES)
    m = mask if mask.dtype == torch.bool else mask != 0
    zero = torch.zeros((), dtype=loss_mat.dtype, device=loss_mat.device)
    picked = torch.where(m, loss_mat, zero)
    if mode == "token-mean":
        return masked_mean(loss_mat, m)
    if mode == "seq-mean-token-sum-norm":
        return picked.sum() / (float(mask.shape[-1]) if norm is None else float(norm))
    per_seq = picked.sum(-1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / m.sum(-1).clamp(min=1).to(loss_mat.dtype)
    return masked_mean(per_seq, m.any(-1))


def micro_batch_weights(
    mask: torch.Tensor,
    micro_batches: int | Sequence[torch.Tensor],  # rows per contiguous slice, or each micro-batch's row indices
    mode: str = "token-mean",
    widths: Sequence[int] | None = None,  # each micro-batch's trimmed width (None: the minibatch's T for all)
) -> torch.Tensor:
    """Weights that make micro-batch losses add up to the minibatch loss (gradient accumulation).

    ``micro_batches`` is an int ``n`` (rows ``[i * n, (i + 1) * n)`` form micro-batch ``i``) or any partition
    of the rows into index tensors (:func:`ragen_rllib.rl.micro_batches.pack_by_tokens`). Micro-batch ``i`` may be
    trimmed to its first ``widths[i]`` columns (its rows are right-padded, so no trained token is cut). With
    ``w`` returned, ``sum_i w[i] * aggregate(loss_i, mask_i, mode) == aggregate(loss, mask, mode)`` for every mode:
    trained tokens share for ``token-mean``, share of rows with a trained token for the sequence means,
    ``widths[i] / T`` for ``seq-mean-token-sum-norm`` (its divisor is the width: the micro-batch's own in
    :func:`aggregate`, the minibatch's ``T`` in the whole loss). An all-masked minibatch gives zeros (except the
    norm mode, whose loss is then 0 anyway).

    Args:
        mask: ``[B, T]`` loss mask of the minibatch.
        micro_batches: rows per micro-batch (>= 1), or a list of int64 row-index tensors.
        mode: the aggregation mode (see :func:`aggregate`).
        widths: per micro-batch, the number of leading columns it keeps (None: all ``T``).

    Returns:
        ``[number of micro-batches]`` float32 weights.
    """
    _check_choice("mode", mode, AGG_MODES)
    rows, width = mask.shape[0], mask.shape[-1]
    if isinstance(micro_batches, int):
        if micro_batches < 1:
            raise ValueError(f"micro_batch_size={micro_batches} must be >= 1")
        micro_batches = list(torch.arange(rows).split(micro_batches))
    if widths is not None and len(widths) != len(micro_batches):
        raise ValueError(f"{len(widths)} widths for {len(micro_batches)} micro-batches")
    if mode == "seq-mean-token-sum-norm":
        cut = [width] * len(micro_batches) if widths is None else list(widths)
        return torch.tensor([float(w) / float(width) for w in cut], dtype=torch.float32)
    m = (mask != 0).float()
    per_row = m.sum(-1) if mode == "token-mean" else (m.sum(-1) > 0).float()
    counts = torch.stack([per_row[idx.to(per_row.device)].sum() for idx in micro_batches]).cpu() \
        if micro_batches else torch.zeros(0)
    total = counts.sum()
    return counts / total if total > 0 else torch.zeros_like(counts)


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,  # ratio lower bound 1 - clip_low (RAGEN eps_low)
    clip_high: float = 0.28,  # ratio upper bound 1 + clip_high (RAGEN eps_high, "clip-higher")
    dual_clip: float | None = 3.0,  # for A < 0 the loss is capped at -dual_clip * A; None disables
    agg: str = "token-mean",  # see aggregate()
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clipped surrogate with decoupled clip range and dual-clip (verl ``compute_policy_loss``).

    Per token, with ``ratio = exp(clamp(logp - old_logp, -20, 20))``::

        l   = max(-A * ratio, -A * clamp(ratio, 1 - clip_low, 1 + clip_high))
        l   = min(l, -dual_clip * A)   where A < 0 (dual-clip)

    Args:
        logprobs: ``[B, T]`` current policy log-probs (carry the gradient).
        old_logprobs: ``[B, T]`` behaviour log-probs; advantages: ``[B, T]``; mask: ``[B, T]``.

    Returns:
        ``(loss, metrics)``. ``metrics`` over trained tokens: ``clip_fraction`` (the clipped term is
        the active one), ``dual_clip_fraction`` (A < 0 and the dual-clip cap is active), ``approx_kl``
        (mean of ``old_logp - logp``, verl's ``ppo_kl``: a k1 estimate of KL(old || new), may be < 0).
    """
    _check_choice("agg", agg, AGG_MODES)
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip={dual_clip!r} must be > 1.0 (or None to disable)")
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"clip_low={clip_low!r} and clip_high={clip_high!r} must be >= 0")
    m = mask if mask.dtype == torch.bool else mask != 0
    logratio = torch.clamp(logprobs - old_logprobs, -LOGRATIO_CLAMP, LOGRATIO_CLAMP)
    ratio = torch.exp(logratio)
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(loss_unclipped, loss_clipped)
    clipped = loss_clipped > loss_unclipped
    if dual_clip is not None:
        cap = -advantages * dual_clip
        dual = (advantages < 0) & (loss > cap)
        loss = torch.where(advantages < 0, torch.minimum(loss, cap), loss)
    else:
        dual = torch.zeros_like(m)
    metrics = {
        "clip_fraction": masked_mean(clipped.to(logprobs.dtype), m).detach(),
        "dual_clip_fraction": masked_mean(dual.to(logprobs.dtype), m).detach(),
        "approx_kl": masked_mean(-logratio, m).detach(),
    }
    return aggregate(loss, m, agg), metrics


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of ``softmax(logits)`` per position: ``[B, T, V] -> [B, T]``, float32 (float64 stays).

    Computed as ``-sum p * log_softmax`` with 0 * log 0 = 0, so ``-inf`` logits (banned tokens) give
    finite values and finite gradients; logsumexp keeps large logits stable.
    """
    x = logits if logits.dtype == torch.float64 else logits.float()
    logp = torch.log_softmax(x, dim=-1)
    p = logp.exp()
    logp_finite = torch.where(torch.isfinite(logp), logp, torch.zeros((), dtype=x.dtype, device=x.device))
    return -(p * logp_finite).sum(-1)


def kl_penalty(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    kind: str = "k3",  # estimator of KL(policy || ref); RAGEN uses k3 (verl "low_var_kl")
) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from sampled-token log-probs: ``[B, T] -> [B, T]``.

    With ``d = logp - ref_logp``:
        - ``"k1"``: ``d``; ``"abs"``: ``|d|``; ``"k2"``: ``0.5 * d**2``;
        - ``"k3"``: ``exp(-d) + d - 1`` with ``-d`` clamped to [-20, 20] first and the result clamped
          to [-10, 10], as verl's ``low_var_kl``.

    Raises:
        ValueError: unknown ``kind``.
    """
    _check_choice("kind", kind, KL_KINDS)
    d = logprobs - ref_logprobs
    if kind == "k1":
        return d
    if kind == "abs":
        return d.abs()
    if kind == "k2":
        return 0.5 * d.square()
    x = torch.clamp(-d, -LOGRATIO_CLAMP, LOGRATIO_CLAMP)  # log(ref / policy)
    return torch.clamp(torch.exp(x) - x - 1.0, -K3_CLAMP, K3_CLAMP)


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None = 0.5,  # values move at most this far from old_values in the clipped term; None: off
    agg: str = "token-mean",  # see aggregate()
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped value loss ``0.5 * agg(max((v - R)^2, (clamp(v, old - clip, old + clip) - R)^2))`` (verl).

    Args:
        values: ``[B, T]`` current critic values (carry the gradient); old_values: ``[B, T]`` values at
            rollout time; returns: ``[B, T]`` targets; mask: ``[B, T]``.

    Returns:
        ``(loss, {"vf_clip_fraction": fraction of trained tokens where the clipped term is larger})``.
    """
    _check_choice("agg", agg, AGG_MODES)
    m = mask if mask.dtype == torch.bool else mask != 0
    loss_unclipped = (values - returns).square()
    if clip is None:
        loss, clipped = loss_unclipped, torch.zeros_like(m)
    else:
        v_clipped = torch.clamp(values, old_values - clip, old_values + clip)
        loss_clipped = (v_clipped - returns).square()
        loss = torch.maximum(loss_unclipped, loss_clipped)
        clipped = loss_clipped > loss_unclipped
    metrics = {"vf_clip_fraction": masked_mean(clipped.to(values.dtype), m).detach()}
    return 0.5 * aggregate(loss, m, agg), metrics
