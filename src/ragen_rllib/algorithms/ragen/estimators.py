"""The estimator table: every advantage estimator in one row (where it runs, what it needs, its function).

``validate()``, the RL module's value-head default, :func:`~.batch.build_batch` (driver rows) and
:func:`~.ragen_learner.prepare_columns` (learner rows) all read :data:`ESTIMATORS`; nothing else decides.
Adding an estimator = one pure tensor function in :mod:`ragen_rllib.rl.advantages` + one row here (and their
tests); see ``docs/adding_an_estimator.md``.

- ``driver`` rows run in ``build_batch`` over the WHOLE batch (whole groups, batch-wide whitening), so
  sharding the batch over learners never splits their statistics. They get :class:`DriverInputs`.
- ``learner`` rows run on each learner after its no-grad pass (they need that pass's critic values). They
  get :class:`LearnerInputs` and return advantages and value targets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ragen_rllib.core import keys as K
from ragen_rllib.rl.advantages import bilevel_gae, gae, gigpo, grpo, reinforce_pp, rloo
from ragen_rllib.rl.losses import kl_penalty
from ragen_rllib.rl.tokens import (
    broadcast_to_tokens,
    group_stats,
    masked_whiten,
    steps_to_tokens,
    token_rewards,
    turn_token_rewards,
)

DRIVER, LEARNER = "driver", "learner"


@dataclass(frozen=True)
class DriverInputs:
    """What a driver estimator sees: the numpy batch columns (:mod:`~ragen_rllib.core.keys`), the (trajectory,
    sample) pair of each row, the batch's turn width and the Ragen config (its settings, as learner rows get)."""

    cols: dict[str, np.ndarray]
    rows: list[tuple[Any, Any]]
    turns: int
    config: Any

    @property
    def mask(self) -> torch.Tensor:
        """``[B, T]`` loss mask."""
        return torch.as_tensor(self.cols[K.LOSS_MASK])

    @property
    def episode(self) -> torch.Tensor:
        """``[B]`` episode index of each row (rows of one episode share its score and group)."""
        return torch.as_tensor(self.cols[K.EPISODE_IDS])

    def per_episode(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``([E] scores, [E] group ids)``, one entry per episode (its first row)."""
        first = torch.as_tensor(np.unique(self.cols[K.EPISODE_IDS], return_index=True)[1])
        return (torch.as_tensor(self.cols[K.SCORES]).double()[first],
                torch.as_tensor(self.cols[K.GROUP_IDS])[first])


@dataclass(frozen=True)
class LearnerInputs:
    """What a learner estimator sees: the batch columns as tensors on the learner's device, the ``[B, T]``
    critic values and log-probs of the policy before the update, and the Ragen config."""

    batch: dict[str, torch.Tensor]
    values: torch.Tensor
    logprobs: torch.Tensor
    config: Any


@dataclass(frozen=True)
class Estimator:
    """One row of the table.

    Attributes:
        where: ``"driver"`` (``build_batch``, whole batch) or ``"learner"`` (after the learner's no-grad pass).
        critic: needs a value head (the module builds one; ``validate()`` rejects a config that disagrees).
        groups: compares trajectories within a group: needs ``group_size >= 2``.
        compute: driver: ``(DriverInputs) -> [B, T] advantages``; learner: ``(LearnerInputs) -> ([B, T]
            advantages, [B, T] returns)``. Both 0 off the loss mask.
        meaning: one line for the docs and error messages.
        token_rewards: works on per-token rewards, so a KL penalty can go into them (``use_kl_in_reward``).
        check: the row's own setting checks: ``config -> (key, fix)`` or None when the settings fit.
    """

    where: str
    critic: bool
    groups: bool
    compute: Callable[..., Any]
    meaning: str
    token_rewards: bool = False
    check: Callable[[Any], tuple[str, str] | None] | None = None


def problems(name: str, config) -> list[tuple[str, str]]:
    """``(key, fix)`` for every setting of ``config`` that the estimator ``name`` cannot run with: what its row
    says (groups need ``group_size >= 2``; only rows with token rewards take ``use_kl_in_reward``) and the row's
    own ``check``. ``validate()`` reports them; nothing else branches on estimator names."""
    row = estimator(name)
    found = []
    if row.groups and config.group_size < 2:
        found.append(("group_size", f"adv_estimator={name!r} compares trajectories within a group: use "
                                    "group_size >= 2 (RAGEN: 16)"))
    if config.use_kl_in_reward and not row.token_rewards:
        found.append(("use_kl_in_reward", f"a KL penalty in the reward needs token-level rewards, which "
                                          f"adv_estimator={name!r} does not use: use use_kl_loss=True instead"))
    if row.check is not None and (own := row.check(config)) is not None:
        found.append(own)
    return found


# ---------------------------------------------------------------------------- driver rows
def _grpo(inp: DriverInputs, *, std: bool) -> torch.Tensor:
    scores, groups = inp.per_episode()
    adv = grpo(scores, groups, norm_by_std=std and inp.config.grpo_norm_by_std)
    return broadcast_to_tokens(adv[inp.episode], inp.mask)


def _rloo(inp: DriverInputs) -> torch.Tensor:
    scores, groups = inp.per_episode()
    return broadcast_to_tokens(rloo(scores, groups)[inp.episode], inp.mask)


def _reinforce_pp(inp: DriverInputs) -> torch.Tensor:
    mask = inp.mask
    rewards = token_rewards(torch.as_tensor(inp.cols[K.SCORES]).double(), torch.as_tensor(inp.cols[K.LAST_INDEX]),
                            mask.shape[1])
    return reinforce_pp(rewards, mask, gamma=inp.config.gamma)


def _reinforce_pp_baseline(inp: DriverInputs) -> torch.Tensor:
    """Scores minus the group mean, whitened over the batch."""
    scores, groups = inp.per_episode()
    _, inv, _, mean, _ = group_stats(scores, groups)
    return masked_whiten(broadcast_to_tokens((scores - mean[inv])[inp.episode], inp.mask), inp.mask)


def _gigpo(inp: DriverInputs) -> torch.Tensor:
    cfg = inp.config
    turn_adv = gigpo_turn_advantages(inp.rows, inp.turns, gamma=cfg.gigpo_gamma, step_weight=cfg.gigpo_step_weight,
                                     norm_by_std=cfg.grpo_norm_by_std)
    return steps_to_tokens(turn_adv, torch.as_tensor(inp.cols[K.TURN_ENDS]), inp.mask)


def gigpo_turn_advantages(rows, turns: int, **kwargs) -> torch.Tensor:
    """``[n_rows, turns]`` GiGPO advantage of each row's trained turns, computed once per trajectory.

    Anchor states are identified by their exact observation text (``Trajectory.turn_states``); a row's
    trained turns are found by their turn numbers, so every context mode counts each episode once.
    """
    trajs: dict[int, tuple[Any, dict[int, float]]] = {}
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


# ---------------------------------------------------------------------------- learner rows
def _gae(inp: LearnerInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE on the trajectory score (or per-turn rewards), minus the KL to the reference if
    ``use_kl_in_reward``."""
    cfg, batch = inp.config, inp.batch
    mask = batch[K.LOSS_MASK].float()
    width = mask.shape[1]
    if cfg.use_turn_scores:
        rewards = turn_token_rewards(batch[K.TURN_REWARDS].float(), batch[K.TURN_ENDS].long(), width)
    else:
        rewards = token_rewards(batch[K.SCORES].float(), batch[K.LAST_INDEX].long(), width)
    if cfg.use_kl_in_reward:  # r_t -= kl_coeff * KL_t(policy before the update || reference)
        rewards = rewards - cfg.kl_coeff * kl_penalty(inp.logprobs, batch[K.REF_LOGPROBS], cfg.kl_type) * mask
    return gae(rewards, inp.values, mask, gamma=cfg.gamma, lam=cfg.lambda_)


def _bi_level_gae(inp: LearnerInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """RAGEN's bi-level GAE: the score on each row's last turn, discounted between turns (high_level_gamma)."""
    cfg, batch = inp.config, inp.batch
    ends = batch[K.TURN_ENDS].long()
    return bilevel_gae(last_turn_rewards(batch[K.SCORES].float(), ends), ends, inp.values,
                       batch[K.LOSS_MASK].float(), high_gamma=cfg.high_level_gamma, gamma=cfg.gamma, lam=cfg.lambda_)


def last_turn_rewards(scores: torch.Tensor, turn_ends: torch.Tensor) -> torch.Tensor:
    """``[B, N]`` turn rewards with each row's score ``[B]`` on its last real turn (``turn_ends`` -1 pads)."""
    last = ((turn_ends >= 0).sum(dim=1) - 1).clamp(min=0)
    out = torch.zeros(turn_ends.shape, dtype=scores.dtype, device=scores.device)
    return out.scatter(1, last.unsqueeze(1), scores.unsqueeze(1))


# ---------------------------------------------------------------------------- rows' own checks
def _bi_level_gae_check(config) -> tuple[str, str] | None:
    if config.use_turn_scores:
        return ("use_turn_scores", "bi_level_gae puts the trajectory reward on the last turn itself and discounts "
                "between turns with high_level_gamma: set use_turn_scores=False (or use adv_estimator='gae')")
    return None


def _gigpo_check(config) -> tuple[str, str] | None:
    if not 0 <= config.gigpo_gamma <= 1:
        return ("gigpo_gamma", "use a discount in [0, 1] (verl-agent: 0.95)")
    return None


# ---------------------------------------------------------------------------- the table
ESTIMATORS: dict[str, Estimator] = {
    "gae": Estimator(LEARNER, critic=True, groups=False, compute=_gae, token_rewards=True,
                     meaning="PPO: token-level GAE with a learned critic (RAGEN's default)"),
    "bi_level_gae": Estimator(LEARNER, critic=True, groups=False, compute=_bi_level_gae, check=_bi_level_gae_check,
                              meaning="RAGEN's bi-level GAE: GAE within turns, high_level_gamma between turns"),
    "grpo": Estimator(DRIVER, critic=False, groups=True, compute=lambda inp: _grpo(inp, std=True),
                      meaning="GRPO: score minus the group mean, divided by the group std (grpo_norm_by_std)"),
    "dr_grpo": Estimator(DRIVER, critic=False, groups=True, compute=lambda inp: _grpo(inp, std=False),
                         meaning="Dr. GRPO: score minus the group mean, no std division"),
    "rloo": Estimator(DRIVER, critic=False, groups=True, compute=_rloo,
                      meaning="RLOO: score minus the mean of the other trajectories of the group"),
    "reinforce_plus_plus": Estimator(DRIVER, critic=False, groups=False, compute=_reinforce_pp,
                                     meaning="REINFORCE++: discounted token returns whitened over the batch"),
    "reinforce_plus_plus_baseline": Estimator(DRIVER, critic=False, groups=True, compute=_reinforce_pp_baseline,
                                              meaning="REINFORCE++ with the group mean as baseline"),
    "gigpo": Estimator(DRIVER, critic=False, groups=True, compute=_gigpo, check=_gigpo_check,
                       meaning="GiGPO: episode-level group advantage + step-level advantage over anchor states"),
}


def estimator(name: str) -> Estimator:
    """The table row of ``name`` (a clear error for an unknown one)."""
    if name not in ESTIMATORS:
        raise ValueError(f"adv_estimator={name!r} is unknown: use one of {tuple(ESTIMATORS)}")
    return ESTIMATORS[name]
