"""Turn env-runner trajectories into the learner's padded batch (numpy columns, built on the driver)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ragen_rllib.algorithms.ragen import keys as K
from ragen_rllib.algorithms.ragen.hyperparams import ADV_ESTIMATORS, CRITIC_ESTIMATORS
from ragen_rllib.env.trajectory import Trajectory
from ragen_rllib.rl.advantages import (
    broadcast_to_tokens,
    gigpo,
    group_stats,
    grpo,
    masked_whiten,
    reinforce_pp,
    rloo,
    steps_to_tokens,
    token_rewards,
)

#: estimators computed here on the driver over the whole batch (the critic ones run on the learner)
DRIVER_ESTIMATORS = tuple(e for e in ADV_ESTIMATORS if e not in CRITIC_ESTIMATORS)

TURN_ENDS = "turn_ends"  # [B, N] index of each trained turn's last token (-1: padding)
TURN_REWARDS = "turn_rewards"  # [B, N]
LAST_INDEX = "last_index"  # [B] index of the last trained token


def build_batch(trajectories: Sequence[Trajectory], pad_id: int, *, adv_estimator: str,
                grpo_norm_by_std: bool = True, gigpo_gamma: float = 0.95, gigpo_step_weight: float = 1.0,
                gamma: float = 1.0) -> dict[str, np.ndarray]:
    """One row per training sample (``full`` mode: one per trajectory), right-padded to the longest.

    Every sample carries its trajectory's score, group id and episode id; the group and batch estimators
    (:data:`DRIVER_ESTIMATORS`) are computed here, over whole groups and the whole batch, so sharding the
    batch over learners never splits a group's statistics (or REINFORCE++'s batch whitening). Group
    statistics count each episode once, however many samples its context mode made of it.
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
        K.EPISODE_IDS: np.zeros(n, dtype=np.int64),
    }
    episodes: dict[int, int] = {}
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
        cols[K.EPISODE_IDS][i] = episodes.setdefault(id(traj), len(episodes))
    if adv_estimator in DRIVER_ESTIMATORS:
        cols[K.ADVANTAGES] = _driver_advantages(rows, cols, turns, adv_estimator, norm_by_std=grpo_norm_by_std,
                                                gigpo_gamma=gigpo_gamma, gigpo_step_weight=gigpo_step_weight,
                                                gamma=gamma).numpy().astype(np.float32)
    return cols


def _driver_advantages(rows, cols, turns: int, estimator: str, *, norm_by_std: bool, gigpo_gamma: float,
                       gigpo_step_weight: float, gamma: float) -> torch.Tensor:
    """``[B, T]`` token advantages of a driver estimator, 0 off the loss mask."""
    mask = torch.as_tensor(cols[K.LOSS_MASK])
    # one entry per episode (rows of one episode share its score and group)
    episode = torch.as_tensor(cols[K.EPISODE_IDS])
    first = torch.as_tensor(np.unique(cols[K.EPISODE_IDS], return_index=True)[1])  # each episode's first row
    scores = torch.as_tensor(cols[K.SCORES]).double()[first]
    groups = torch.as_tensor(cols[K.GROUP_IDS])[first]
    if estimator in ("grpo", "dr_grpo"):
        per_episode = grpo(scores, groups, norm_by_std=norm_by_std and estimator == "grpo")
        return broadcast_to_tokens(per_episode[episode], mask)
    if estimator == "rloo":
        return broadcast_to_tokens(rloo(scores, groups)[episode], mask)
    if estimator == "reinforce_plus_plus":
        rewards = token_rewards(torch.as_tensor(cols[K.SCORES]).double(), torch.as_tensor(cols[LAST_INDEX]),
                                mask.shape[1])
        return reinforce_pp(rewards, mask, gamma=gamma)
    if estimator == "reinforce_plus_plus_baseline":  # scores minus the group mean, whitened over the batch
        _, inv, _, mean, _ = group_stats(scores, groups)
        return masked_whiten(broadcast_to_tokens((scores - mean[inv])[episode], mask), mask)
    turn_adv = _gigpo_turn_advantages(rows, turns, gamma=gigpo_gamma, step_weight=gigpo_step_weight,
                                      norm_by_std=norm_by_std)
    return steps_to_tokens(turn_adv, torch.as_tensor(cols[TURN_ENDS]), mask)


def _gigpo_turn_advantages(rows, turns: int, **kwargs) -> torch.Tensor:
    """``[n_rows, turns]`` GiGPO advantage of each row's trained turns, computed once per trajectory.

    Anchor states are identified by their exact observation text (``Trajectory.turn_states``); a row's
    trained turns are found by their turn numbers, so every context mode counts each episode once.
    """
    trajs: dict[int, tuple[Trajectory, dict[int, float]]] = {}
    for traj, s in rows:
        trajs.setdefault(id(traj), (traj, {}))[1].update(zip(s.turn_numbers, s.turn_rewards))
    order = {key: i for i, key in enumerate(trajs)}
    steps = max(len(t.turn_states) for t, _ in trajs.values())
    rewards = torch.zeros(len(trajs), steps, dtype=torch.float64)
    mask = torch.zeros(len(trajs), steps, dtype=torch.bool)
    states = torch.zeros(len(trajs), steps, dtype=torch.long)
    state_ids: dict[str, int] = {}
    for i, (traj, by_turn) in enumerate(trajs.values()):
        if sorted(by_turn) != list(range(len(traj.turn_states))):
            raise ValueError(f"GiGPO: trajectory (group {traj.group_id}) has {len(traj.turn_states)} turns but its "
                             f"samples train turns {sorted(by_turn)}; every turn must be trained")
        for j, state in enumerate(traj.turn_states):
            rewards[i, j], mask[i, j] = by_turn[j], True
            states[i, j] = state_ids.setdefault(state, len(state_ids))
    scores = torch.as_tensor([t.score for t, _ in trajs.values()], dtype=torch.float64)
    groups = torch.as_tensor([t.group_id for t, _ in trajs.values()], dtype=torch.long)
    adv = gigpo(scores, groups, rewards, mask, states, **kwargs)
    out = torch.zeros(len(rows), turns, dtype=torch.float64)
    for r, (traj, s) in enumerate(rows):
        out[r, :len(s.turn_numbers)] = adv[order[id(traj)], list(s.turn_numbers)]
    return out


def padding_fraction(batch: dict[str, np.ndarray]) -> float:
    """Share of the padded batch that is padding."""
    return 1.0 - float(batch[K.ATTENTION_MASK].mean())
