"""Token log-probabilities of a causal LM: the one definition shared by SFT, the RL learner and tests."""

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


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over positions where ``mask`` is 1 (``[B, T]`` each; 0 when the mask is empty)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)
