"""Named algorithm presets: the training settings that make Ragen run PPO, GRPO, Dr. GRPO, DAPO, StarPO-S or GiGPO.

Use ``RagenConfig().preset("dapo")`` (then override anything with ``.training(...)``). Each entry is a
dict of ``training()`` keys; anything not listed keeps its default from :mod:`.hyperparams`.
"""

from __future__ import annotations

PRESETS: dict[str, dict[str, object]] = {
    # RAGEN's default StarPO-PPO: token-level GAE with a critic (gamma = lambda = 1)
    "ppo": {"adv_estimator": "gae"},
    # critic-free, group-normalised outcome advantage
    "grpo": {"adv_estimator": "grpo"},
    # Dr. GRPO: no std division, no per-sequence length normalisation (constant-normalised token sums)
    "dr_grpo": {"adv_estimator": "dr_grpo", "loss_agg_mode": "seq-mean-token-sum"},
    # DAPO: clip-higher + dynamic sampling + token-level loss + overlong reward shaping (RAGEN's copy has none
    # of the last three)
    "dapo": {"adv_estimator": "grpo", "clip_low": 0.2, "clip_high": 0.28, "loss_agg_mode": "token-mean",
             "dynamic_sampling": True, "overlong_buffer_ratio": 0.2},
    # StarPO-S: PPO with variance-based group filtering (RAGEN's published runs keep top_p 0.9 by reward std)
    "starpo_s": {"adv_estimator": "gae", "filter_strategy": "top_p", "filter_value": 0.9},
    # GiGPO: episode-level plus anchor-state step-level group advantages (verl-agent defaults)
    "gigpo": {"adv_estimator": "gigpo", "gigpo_gamma": 0.95, "gigpo_step_weight": 1.0},
}


def preset_settings(name: str) -> dict[str, object]:
    """The ``training()`` keys of preset ``name`` (a copy)."""
    if name not in PRESETS:
        raise ValueError(f"preset={name!r} is unknown: use one of {tuple(PRESETS)}")
    return dict(PRESETS[name])
