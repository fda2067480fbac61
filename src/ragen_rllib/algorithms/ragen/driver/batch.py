"""Turn env-runner trajectories into the learner's padded batch (numpy columns, built on the driver)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.algorithms.ragen.estimators import DRIVER, DriverInputs, estimator
from ragen_rllib.core import keys as K


def build_batch(trajectories: Sequence[Trajectory], pad_id: int, config) -> dict[str, np.ndarray]:
    """One row per training sample (``full`` mode: one per trajectory), right-padded to the longest.

    Every sample carries its trajectory's score, group id and episode id. The driver rows of
    :data:`~.estimators.ESTIMATORS` compute their advantages here, over whole groups and the whole batch, so
    sharding the batch over learners never splits a group's statistics (or REINFORCE++'s batch whitening).
    Group statistics count each episode once, however many samples its context mode made of it.

    Writes the driver's columns of :data:`~.keys.COLUMNS` (ADVANTAGES are zeros for learner estimators, and
    LOSS_SCALE / MICRO_WEIGHT ones, until their writers set them). ``config`` (a RagenConfig) names the estimator
    and holds its settings, which the driver rows read from it as the learner rows do; with
    ``old_logprobs="engine"`` samples whose engine returned no sampling log-probs are rejected.
    """
    rows = [(t, s) for t in trajectories if t.error is None for s in t.samples if any(s.loss_mask)]
    if not rows:
        raise ValueError("no trainable samples in this batch (every trajectory failed or had no sampled tokens)")
    if config.old_logprobs == "engine" and not all(s.has_logprobs for _, s in rows):
        raise ValueError("old_logprobs='engine' uses the engine's sampling log-probs, but this engine returned none "
                         "for some sampled turns: use old_logprobs='learner' (recompute them) or an engine that "
                         "returns log-probs (vllm, hf)")
    width = max(len(s.input_ids) for _, s in rows)
    turns = max(len(s.turn_ends) for _, s in rows)
    n = len(rows)
    cols = {
        K.INPUT_IDS: np.full((n, width), pad_id, dtype=np.int64),
        K.ATTENTION_MASK: np.zeros((n, width), dtype=np.int64),
        K.LOSS_MASK: np.zeros((n, width), dtype=np.float32),
        K.SAMPLE_LOGPROBS: np.zeros((n, width), dtype=np.float32),
        K.TURN_ENDS: np.full((n, turns), -1, dtype=np.int64),
        K.TURN_REWARDS: np.zeros((n, turns), dtype=np.float32),
        K.LAST_INDEX: np.zeros(n, dtype=np.int64),
        K.SCORES: np.zeros(n, dtype=np.float32),
        K.GROUP_IDS: np.zeros(n, dtype=np.int64),
        K.EPISODE_IDS: np.zeros(n, dtype=np.int64),
        K.ADVANTAGES: np.zeros((n, width), dtype=np.float32),
        K.LOSS_SCALE: np.ones(n, dtype=np.float32),
        K.MICRO_WEIGHT: np.ones(n, dtype=np.float32),
    }
    episodes: dict[int, int] = {}
    for i, (traj, s) in enumerate(rows):
        length = len(s.input_ids)
        cols[K.INPUT_IDS][i, :length] = s.input_ids
        cols[K.ATTENTION_MASK][i, :length] = 1
        cols[K.LOSS_MASK][i, :length] = s.loss_mask
        cols[K.SAMPLE_LOGPROBS][i, :length] = s.logprobs
        cols[K.TURN_ENDS][i, : len(s.turn_ends)] = s.turn_ends
        cols[K.TURN_REWARDS][i, : len(s.turn_rewards)] = s.turn_rewards
        cols[K.LAST_INDEX][i] = max(j for j, m in enumerate(s.loss_mask) if m)
        cols[K.SCORES][i] = traj.score
        cols[K.GROUP_IDS][i] = traj.group_id
        cols[K.EPISODE_IDS][i] = episodes.setdefault(id(traj), len(episodes))
    row = estimator(config.adv_estimator)
    if row.where == DRIVER:
        cols[K.ADVANTAGES] = row.compute(DriverInputs(cols, rows, turns, config)).numpy().astype(np.float32)
    return cols


def padding_fraction(batch: dict[str, np.ndarray]) -> float:
    """Share of the padded batch that is padding."""
    return 1.0 - float(batch[K.ATTENTION_MASK].mean())
