"""Every Ragen hyperparameter in one place, typed: :class:`RagenHyperparams` (name, type, default and a
one-line meaning each; defaults follow RAGEN), the allowed values of every enumerated key (:data:`CHOICES`)
and the RLlib defaults Ragen changes (:data:`RLLIB_OVERRIDES`).

:class:`~.ragen_config.RagenConfig` inherits the typed attributes (an IDE and a type checker see them),
``RagenConfig.training(**kw)`` accepts exactly these names (plus RLlib's own), ``validate()`` checks every
value against its type and choices, and the docstring of ``training`` is generated from here. The agent-layer
keys take their defaults and meanings from :class:`ragen_rllib.agent.config.AgentConfig` (their one home).
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from ragen_rllib.agent.config import CONTEXT_MODES, EMPTY_ACTION_MODES, AgentConfig
from ragen_rllib.algorithms.ragen.estimators import ESTIMATORS
from ragen_rllib.engines.factory import BACKENDS
from ragen_rllib.rl.filtering import FILTER_METRICS, FILTER_STRATEGIES, KEEP, TOP_P_MODES
from ragen_rllib.rl.losses import AGG_MODES, KL_KINDS
from ragen_rllib.rl.rewards import NORM_SCOPES, REWARD_NORMS
from ragen_rllib.rl.schedules import LR_DECAYS

_AGENT = AgentConfig()
AGENT_KEYS = tuple(f.name for f in fields(AgentConfig))

ADV_ESTIMATORS = tuple(ESTIMATORS)  # the estimator table decides everything else about each one
OLD_LOGPROBS_SOURCES = ("learner", "engine")
RUNNER_FAILURE_MODES = ("resample", "train_on_rest")
ROLLOUT_MODES = ("sync", "one_step_off")


def _h(default: Any, meaning: str) -> Any:
    """A hyperparameter's default and meaning (mutable defaults are copied per config)."""
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"meaning": meaning})
    return field(default=default, metadata={"meaning": meaning})


def _agent(key: str) -> Any:
    return _h(getattr(_AGENT, key), f"agent layer: see AgentConfig.{key}")


@dataclass(init=False, eq=False, repr=False)
class RagenHyperparams:
    """Ragen's own settings (RLlib's are on ``AlgorithmConfig``). Each: ``name: type = default, meaning``."""
    # ---- rollout (StarPO)
    env_groups: int = _h(8, "env groups sampled per training step (RAGEN: 8)")
    group_size: int = _h(16, "trajectories per group; a group shares one env seed (RAGEN: 16)")
    train_seed_base: int = _h(10000, "seed of the first training group; advances by env_groups every step")
    train_temperature: float = _h(1.0, "sampling temperature of training rollouts")
    top_p: float = _h(1.0, "nucleus sampling mass of training rollouts")
    top_k: int = _h(-1, "top-k cut of training rollouts (-1: none)")

    # ---- validation
    val_env_groups: int = _h(16, "env groups of a validation rollout (RAGEN: 512; small default for CPU)")
    val_group_size: int = _h(1, "trajectories per validation group")
    val_seed: int = _h(123, "seed of the first validation group (fixed across evaluations)")
    val_temperature: float = _h(0.5, "sampling temperature of validation rollouts")
    val_before_train: bool = _h(False, (
        "validate once before the first update (result['evaluation_before_training']; RAGEN: True)"))

    # ---- rollout filtering (StarPO-S; whole groups)
    filter_strategy: str | None = _h(None, (
        "group filter: None (off) or a strategy (StarPO-S runs: top_p)"))
    filter_value: float = _h(0.9, (
        "the strategy's p / fraction / count (RAGEN's published runs: top_p 0.9; V1: top_k 0.25)"))
    filter_keep: str = _h('largest', "keep the groups with the largest or the smallest scores")
    filter_top_p_mode: str = _h('linear', (
        "top_p over the scores themselves (linear) or their softmax"))
    filter_include_zero: bool = _h(True, "False: drop groups whose rewards are all equal before the strategy")
    filter_min_std: float = _h(0.0, (
        "with filter_include_zero=False, also drop groups whose in-group reward std is at most this (e.g. 0.5 on "
        "Sokoban: keep groups whose outcomes differ, not those differing by step penalties only; 0: exact ties)"))
    filter_metric: str = _h('reward_std', "the score each group is ranked by")
    filter_loss_scale: bool = _h(False, "scale the loss by the kept ratio of groups")

    # ---- DAPO
    dynamic_sampling: bool = _h(False, (
        "DAPO: drop groups whose rewards are all equal and sample more until env_groups remain"))
    dynamic_sampling_max_rounds: int = _h(3, "DAPO: at most this many extra sampling rounds per step")
    overlong_buffer_ratio: float | None = _h(None, (
        "DAPO overlong shaping: a turn in the last ratio x max_response_tokens tokens before the limit is"
        " penalised linearly up to -overlong_penalty (DAPO: 0.2; None: off)"))
    overlong_penalty: float = _h(1.0, "DAPO overlong shaping: the penalty at max_response_tokens")

    # ---- reward normalisation (trajectory scores, before the advantages)
    reward_norm: str = _h('identity', "normalisation of the trajectory scores")
    reward_norm_scope: str = _h('group', "the scores normalised together")

    # ---- diagnostics
    mi_interval: int | None = _h(None, (
        "RAGEN-2 reasoning-collapse estimate (prompt/reasoning mutual information) every N steps (None: "
        "off)"))
    mi_samples: int = _h(8, "trajectories (one per group) the mutual-information estimate scores pairwise")
    trace_dir: str | None = _h(None, (
        "write each iteration's update batches (sampled token ids, scores, advantages) and losses to "
        "<trace_dir>/iter_NNNN.json, to compare runs (None: off; the trials of a sweep would share it)"))

    # ---- early stops (RAGEN's rules; patience None turns a rule off)
    early_stop_std_ratio: float = _h(0.1, (
        "reward-std collapse: mean in-group reward std below this x the early baseline"))
    early_stop_std_patience: int | None = _h(10, "... for this many consecutive steps stops training (None: off)")
    early_stop_std_baseline_steps: int = _h(5, "steps whose mean in-group reward std is the baseline")
    early_stop_empty_patience: int | None = _h(5, (
        "stop after this many consecutive empty filtered batches (None: off)"))
    early_stop_val_floor: float = _h(0.01, "validation success below this ...")
    early_stop_val_patience: int | None = _h(5, "... on this many consecutive validations stops training (None: off)")

    # ---- advantages and loss
    adv_estimator: str = _h('gae', (
        "advantage estimator (the estimator table, algorithms/ragen/estimators.py, says where each runs)"))
    lambda_: float = _h(1.0, "GAE lambda (RAGEN: 1.0)")
    high_level_gamma: float = _h(0.95, "bi-level GAE: discount between turns (RAGEN: 0.95)")
    grpo_norm_by_std: bool = _h(True, "GRPO divides by the in-group reward std (False: Dr. GRPO)")
    gigpo_gamma: float = _h(0.95, "GiGPO: discount of the per-turn returns compared within an anchor state")
    gigpo_step_weight: float = _h(1.0, "GiGPO: weight of the step-level (anchor-state) advantage")
    use_turn_scores: bool = _h(False, "put each turn's reward on its last token instead of the trajectory's")
    clip_low: float = _h(0.2, "lower clip range of the policy ratio (1 - clip_low)")
    clip_high: float = _h(0.28, "upper clip range of the policy ratio (1 + clip_high; 'clip-higher')")
    old_logprobs: str = _h('learner', (
        "pre-update log-probs: 'learner' recomputes them in a no-grad pass (RAGEN); 'engine' takes the "
        "engine's sampling-time log-probs (the behaviour policy; no extra pass)"))
    dual_clip: float | None = _h(3.0, "dual-clip constant c for negative advantages (None: off)")
    entropy_coeff: float = _h(0.001, "entropy bonus coefficient")
    use_kl_loss: bool = _h(False, "add a KL loss to the reference policy")
    use_kl_in_reward: bool = _h(False, (
        "subtract kl_coeff x per-token KL to the reference from the token rewards (gae)"))
    kl_coeff: float = _h(0.001, "KL coefficient (as a loss, or in the reward)")
    kl_type: str = _h('k3', "KL estimator")
    loss_agg_mode: str = _h('token-mean', "how token losses become one loss")
    micro_batch_size: int = _h(8, (
        "at most this many trajectories per forward/backward pass; gradients accumulate over a minibatch (verl's "
        "ppo_micro_batch_size_per_gpu); max_tokens_per_micro_batch also bounds each pass"))
    max_tokens_per_micro_batch: int | None = _h(None, (
        "token budget of one forward/backward pass (verl's ppo_max_token_len_per_gpu with use_dynamic_bsz): each "
        "minibatch's rows are packed, longest first, into micro-batches of rows x longest row <= this many tokens "
        "(a longer row goes alone), each cut to its longest row; also the no-grad pass. None: the largest budget "
        "that fits learner_memory_gib by the learner memory estimate (algorithms/ragen/memory.py); a budget "
        "that cannot fit fails in validate()"))
    learner_memory_gib: float | None = _h(None, (
        "memory one learner may use, in GiB: CPU learners count their process RAM, GPU learners the device's "
        "memory. None: 40% of the machine's RAM split over its CPU learners (a 24 GiB machine: 9.6 GiB), or 90% "
        "of the GPU's memory"))
    lr_warmup_steps: int = _h(0, "linear learning-rate warm-up over this many training steps (actor and critic)")
    lr_decay: str = _h('constant', "learning-rate decay after the warm-up")
    lr_decay_steps: int | None = _h(None, (
        "training step at which a linear/cosine decay reaches lr_min_ratio x lr (counted from step 0, "
        "warm-up included)"))
    lr_min_ratio: float = _h(0.0, "floor of the decay, as a fraction of the base learning rate")
    critic_lr: float = _h(1e-05, "learning rate of the value head (actor lr is `lr`)")
    vf_loss_coeff: float = _h(1.0, "value loss coefficient")
    vf_clip: float = _h(0.5, "value clipping range around the old values")

    # ---- generation engine on env runners
    engine: str = _h('auto', (
        "generation engine of env runners (auto: vLLM if importable, else HF)"))
    engine_kwargs: dict[str, Any] = _h({}, (
        "extra keyword arguments of the engine (e.g. kv_cache_gib, gpu_memory_utilization)"))

    rollout_mode: str = _h('sync', (
        "'sync': sample, then learn, then sync the weights; 'one_step_off': the runners sample the next batch "
        "(with the weights before this step's update) while the learner trains on this one; needs "
        "old_logprobs='engine', whose behaviour log-probs correct the one-step staleness"))

    # ---- fault tolerance
    env_step_timeout_s: float | None = _h(60.0, (
        "an env reset or step running longer ends its episode as an env error (the runner replaces the env); "
        "None: no limit"))
    on_runner_failure: str = _h('resample', (
        "the groups of an env runner that died mid-sample ('resample': "
        "sampled again on the healthy runners in the same iteration; either way env_runners/groups_lost counts "
        "them)"))

    # ---- agent layer (defaults and meanings: AgentConfig)
    max_turns: int = _agent("max_turns")
    max_actions_per_turn: int = _agent("max_actions_per_turn")
    max_actions_per_traj: int = _agent("max_actions_per_traj")
    action_sep: str = _agent("action_sep")
    enable_think: bool = _agent("enable_think")
    format_penalty: float = _agent("format_penalty")
    max_response_tokens: int = _agent("max_response_tokens")
    max_model_len: int = _agent("max_model_len")
    context_mode: str = _agent("context_mode")
    context_window: int = _agent("context_window")
    system_prefix: str = _agent("system_prefix")
    reject_empty_actions: bool | str = _agent("reject_empty_actions")
    reject_extra_actions: bool = _agent("reject_extra_actions")


#: enumerated keys -> allowed values (``filter_strategy`` also takes None: off).
CHOICES: dict[str, tuple[Any, ...]] = {
    "filter_strategy": FILTER_STRATEGIES,
    "filter_keep": KEEP,
    "filter_top_p_mode": TOP_P_MODES,
    "filter_metric": FILTER_METRICS,
    "reward_norm": REWARD_NORMS,
    "reward_norm_scope": NORM_SCOPES,
    "adv_estimator": ADV_ESTIMATORS,
    "old_logprobs": OLD_LOGPROBS_SOURCES,
    "kl_type": KL_KINDS,
    "loss_agg_mode": AGG_MODES,
    "lr_decay": LR_DECAYS,
    "engine": BACKENDS,  # engines/factory.py
    "on_runner_failure": RUNNER_FAILURE_MODES,
    "rollout_mode": ROLLOUT_MODES,
    "context_mode": CONTEXT_MODES,
    "reject_empty_actions": EMPTY_ACTION_MODES,
}


def _default(f: Field) -> Any:
    return f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]


def _meaning(f: Field) -> str:
    """The declared meaning, plus the allowed values of an enumerated key (from :data:`CHOICES`, never typed twice)."""
    text = f.metadata["meaning"]
    if f.name in CHOICES:
        text += "; one of " + ", ".join(map(repr, CHOICES[f.name]))
    return text


#: name -> (default, meaning), in declaration order (docs, the CLI and tests read this view).
HYPERPARAMS: dict[str, tuple[Any, str]] = {f.name: (_default(f), _meaning(f)) for f in fields(RagenHyperparams)}
#: name -> declared type (resolved annotations)
TYPES: dict[str, Any] = typing.get_type_hints(RagenHyperparams)


def defaults() -> dict[str, Any]:
    """A fresh copy of every default (mutable ones copied)."""
    return {f.name: _default(f) for f in fields(RagenHyperparams)}


def check_value(key: str, value: Any) -> str | None:
    """Why ``value`` does not fit ``key``'s declared type and choices (None: it fits)."""
    hint = TYPES[key]
    allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if value is None:
        return None if type(None) in allowed else "use a value, not None"
    base = [typing.get_origin(a) or a for a in allowed if a is not type(None)]
    ok = any(_is_instance(value, b) for b in base)
    if not ok:
        kinds = " or ".join(b.__name__ for b in base) + (" or None" if type(None) in allowed else "")
        return f"use a value of type {kinds}, not {type(value).__name__}"
    if key in CHOICES and value not in CHOICES[key]:
        return f"use one of {CHOICES[key]}" + (" or None (off)" if type(None) in allowed else "")
    return None


def _is_instance(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


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
    return "\n".join(f"    {k} ({type_name(TYPES[k])}): {m} (default {d!r})" for k, (d, m) in HYPERPARAMS.items())


def type_name(hint: Any) -> str:
    """``int``, ``float | None``, ``dict[str, typing.Any]``: a declared type as text."""
    return hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint)
