"""Micro-batches sized by tokens (verl's ``use_dynamic_bsz`` / ``ppo_max_token_len_per_gpu``): pure functions.

A micro-batch is a set of rows of a right-padded ``[B, T]`` minibatch. Its padded size is ``rows x its longest
row``: attention is causal, so the columns after a micro-batch's longest row can be cut without changing any
output at a real position (:func:`row_lengths` gives each row's length, :func:`pack_by_tokens` the rows of
each micro-batch).
"""

from __future__ import annotations

import torch


def row_lengths(attention_mask: torch.Tensor | None, rows: int, width: int) -> torch.Tensor:
    """Length of each right-padded row: one past its last real token.

    Args:
        attention_mask: ``[B, T]`` (1 or True on real tokens), or None (every row is ``width`` long).
        rows: ``B`` (used when ``attention_mask`` is None).
        width: ``T`` (used when ``attention_mask`` is None).

    Returns:
        ``[B]`` int64 lengths in ``[0, T]`` (0 for a row without a real token).
    """
    if attention_mask is None:
        return torch.full((rows,), width, dtype=torch.int64)
    real = attention_mask != 0
    if real.shape[1] == 0:
        return torch.zeros(real.shape[0], dtype=torch.int64)
    positions = torch.arange(1, real.shape[1] + 1, device=real.device).expand_as(real)
    return torch.where(real, positions, torch.zeros_like(positions)).amax(dim=1).to(torch.int64).cpu()


def pack_by_tokens(lengths: torch.Tensor, max_tokens: int | None, max_rows: int) -> list[torch.Tensor]:
    """Partition rows into micro-batches whose padded size ``rows x longest row`` stays within ``max_tokens``.

    Rows are taken longest first (ties: lower index first), and each micro-batch takes the next rows while
    ``(rows + 1) x its first (longest) row <= max_tokens`` and ``rows < max_rows``. Sorting by length keeps rows
    of similar length together, so little padding is left; a row longer than ``max_tokens`` goes alone (the
    budget is then exceeded by that row only). Deterministic: the same lengths give the same micro-batches.

    Args:
        lengths: ``[B]`` row lengths (see :func:`row_lengths`; 0 counts as 1).
        max_tokens: token budget of one micro-batch (padded cells); None: no token limit (rows only).
        max_rows: at most this many rows per micro-batch (``micro_batch_size``, >= 1).

    Returns:
        Row indices of each micro-batch (int64 tensors, each sorted ascending), longest micro-batch rows first;
        together they hold every row exactly once. ``B == 0`` gives ``[]``.

    Raises:
        ValueError: ``max_rows < 1`` or ``max_tokens < 1``.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows={max_rows} must be >= 1 (micro_batch_size)")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} must be >= 1 or None (max_tokens_per_micro_batch)")
    sizes = [max(int(n), 1) for n in lengths.tolist()]
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    parts: list[list[int]] = []
    longest = 0
    for i in order:
        current = parts[-1] if parts else None
        fits = current is not None and len(current) < max_rows and (
            max_tokens is None or (len(current) + 1) * longest <= max_tokens)
        if fits:
            current.append(i)
        else:
            parts.append([i])
            longest = sizes[i]
    return [torch.tensor(sorted(p), dtype=torch.int64) for p in parts]


def padded_tokens(lengths: torch.Tensor, parts: list[torch.Tensor]) -> list[int]:
    """Padded size ``rows x longest row`` of each micro-batch: ``[B]`` lengths, row-index tensors -> ints."""
    return [int(len(p)) * max(int(lengths[p].max()), 1) for p in parts]
