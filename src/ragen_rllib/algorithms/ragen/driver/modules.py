"""The driver's work per RL module: a multi-agent run's trajectories split by the module that sampled them, each
module's reward shaping, group filter and batch under that module's own settings (RLlib's
``get_config_for_module``: ``algorithm_config_overrides_per_module``). A one-module run is the special case with
one entry, ``default_policy``, and its metrics keep their plain names."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from ray.rllib.core import DEFAULT_MODULE_ID

from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.algorithms.ragen.driver.batch import build_batch
from ragen_rllib.algorithms.ragen.driver.reward_shaping import shape_rewards
from ragen_rllib.algorithms.ragen.driver.rollout_filter import filter_trajectories
from ragen_rllib.core import keys as K
from ragen_rllib.core.modules import is_trained, module_ids


@dataclass
class Prepared:
    """What one training step learns from: each trained module's kept trajectories and filter metrics, and the
    metrics to log (prefixed ``<module>/`` when the run has several modules)."""

    kept: dict[str, list[Trajectory]] = field(default_factory=dict)
    filter_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.kept.values())


def split_by_module(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    """``{module_id: trajectories}`` in order of first appearance (a trajectory without one: ``default_policy``)."""
    out: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        out.setdefault(t.module_id or DEFAULT_MODULE_ID, []).append(t)
    return out


def prepare(trajectories: Sequence[Trajectory], config) -> Prepared:
    """Reward shaping and the group filter of every trained module, each with its own settings."""
    several = len(module_ids(config)) > 1
    out = Prepared()
    for module_id, trajs in split_by_module(trajectories).items():
        if not is_trained(config, module_id):
            continue
        cfg = config.get_config_for_module(module_id)
        shaped, shaping = shape_rewards(trajs, cfg)
        kept, filtered = filter_trajectories(shaped, cfg)
        if kept:
            out.kept[module_id], out.filter_metrics[module_id] = kept, filtered
        prefix = f"{module_id}/" if several else ""
        out.metrics.update({prefix + k: v for k, v in {**shaping, **filtered}.items()})
    return out


@dataclass(frozen=True)
class ModuleUpdate:
    """One module's learner update: its batch (numpy columns) and the minibatch plan RLlib's update takes."""

    module_id: str
    batch: dict[str, np.ndarray]
    minibatch_size: int
    num_epochs: int
    num_total_minibatches: int


def module_updates(prepared: Prepared, pad_id: int, config) -> list[ModuleUpdate]:
    """Each trained module's batch, built with its own estimator settings (:func:`build_batch`), and its
    minibatches: its own ``minibatch_size`` and ``num_epochs``, equal minibatch counts on every learner (DDP
    deadlocks otherwise). Modules update one after another: a module's minibatches never repeat rows to match
    another module's size (as one multi-module RLlib update would)."""
    learners = max(config.num_learners, 1)
    trainable = {m: kept for m, kept in prepared.kept.items() if _has_samples(kept)}
    out = []
    # a module none of whose agents moved this step (the other side forfeited first) sits the step out; with no
    # trainable module at all, build_batch names the problem
    for module_id, kept in (trainable or prepared.kept).items():
        cfg = config.get_config_for_module(module_id)
        batch = build_batch(kept, pad_id, config=cfg)
        filtered = prepared.filter_metrics.get(module_id)
        if cfg.filter_loss_scale and filtered:
            batch[K.LOSS_SCALE][:] = filtered[K.FILTER_KEPT_RATIO]
        shard = math.ceil(len(batch[K.INPUT_IDS]) / learners)
        minibatch = min(cfg.minibatch_size, shard)
        out.append(ModuleUpdate(module_id, batch, minibatch, cfg.num_epochs,
                                cfg.num_epochs * math.ceil(shard / minibatch)))
    return out


def _has_samples(trajectories: Sequence[Trajectory]) -> bool:
    return any(t.error is None and any(any(s.loss_mask) for s in t.samples) for t in trajectories)
