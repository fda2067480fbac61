"""Collapse diagnostics (pure): RAGEN-2's prompt/reasoning mutual information from cross log-probabilities."""

from __future__ import annotations

import math

import torch


def reasoning_mutual_information(cross_logp: torch.Tensor) -> tuple[float, float]:
    """Estimate ``I(prompt; reasoning)`` from ``cross_logp[i, j] = log p(z_i | x_j)``.

    ``z_i`` is the reasoning sampled for prompt ``x_i``; every reasoning is scored under every prompt of
    the sample. With prompts drawn uniformly from the K in the sample (an InfoNCE-style bound)::

        I ~= mean_i [ log p(z_i | x_i) - log( mean_j p(z_i | x_j) ) ]  in [0, log K]  (nats)

    Near 0: the reasoning no longer depends on the input (RAGEN-2's "template collapse"); near ``log K``:
    every reasoning identifies its own prompt.

    Args:
        cross_logp: ``[K, K]`` summed log-probs of reasoning ``i`` (rows) under prompt ``j`` (columns).

    Returns:
        ``(mi_nats, retrieval_accuracy)``: the estimate and the share of rows whose own prompt scores best.
    """
    if cross_logp.dim() != 2 or cross_logp.shape[0] != cross_logp.shape[1] or cross_logp.shape[0] < 2:
        raise ValueError(f"cross_logp must be [K, K] with K >= 2; got {tuple(cross_logp.shape)}")
    x = cross_logp.double()
    K = x.shape[0]
    own = x.diagonal()
    mi = (own - (torch.logsumexp(x, dim=1) - math.log(K))).mean()
    retrieval = (x.argmax(dim=1) == torch.arange(K)).double().mean()
    return float(mi), float(retrieval)
