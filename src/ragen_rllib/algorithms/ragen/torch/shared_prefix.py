"""The decoder's last hidden states with the rows' common prefix computed once.

GRPO-style batches repeat their prompts: every completion of a group carries the group's whole prompt, and
RAGEN-style prompts of every group open with the same system text. :func:`shared_prefix_hidden` runs the prefix
that all rows of a batch share once (one row), then the rest of every row on top of its key/value cache; the
hidden states equal a plain forward pass up to floating-point rounding, and gradients flow through both parts
(the prefix's hidden states and cache are broadcast to every row, so their gradients sum over the rows).
"""

from __future__ import annotations

import torch

#: shorter common prefixes are not worth a second decoder call
MIN_SHARED_PREFIX = 32
#: nor are prefixes under this share of the rows: the rest then attends through an explicit mask over the cache,
#: which costs more than a short shared prefix saves (a system text under long rows was slower; a group's whole
#: prompt was faster: the figures are in docs/results.md)
MIN_SHARED_FRACTION = 0.5


def common_prefix_length(ids: torch.Tensor) -> int:
    """Length of the longest prefix that every row of ``ids`` ``[B, T]`` shares (``T`` if all rows are equal)."""
    differs = (ids != ids[:1]).any(dim=0)  # [T]: some row differs from the first at this position
    first = torch.nonzero(differs)
    return int(first[0]) if len(first) else ids.shape[1]


def shared_prefix_hidden(decoder, ids: torch.Tensor, min_prefix: int = MIN_SHARED_PREFIX,
                         min_fraction: float = MIN_SHARED_FRACTION) -> torch.Tensor:
    """``decoder(input_ids=ids).last_hidden_state`` ``[B, T, H]``, with the common prefix of the rows computed
    once when it is at least ``min_prefix`` tokens and ``min_fraction`` of ``T`` long, at least one token
    shorter than the rows, and the batch has two rows or more (otherwise the plain pass). ``decoder`` is a
    Hugging Face base model (``get_decoder()``) that takes ``past_key_values``; no attention mask (right
    padding only, as the learner's batches are)."""
    rows, length = ids.shape
    prefix = min(common_prefix_length(ids), length - 1) if rows > 1 else 0
    if prefix < max(min_prefix, min_fraction * length):
        return decoder(input_ids=ids).last_hidden_state
    head = decoder(input_ids=ids[:1, :prefix], use_cache=True)
    cache = head.past_key_values
    cache.batch_repeat_interleave(rows)
    tail = decoder(input_ids=ids[:, prefix:], past_key_values=cache, use_cache=False).last_hidden_state
    return torch.cat([head.last_hidden_state.expand(rows, -1, -1), tail], dim=1)
