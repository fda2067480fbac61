"""Turn env-runner trajectories into the learner's padded batch (numpy columns, built on the driver)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ragen_rllib.algorithms.ragen import keys as K
from ragen_rllib.env.trajectory import Trajectory
from ragen_rllib.rl.advantages import grpo

TURN_ENDS = "turn_ends"  # [B, N] index of each trained turn's last token (-1: padding)
TURN_REWARDS = "turn_rewards"  # [B, N]
LAST_INDEX = "last_index"  # [B] index of the last trained token


def build_batch(trajectories: Sequence[Trajectory], pad_id: int, *, adv_estimator: str,
                grpo_norm_by_std: bool = True) -> dict[str, np.ndarray]:
    """One row per training sample (``full`` mode: one per trajectory), right-padded to the longest.

    Every sample carries its trajectory's score and group id; GRPO advantages are computed here, over
    whole groups, so sharding the batch over learners never splits a group's statistics.
    """
    rows = [(t, s) for t in trajectories if t.error is None for s in t.samples if any(s.loss_mask)]
    if not rows:
        raise ValueError("no trainable samples in this batch (every trajectory failed or had no sampled tokens)")
    width = max(len(s.input_ids) for _, s in rows)
    turns = max(len(s.turn_ends) for _, s in rows)
    n = len(rows)
    cols = {
        K.INPUT_IDS: np.full((n, width), pad_id, dtype=np.int64),
        K.ATTENTION_MASK: np.zeros((n, width), dtype=np.int64),
        K.LOSS_MASK: np.zeros((n, width), dtype=np.float32),
        K.SAMPLE_LOGPROBS: np.zeros((n, width), dtype=np.float32),
        TURN_ENDS: np.full((n, turns), -1, dtype=np.int64),
        TURN_REWARDS: np.zeros((n, turns), dtype=np.float32),
        LAST_INDEX: np.zeros(n, dtype=np.int64),
        K.SCORES: np.zeros(n, dtype=np.float32),
        K.GROUP_IDS: np.zeros(n, dtype=np.int64),
    }
    for i, (traj, s) in enumerate(rows):
        length = len(s.input_ids)
        cols[K.INPUT_IDS][i, :length] = s.input_ids
        cols[K.ATTENTION_MASK][i, :length] = 1
        cols[K.LOSS_MASK][i, :length] = s.loss_mask
        cols[K.SAMPLE_LOGPROBS][i, :length] = s.logprobs
        cols[TURN_ENDS][i, : len(s.turn_ends)] = s.turn_ends
        cols[TURN_REWARDS][i, : len(s.turn_rewards)] = s.turn_rewards
        cols[LAST_INDEX][i] = max(j for j, m in enumerate(s.loss_mask) if m)
        cols[K.SCORES][i] = traj.score
        cols[K.GROUP_IDS][i] = traj.group_id
    if adv_estimator == "grpo":
        adv = grpo(torch.as_tensor(cols[K.SCORES]), torch.as_tensor(cols[K.GROUP_IDS]),
                   norm_by_std=grpo_norm_by_std)
        cols[K.ADVANTAGES] = (adv[:, None] * torch.as_tensor(cols[K.LOSS_MASK])).numpy().astype(np.float32)
    return cols


def padding_fraction(batch: dict[str, np.ndarray]) -> float:
    """Share of the padded batch that is padding."""
    return 1.0 - float(batch[K.ATTENTION_MASK].mean())
