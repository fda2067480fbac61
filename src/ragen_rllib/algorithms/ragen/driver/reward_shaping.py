"""Reward shaping on the driver, before the advantages: DAPO's overlong penalty and score normalisation."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.core import keys as K
from ragen_rllib.rl.rewards import normalize_scores, overlong_penalty


def shape_rewards(trajectories: Sequence[Trajectory], cfg) -> tuple[list[Trajectory], dict[str, float]]:
    """New trajectories with shaped rewards (the inputs are left as they are), and the shaping metrics.

    - ``overlong_buffer_ratio`` set: each turn's penalty (:func:`overlong_penalty` of its sampled length
      against ``max_response_tokens``, buffer ``ratio x max_response_tokens`` tokens) is added to that
      turn's reward and to the trajectory score.
    - ``reward_norm`` other than ``identity``: trajectory scores are normalised per group or per batch.
    """
    out, metrics = list(trajectories), {}
    if cfg.overlong_buffer_ratio is not None and out:
        shaped, penalised, turns = [], 0, 0
        buffer = max(1, round(cfg.overlong_buffer_ratio * cfg.max_response_tokens))
        for t in out:
            lengths = torch.tensor([len(r) for r in t.response_ids], dtype=torch.long)
            pen = overlong_penalty(lengths, cfg.max_response_tokens, buffer,
                                   cfg.overlong_penalty).tolist() if len(lengths) else []
            penalised += sum(p < 0 for p in pen)
            turns += len(pen)
            if any(pen):
                samples = [dataclasses.replace(s, turn_rewards=[r + pen[n] for r, n in
                                                                zip(s.turn_rewards, s.turn_numbers)])
                           for s in t.samples]
                t = dataclasses.replace(t, samples=samples, score=t.score + sum(pen))
            shaped.append(t)
        out = shaped
        metrics[K.OVERLONG_TURN_RATE] = penalised / max(turns, 1)
    if cfg.reward_norm != "identity" and out:
        scores = torch.tensor([t.score for t in out], dtype=torch.float64)
        groups = torch.tensor([t.group_id for t in out], dtype=torch.long)
        normed = normalize_scores(scores, groups, cfg.reward_norm, cfg.reward_norm_scope).tolist()
        out = [dataclasses.replace(t, score=float(s)) for t, s in zip(out, normed)]
    return out, metrics
