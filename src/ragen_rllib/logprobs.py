"""Token log-probabilities of a causal LM and their masked mean: the one definition shared by SFT, the RL
learner and tests."""

from __future__ import annotations

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
