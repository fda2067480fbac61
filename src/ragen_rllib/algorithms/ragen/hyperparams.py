"""Every Ragen hyperparameter in one place: name -> (default, one-line meaning). Defaults follow RAGEN.

Agent-layer settings take their defaults from :class:`ragen_rllib.agent.config.AgentConfig` (their one home).
``RagenConfig.__init__`` sets these, ``RagenConfig.training(**kw)`` accepts them, and the docstring of
``training`` is generated from this table.
"""

from __future__ import annotations

from dataclasses import fields

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.rl.filtering import FILTER_METRICS, FILTER_STRATEGIES, KEEP, TOP_P_MODES
from ragen_rllib.rl.rewards import NORM_SCOPES, REWARD_NORMS
from ragen_rllib.rl.schedules import LR_DECAYS

_AGENT = AgentConfig()
AGENT_KEYS = tuple(f.name for f in fields(AgentConfig))

CRITIC_ESTIMATORS = ("gae", "bi_level_gae")  # need a value head; computed on the learner
GROUP_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_plus_plus_baseline", "gigpo")  # need group_size >= 2
ADV_ESTIMATORS = CRITIC_ESTIMATORS + GROUP_ESTIMATORS + ("reinforce_plus_plus",)
ENGINES = ("auto", "vllm", "hf")
OLD_LOGPROBS_SOURCES = ("learner", "engine")

HYPERPARAMS: dict[str, tuple[object, str]] = {
    # ---- rollout (StarPO)
    "env_groups": (8, "env groups sampled per training step (RAGEN: 8)"),
    "group_size": (16, "trajectories per group; a group shares one env seed (RAGEN: 16)"),
    "train_seed_base": (10000, "seed of the first training group; advances by env_groups every step"),
    "train_temperature": (1.0, "sampling temperature of training rollouts"),
    "top_p": (1.0, "nucleus sampling mass of training rollouts"),
    "top_k": (-1, "top-k cut of training rollouts (-1: none)"),
    # ---- validation
    "val_env_groups": (16, "env groups of a validation rollout (RAGEN: 512; small default for CPU)"),
    "val_group_size": (1, "trajectories per validation group"),
    "val_seed": (123, "seed of the first validation group (fixed across evaluations)"),
    "val_temperature": (0.5, "sampling temperature of validation rollouts"),
    # ---- rollout filtering (StarPO-S; whole groups)
    "filter_strategy": (None, f"group filter: None (off) or one of {FILTER_STRATEGIES} (StarPO-S runs: top_p)"),
    "filter_value": (0.9, "the strategy's p / fraction / count (RAGEN's published runs: top_p 0.9; V1: top_k 0.25)"),
    "filter_keep": ("largest", f"keep the groups with the {KEEP} scores"),
    "filter_top_p_mode": ("linear", f"top_p over the scores themselves or their softmax: one of {TOP_P_MODES}"),
    "filter_include_zero": (True, "False: drop groups whose rewards are all equal before the strategy"),
    "filter_metric": ("reward_std", f"group score: one of {FILTER_METRICS}"),
    "filter_loss_scale": (False, "scale the loss by the kept ratio of groups"),
    # ---- DAPO
    "dynamic_sampling": (False, "DAPO: drop groups whose rewards are all equal and sample more until env_groups remain"),
    "dynamic_sampling_max_rounds": (3, "DAPO: at most this many extra sampling rounds per step"),
    "overlong_buffer_ratio": (None, "DAPO overlong shaping: a turn in the last ratio x max_response_tokens tokens "
                              "before the limit is penalised linearly up to -overlong_penalty (DAPO: 0.2; None: off)"),
    "overlong_penalty": (1.0, "DAPO overlong shaping: the penalty at max_response_tokens"),
    # ---- reward normalisation (trajectory scores, before the advantages)
    "reward_norm": ("identity", f"score normalisation: one of {REWARD_NORMS}"),
    "reward_norm_scope": ("group", f"normalise per: one of {NORM_SCOPES}"),
    # ---- diagnostics
    "mi_interval": (None, "RAGEN-2 reasoning-collapse estimate (prompt/reasoning mutual information) every N "
                    "steps (None: off)"),
    "mi_samples": (8, "trajectories (one per group) the mutual-information estimate scores pairwise"),
    # ---- early stops (RAGEN's rules; patience None turns a rule off)
    "early_stop_std_ratio": (0.1, "reward-std collapse: mean in-group reward std below this x the early baseline"),
    "early_stop_std_patience": (10, "... for this many consecutive steps stops training (None: off)"),
    "early_stop_std_baseline_steps": (5, "steps whose mean in-group reward std is the baseline"),
    "early_stop_empty_patience": (5, "stop after this many consecutive empty filtered batches (None: off)"),
    "early_stop_val_floor": (0.01, "validation success below this ..."),
    "early_stop_val_patience": (5, "... on this many consecutive validations stops training (None: off)"),
    # ---- advantages and loss
    "adv_estimator": ("gae", f"advantage estimator: one of {ADV_ESTIMATORS}"),
    "lambda_": (1.0, "GAE lambda (RAGEN: 1.0)"),
    "high_level_gamma": (0.95, "bi-level GAE: discount between turns (RAGEN: 0.95)"),
    "grpo_norm_by_std": (True, "GRPO divides by the in-group reward std (False: Dr. GRPO)"),
    "gigpo_gamma": (0.95, "GiGPO: discount of the per-turn returns compared within an anchor state"),
    "gigpo_step_weight": (1.0, "GiGPO: weight of the step-level (anchor-state) advantage"),
    "use_turn_scores": (False, "put each turn's reward on its last token instead of the trajectory's"),
    "clip_low": (0.2, "lower clip range of the policy ratio (1 - clip_low)"),
    "clip_high": (0.28, "upper clip range of the policy ratio (1 + clip_high; 'clip-higher')"),
    "old_logprobs": ("learner", "pre-update log-probs: 'learner' recomputes them in a no-grad pass (RAGEN); "
                     "'engine' takes the engine's sampling-time log-probs (the behaviour policy; no extra pass)"),
    "dual_clip": (3.0, "dual-clip constant c for negative advantages (None: off)"),
    "entropy_coeff": (0.001, "entropy bonus coefficient"),
    "use_kl_loss": (False, "add a KL loss to the reference policy"),
    "use_kl_in_reward": (False, "subtract kl_coeff x per-token KL to the reference from the token rewards (gae)"),
    "kl_coeff": (0.001, "KL coefficient (as a loss, or in the reward)"),
    "kl_type": ("k3", "KL estimator: k1 | k2 | k3 | abs"),
    "loss_agg_mode": ("token-mean", "loss aggregation: token-mean | seq-mean-token-mean | seq-mean-token-sum"),
    "micro_batch_size": (8, "trajectories per forward/backward pass; gradients accumulate over a minibatch "
                         "(verl's ppo_micro_batch_size_per_gpu; also the chunk of the no-grad pass)"),
    "lr_warmup_steps": (0, "linear learning-rate warm-up over this many training steps (actor and critic)"),
    "lr_decay": ("constant", f"learning-rate decay after the warm-up: one of {LR_DECAYS}"),
    "lr_decay_steps": (None, "training step at which a linear/cosine decay reaches lr_min_ratio x lr "
                       "(counted from step 0, warm-up included)"),
    "lr_min_ratio": (0.0, "floor of the decay, as a fraction of the base learning rate"),
    "critic_lr": (1e-5, "learning rate of the value head (actor lr is `lr`)"),
    "vf_loss_coeff": (1.0, "value loss coefficient"),
    "vf_clip": (0.5, "value clipping range around the old values"),
    # ---- generation engine on env runners
    "engine": ("auto", f"generation engine of env runners: one of {ENGINES} (auto: vLLM if importable, else HF)"),
    "engine_kwargs": ({}, "extra keyword arguments of the engine (e.g. kv_cache_gib, gpu_memory_utilization)"),
    # ---- agent layer (defaults from AgentConfig)
    **{key: (getattr(_AGENT, key), f"agent layer: see AgentConfig.{key}") for key in AGENT_KEYS},
}

#: RLlib settings whose defaults Ragen changes: name -> (value, why).
RLLIB_OVERRIDES: dict[str, tuple[object, str]] = {
    "lr": (1e-6, "actor learning rate (RAGEN: 1e-6; LoRA: 1e-5)"),
    "grad_clip": (1.0, "gradient norm clip"),
    "grad_clip_by": ("global_norm", "clip the global gradient norm"),
    "num_epochs": (1, "PPO epochs per training step"),
    "minibatch_size": (32, "trajectories (samples) per optimizer step"),
    "gamma": (1.0, "discount (RAGEN: 1.0)"),
    "num_env_runners": (1, "env runners, each holding whole env groups and one engine"),
    "create_local_env_runner": (False, "the driver never loads a model"),
    "sample_timeout_s": (1800.0, "LLM rollouts take longer than RLlib's 60 s default"),
}


def training_doc() -> str:
    """Docstring lines for ``RagenConfig.training``."""
    return "\n".join(f"    {k}: {m} (default {d!r})" for k, (d, m) in HYPERPARAMS.items())
