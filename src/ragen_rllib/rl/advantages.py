"""Advantage estimators for multi-turn token sequences (StarPO).

Conventions (all functions):

- ``mask`` ``[B, T]`` (bool or 0/1) marks the *trained* tokens: the assistant's tokens. Prompt and
  environment tokens between assistant turns have ``mask == 0`` and are skipped by every recursion
  (a trained token's "next" token is the next *trained* token, as in verl's multi-turn GAE); outputs
  are 0 there, and rewards or values placed there are ignored.
- Computation runs in float32 (float64 inputs stay float64); outputs have that dtype.
- Nothing here tracks gradients on purpose; call under ``torch.no_grad()`` if the inputs require grad.
- Group statistics use the *unbiased* std (``torch.std``, divisor ``n - 1``), as verl does.
"""

from __future__ import annotations

import torch

from ragen_rllib.rl.logprobs import bool_mask
from ragen_rllib.rl.tokens import (
    compute_dtype,
    group_stats,
    masked_whiten,
    scatter_to_tokens,
)


def _masked_gae_scan(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    stop: torch.Tensor | None = None,
) -> torch.Tensor:
    """Backward GAE over the positions where ``mask`` is true, skipping the others.

    For a trained position ``t`` with next trained position ``t'`` (none: terminal, value 0)::

        delta_t = r_t + gamma * V_{t'} - V_t
        A_t     = delta_t + gamma * lam * A_{t'}

    ``stop [B, T]`` (bool) cuts the chain *after* position ``t``: ``V_{t'}`` and ``A_{t'}`` are taken
    as 0 there (a segment end). Returns ``[B, T]`` advantages, 0 where ``mask`` is false.
    """
    B, T = rewards.shape
    zero = torch.zeros(B, dtype=rewards.dtype, device=rewards.device)
    next_value, next_adv = zero, zero
    out = torch.zeros_like(rewards)
    for t in reversed(range(T)):
        if stop is not None:
            next_value = torch.where(stop[:, t], zero, next_value)
            next_adv = torch.where(stop[:, t], zero, next_adv)
        m = mask[:, t]
        adv = rewards[:, t] + gamma * next_value - values[:, t] + gamma * lam * next_adv
        out[:, t] = torch.where(m, adv, zero)
        next_value = torch.where(m, values[:, t], next_value)
        next_adv = torch.where(m, adv, next_adv)
    return out


def _prepare(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor):
    if not (token_rewards.shape == values.shape == mask.shape) or token_rewards.dim() != 2:
        raise ValueError(
            f"token_rewards, values and mask must share one [B, T] shape; got {tuple(token_rewards.shape)}, "
            f"{tuple(values.shape)}, {tuple(mask.shape)}"
        )
    dtype = compute_dtype(values)
    return token_rewards.to(dtype), values.to(dtype), bool_mask(mask)


def gae(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,  # discount per trained token (RAGEN default 1)
    lam: float = 1.0,  # GAE lambda (RAGEN default 1)
    whiten: bool = True,  # whiten the advantages over all masked tokens of the batch (verl)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE over trained tokens only (verl's multi-turn GAE).

    With ``t'`` the next trained token after ``t`` in the same row (none: terminal, ``V = 0``)::

        delta_t = r_t + gamma * V_{t'} - V_t,   A_t = delta_t + gamma * lam * A_{t'},   R_t = A_t + V_t

    Args:
        token_rewards: ``[B, T]`` rewards (typically from :func:`token_rewards`).
        values: ``[B, T]`` critic values.
        mask: ``[B, T]`` trained tokens.

    Returns:
        ``(advantages [B, T], returns [B, T])``, both 0 off the mask. Returns are never whitened; the
        advantages are :func:`masked_whiten`-ed when ``whiten``.
    """
    rewards, values, m = _prepare(token_rewards, values, mask)
    adv = _masked_gae_scan(rewards, values, m, gamma, lam)
    returns = torch.where(m, adv + values, torch.zeros_like(adv))
    return (masked_whiten(adv, m) if whiten else adv), returns


def _check_turn_ends(turn_ends: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Validate ``turn_ends [B, N]`` against ``mask [B, T]``; return the bool ``[B, N]`` of real turns."""
    B, T = mask.shape
    if turn_ends.dim() != 2 or turn_ends.shape[0] != B:
        raise ValueError(f"turn_ends must be [B={B}, N]; got {tuple(turn_ends.shape)}")
    valid = turn_ends >= 0
    if bool(((turn_ends < -1) | (turn_ends >= T)).any()):
        raise ValueError(f"turn_ends must lie in [0, {T}) or be -1 (padding); got {turn_ends.tolist()}")
    if bool((valid[:, 1:] & ~valid[:, :-1]).any()):
        raise ValueError("turn_ends padding (-1) must come after the real turns")
    if bool((valid[:, 1:] & (turn_ends[:, 1:] <= turn_ends[:, :-1])).any()):
        raise ValueError(f"turn_ends must be strictly increasing within a row; got {turn_ends.tolist()}")
    if bool((valid & ~mask.gather(1, turn_ends.clamp(min=0))).any()):
        raise ValueError("every turn end must be a trained token (mask == 1 there)")
    last_end = torch.where(valid, turn_ends, -1).amax(dim=1) if turn_ends.shape[1] else turn_ends.new_full((B,), -1)
    positions = torch.arange(T, device=mask.device).expand(B, T)
    last_trained = torch.where(mask, positions, -1).amax(dim=1)
    if bool((last_trained > last_end).any()):
        raise ValueError("a row has trained tokens after its last turn end (or trained tokens but no turns)")
    return valid


def bilevel_gae(
    turn_rewards: torch.Tensor,
    turn_ends: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    high_gamma: float = 0.95,  # discount between turns (RAGEN's high_level_gamma)
    gamma: float = 1.0,  # discount between tokens inside a turn
    lam: float = 1.0,  # GAE lambda, used at both levels (as RAGEN does)
    whiten: bool = True,  # whiten the advantages over all masked tokens of the batch
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bi-level GAE: turn-level GAE across turn ends, then token-level GAE inside each turn.

    Turn ``k`` of a row owns the trained tokens in ``(e_{k-1}, e_k]`` with ``e_k = turn_ends[b, k]``;
    ``W_k = values[b, e_k]`` is the critic's value at the turn end.

    1. Turn level, over the real turns, with ``W_{K+1} = 0`` after the last one::

           d_k = r_k + high_gamma * W_{k+1} - W_k,   H_k = d_k + high_gamma * lam * H_{k+1},   G_k = H_k + W_k

    2. Token level, inside each turn separately: the turn end takes the reward ``G_k`` and a terminal
       next value 0, so ``A_{e_k} = G_k - W_k = H_k``; an earlier trained token ``t`` of the turn with
       next trained token ``t'`` gets ``A_t = gamma * V_{t'} - V_t + gamma * lam * A_{t'}``.
       Returns are ``A_t + V_t`` (``G_k`` at the turn end).

    This is what RAGEN's ``compute_bi_level_gae_advantage_return`` intends (its wiring is broken).
    Only the turn rewards enter; token rewards elsewhere are not supported.

    Args:
        turn_rewards: ``[B, N]`` per-turn rewards (padded turns ignored).
        turn_ends: ``[B, N]`` long, strictly increasing per row, ``-1`` padding at the end; each must be a
            trained token, and no trained token may follow a row's last turn end (``ValueError``).
        values: ``[B, T]`` critic values.
        mask: ``[B, T]`` trained tokens.

    Returns:
        ``(advantages [B, T], returns [B, T])``, 0 off the mask; advantages whitened when ``whiten``.
    """
    dtype = compute_dtype(values)
    values = values.to(dtype)
    m = bool_mask(mask)
    if values.shape != m.shape or values.dim() != 2:
        raise ValueError(f"values and mask must share one [B, T] shape; got {tuple(values.shape)}, {tuple(m.shape)}")
    if turn_rewards.shape != turn_ends.shape:
        raise ValueError(f"turn_rewards {tuple(turn_rewards.shape)} and turn_ends {tuple(turn_ends.shape)} differ")
    turn_ends = turn_ends.long()
    valid = _check_turn_ends(turn_ends, m)
    T = values.shape[1]
    end_values = values.gather(1, turn_ends.clamp(min=0))
    turn_adv = _masked_gae_scan(turn_rewards.to(dtype), end_values, valid, high_gamma, lam)
    targets = turn_adv + end_values  # G_k
    rewards = scatter_to_tokens(targets, turn_ends, T, "turn_ends").to(dtype)
    stop = scatter_to_tokens(valid.to(dtype), turn_ends, T, "turn_ends") > 0
    adv = _masked_gae_scan(rewards, values, m, gamma, lam, stop=stop)
    returns = torch.where(m, adv + values, torch.zeros_like(adv))
    return (masked_whiten(adv, m) if whiten else adv), returns


def grpo(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    eps: float = 1e-6,  # added to the group std (RAGEN / verl value)
    norm_by_std: bool = True,  # False: Dr. GRPO (mean-centering only)
) -> torch.Tensor:
    """GRPO outcome advantage ``(R_i - mean_g) / (std_g + eps)`` (Dr. GRPO: ``R_i - mean_g``).

    ``std_g`` is the unbiased std (``torch.std``, as verl). A group of size 1 gets advantage 0 (verl
    instead uses mean 0 / std 1 there, i.e. the raw score), and a constant group gets exactly 0.

    Args:
        scores: ``[B]`` sequence rewards.
        group_ids: ``[B]`` long; sequences with equal ids form a group.

    Returns:
        ``[B]`` advantages (broadcast with :func:`broadcast_to_tokens`).
    """
    _, inv, count, mean, std = group_stats(scores, group_ids)
    dev = scores.to(mean.dtype) - mean[inv]
    adv = dev / (std[inv] + eps) if norm_by_std else dev
    return torch.where(count[inv] > 1, adv, torch.zeros_like(adv))


def rloo(scores: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """RLOO advantage ``R_i - mean(R_j, j != i in the group)`` (``= n/(n-1) * (R_i - mean_g)``).

    Args:
        scores: ``[B]``; group_ids: ``[B]`` long.

    Returns:
        ``[B]`` advantages; 0 for singleton groups.
    """
    _, inv, count, mean, _ = group_stats(scores, group_ids)
    n = count[inv].to(mean.dtype)
    adv = (scores.to(mean.dtype) - mean[inv]) * n / (n - 1).clamp(min=1)
    return torch.where(count[inv] > 1, adv, torch.zeros_like(adv))


def reinforce_pp(
    token_rewards: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,  # discount per trained token
    whiten: bool = True,  # whiten over all masked tokens of the batch (REINFORCE++)
) -> torch.Tensor:
    """REINFORCE++ advantage: discounted return-to-go over trained tokens, whitened over the batch.

    ``G_t = r_t + gamma * G_{t'}`` with ``t'`` the next trained token (none: 0). Masked tokens are
    skipped, not reset: verl resets the running return at every masked token, which in multi-turn
    sequences would cut the final reward off from all earlier turns.

    Args:
        token_rewards: ``[B, T]``; mask: ``[B, T]``.

    Returns:
        ``[B, T]`` advantages, 0 off the mask.
    """
    m = bool_mask(mask)
    if token_rewards.shape != m.shape or m.dim() != 2:
        raise ValueError(f"token_rewards and mask must share one [B, T] shape; got {tuple(token_rewards.shape)}, "
                         f"{tuple(m.shape)}")
    rewards = token_rewards.to(compute_dtype(token_rewards))
    zeros = torch.zeros_like(rewards)
    # A return-to-go is GAE with V = 0 and lambda = 1.
    returns = _masked_gae_scan(rewards, zeros, m, gamma, 1.0)
    return masked_whiten(returns, m) if whiten else returns


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """Return-to-go over valid steps: ``G_t = r_t + gamma * G_{t+1}`` (``[B, N]`` each; 0 off the mask).

    Steps are turns here (GiGPO); padding steps (mask 0) are skipped, not reset.
    """
    m = bool_mask(mask)
    if rewards.shape != m.shape or m.dim() != 2:
        raise ValueError(f"rewards and mask must share one [B, N] shape; got {tuple(rewards.shape)}, {tuple(m.shape)}")
    r = rewards.to(compute_dtype(rewards))
    return _masked_gae_scan(r, torch.zeros_like(r), m, gamma, 1.0)


def gigpo(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    step_rewards: torch.Tensor,
    step_mask: torch.Tensor,
    state_ids: torch.Tensor,
    gamma: float = 0.95,  # discount of the step returns (verl-agent's GiGPO default)
    step_weight: float = 1.0,  # omega: weight of the step-level advantage (verl-agent default)
    norm_by_std: bool = True,  # False: mean-centering only at both levels
    eps: float = 1e-6,
) -> torch.Tensor:
    """GiGPO (arXiv 2505.10978) per-step advantage ``A_E(episode) + step_weight * A_S(step)``.

    ``A_E`` is GRPO over each group's episode scores. ``A_S`` groups the steps of one env group by their
    anchor state (equal ``state_ids`` within equal ``group_ids``) and normalises each step's discounted
    return ``G_t`` (:func:`discounted_returns`) within its anchor group, like GRPO; a state met only once
    in the group gets ``A_S = 0``.

    Args:
        scores: ``[B]`` episode rewards.
        group_ids: ``[B]`` long; episodes of one group share the env seed.
        step_rewards: ``[B, N]`` reward of each step (turn).
        step_mask: ``[B, N]`` 1 for real steps, 0 for padding.
        state_ids: ``[B, N]`` long id of the observation each step acted on (equal id = identical text).

    Returns:
        ``[B, N]`` advantages, 0 off the mask (put on tokens with :func:`steps_to_tokens`).
    """
    m = bool_mask(step_mask)
    if not (step_rewards.shape == m.shape == state_ids.shape) or m.dim() != 2 or scores.shape != group_ids.shape \
            or scores.shape[0] != m.shape[0]:
        raise ValueError(f"gigpo needs scores/group_ids [B] and step_rewards/step_mask/state_ids [B, N]; got "
                         f"{tuple(scores.shape)}, {tuple(group_ids.shape)}, {tuple(step_rewards.shape)}, "
                         f"{tuple(m.shape)}, {tuple(state_ids.shape)}")
    episode = grpo(scores, group_ids, eps=eps, norm_by_std=norm_by_std)
    returns = discounted_returns(step_rewards, m, gamma)
    rows = group_ids.unsqueeze(-1).expand_as(state_ids)[m]
    _, anchor = torch.unique(torch.stack([rows, state_ids[m]], dim=-1), dim=0, return_inverse=True)
    step = grpo(returns[m], anchor, eps=eps, norm_by_std=norm_by_std)
    out = torch.zeros_like(returns)
    out[m] = episode.to(out.dtype).unsqueeze(-1).expand_as(out)[m] + step_weight * step
    return out
