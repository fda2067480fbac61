"""Reward shaping and normalisation before the advantages (pure tensor functions)."""

from __future__ import annotations

import torch

from ragen_rllib.rl.tokens import group_stats

REWARD_NORMS = ("identity", "mean", "mean_std")
NORM_SCOPES = ("group", "batch")


def overlong_penalty(lengths: torch.Tensor, max_len: int, buffer_len: int, penalty: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment of a response of ``lengths`` tokens (``[N]`` -> ``[N]``, <= 0).

    0 up to ``max_len - buffer_len`` tokens, then linear to ``-penalty`` at ``max_len`` (and beyond)::

        r = -penalty * min(1, max(0, L - (max_len - buffer_len)) / buffer_len)
    """
    if not 0 < buffer_len <= max_len:
        raise ValueError(f"buffer_len={buffer_len} must be in 1..max_len={max_len}")
    over = (lengths.double() - (max_len - buffer_len)).clamp(min=0.0)
    return -penalty * (over / buffer_len).clamp(max=1.0)


def normalize_scores(scores: torch.Tensor, group_ids: torch.Tensor, mode: str = "identity", scope: str = "group",
                     eps: float = 1e-6) -> torch.Tensor:
    """Normalise trajectory rewards ``[B]`` per group or over the batch: ``identity`` | ``mean`` (centre) |
    ``mean_std`` (centre, divide by the unbiased std + eps). Singleton groups centre to 0."""
    if mode not in REWARD_NORMS:
        raise ValueError(f"reward_norm={mode!r} is not supported: use one of {REWARD_NORMS}")
    if scope not in NORM_SCOPES:
        raise ValueError(f"reward_norm_scope={scope!r} is not supported: use one of {NORM_SCOPES}")
    if mode == "identity":
        return scores
    ids = group_ids if scope == "group" else torch.zeros_like(group_ids)
    _, inv, _, mean, std = group_stats(scores, ids)
    out = scores.to(mean.dtype) - mean[inv]
    return out / (std[inv] + eps) if mode == "mean_std" else out
