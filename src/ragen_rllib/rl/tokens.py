"""Masked statistics and token placement for ``[B, T]`` token sequences (pure tensor functions).

The conventions of :mod:`ragen_rllib.rl.advantages` hold here: ``mask`` ``[B, T]`` (bool or 0/1) marks the
trained tokens; outputs are 0 off it; group statistics use the unbiased std.
"""

from __future__ import annotations

import math

import torch

from ragen_rllib.rl.logprobs import bool_mask, masked_mean

WHITEN_EPS = 1e-8  # added to the variance before the rsqrt in masked_whiten (verl's value)


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = WHITEN_EPS) -> torch.Tensor:
    """``(x - mean) / sqrt(var + eps)`` over the masked entries of the whole tensor (verl ``masked_whiten``).

    The variance is unbiased (divisor ``n - 1``). Masked-out entries come back as 0; with 0 or 1 masked
    entries the result is all 0 (verl raises there instead).

    Args:
        values: ``[B, T]``.
        mask: ``[B, T]``.
    """
    m = bool_mask(mask)
    n = m.sum()
    mean = masked_mean(values, m)
    centered = torch.where(m, values - mean, torch.zeros((), dtype=values.dtype, device=values.device))
    var = (centered**2).sum() / (n - 1).clamp(min=1).to(values.dtype)
    return centered * torch.rsqrt(var + eps)


def scatter_to_tokens(values: torch.Tensor, index: torch.Tensor, length: int, name: str) -> torch.Tensor:
    """Put ``values [B, K]`` at token positions ``index [B, K]`` (-1: dropped) of a ``[B, length]`` zero tensor."""
    if index.shape != values.shape:
        raise ValueError(f"{name} has shape {tuple(index.shape)} but the values have {tuple(values.shape)}")
    index = index.long()
    if bool(((index < -1) | (index >= length)).any()):
        raise ValueError(f"{name} must lie in [0, {length}) or be -1 (padding); got {index.tolist()}")
    valid = index >= 0
    dtype = compute_dtype(values)
    out = torch.zeros(values.shape[0], length + 1, dtype=dtype, device=values.device)
    src = torch.where(valid, values.to(dtype), torch.zeros((), dtype=dtype, device=values.device))
    out.scatter_add_(1, torch.where(valid, index, length), src)  # padding lands in the extra column
    return out[:, :length]


def token_rewards(scores: torch.Tensor, last_index: torch.Tensor, T: int) -> torch.Tensor:
    """Place one scalar per sequence on one token (the trajectory reward on the last trained token).

    Args:
        scores: ``[B]`` sequence rewards.
        last_index: ``[B]`` long, token index in ``[0, T)``; ``-1`` means "no trained token" (row of 0).
        T: sequence length.

    Returns:
        ``[B, T]`` zeros except ``out[b, last_index[b]] = scores[b]``.
    """
    return scatter_to_tokens(scores.unsqueeze(-1), last_index.unsqueeze(-1), T, "last_index")


def turn_token_rewards(turn_rewards: torch.Tensor, turn_ends: torch.Tensor, T: int) -> torch.Tensor:
    """Place each turn's reward on that turn's last trained token (``use_turn_scores``).

    Args:
        turn_rewards: ``[B, N]`` per-turn rewards (entries at padded turns are ignored).
        turn_ends: ``[B, N]`` long, token index of each turn's last trained token, ``-1`` for padding.
        T: sequence length.

    Returns:
        ``[B, T]`` with ``out[b, turn_ends[b, n]] += turn_rewards[b, n]`` for every real turn.
    """
    return scatter_to_tokens(turn_rewards, turn_ends, T, "turn_ends")


def group_stats(
    scores: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group count, mean and unbiased std of ``scores``.

    Args:
        scores: ``[B]``.
        group_ids: ``[B]`` long, any values.

    Returns:
        ``(unique_ids [G] sorted, inverse [B], count [G], mean [G], std [G])``. ``std`` uses divisor
        ``n - 1`` (``torch.std``); it is exactly 0 for singleton groups and for groups whose scores are
        all equal (no float residue).
    """
    if scores.dim() != 1 or scores.shape != group_ids.shape:
        raise ValueError(f"scores and group_ids must both be [B]; got {tuple(scores.shape)}, {tuple(group_ids.shape)}")
    x = scores.to(compute_dtype(scores))
    uniq, inv = torch.unique(group_ids, sorted=True, return_inverse=True)
    G = uniq.numel()
    count = torch.bincount(inv, minlength=G)
    mean = torch.zeros(G, dtype=x.dtype, device=x.device).index_add_(0, inv, x) / count.clamp(min=1)
    hi = torch.full((G,), -math.inf, dtype=x.dtype, device=x.device).scatter_reduce(0, inv, x, "amax")
    lo = torch.full((G,), math.inf, dtype=x.dtype, device=x.device).scatter_reduce(0, inv, x, "amin")
    constant = hi == lo
    mean = torch.where(constant, hi, mean)  # exact mean of a constant group
    dev = x - mean[inv]
    var = torch.zeros(G, dtype=x.dtype, device=x.device).index_add_(0, inv, dev**2) / (count - 1).clamp(min=1)
    std = torch.where(constant, torch.zeros_like(var), var.sqrt())
    return uniq, inv, count, mean, std


def steps_to_tokens(step_adv: torch.Tensor, step_ends: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Put each step's advantage on its tokens: token ``t`` belongs to the first step whose end is ``>= t``.

    Args:
        step_adv: ``[B, N]`` per-step advantages.
        step_ends: ``[B, N]`` long index of each step's last token, increasing; ``-1`` pads.
        mask: ``[B, T]`` trained tokens.

    Returns:
        ``[B, T]``, 0 off the mask.
    """
    m = bool_mask(mask)
    if step_adv.shape != step_ends.shape or step_adv.shape[0] != m.shape[0]:
        raise ValueError(f"step_adv and step_ends must be [B, N] with the mask's B; got {tuple(step_adv.shape)}, "
                         f"{tuple(step_ends.shape)}, {tuple(m.shape)}")
    T = m.shape[1]
    ends = torch.where(step_ends < 0, torch.full_like(step_ends, T), step_ends).contiguous()
    positions = torch.arange(T, device=m.device).expand(m.shape[0], T).contiguous()
    index = torch.searchsorted(ends, positions).clamp(max=step_adv.shape[1] - 1)
    return torch.where(m, step_adv.gather(1, index), torch.zeros((), dtype=step_adv.dtype, device=step_adv.device))


def broadcast_to_tokens(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Repeat a per-sequence advantage ``[B]`` on every trained token: ``[B, T]``, 0 off the mask."""
    m = bool_mask(mask)
    return torch.where(m, adv.unsqueeze(-1), torch.zeros((), dtype=adv.dtype, device=adv.device))
