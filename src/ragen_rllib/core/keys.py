"""Batch column and metric names of the Ragen algorithm, named once; the batch-column contract."""

from dataclasses import dataclass

# ---- learner batch columns: the contract. Every column is always written (the loss never asks whether one
# is present); COLUMNS below gives each one's shape, dtype, writer and readers.
INPUT_IDS = "input_ids"  # token ids of prompt + sampled responses, right-padded
ATTENTION_MASK = "attention_mask"  # 1 on real tokens, 0 on padding
LOSS_MASK = "loss_mask"  # 1 on sampled (trained) tokens
SAMPLE_LOGPROBS = "sample_logprobs"  # the engine's log-probs at sampling time (0 where not trained)
SCORES = "scores"  # [B] trajectory reward
GROUP_IDS = "group_ids"  # [B] env group of each sample (same seed within a group)
EPISODE_IDS = "episode_ids"  # [B] episode of each sample (several in limited_multi_turn / single_turn modes)
TURN_ENDS = "turn_ends"  # [B, N] index of each trained turn's last token (-1: padding)
TURN_REWARDS = "turn_rewards"  # [B, N] reward of each trained turn
LAST_INDEX = "last_index"  # [B] index of the last trained token
LOSS_SCALE = "loss_scale"  # [B] factor on the loss (filter_loss_scale: the kept ratio), 1 otherwise
MICRO_WEIGHT = "micro_weight"  # [B] weight of the row's micro-batch loss (so micro-batches sum to the minibatch's)
OLD_LOGPROBS = "old_logprobs"  # log-probs of the pre-update policy (source: old_logprobs; see OLD_IS_CURRENT)
OLD_IS_CURRENT = "old_is_current"  # [B] 1: the old log-probs ARE the current ones, detached (on-policy step)
REF_LOGPROBS = "ref_logprobs"  # log-probs of the reference policy (KL loss / KL in the reward; 0 without KL)
ADVANTAGES = "advantages"
RETURNS = "returns"  # value targets (0 without a critic)
OLD_VALUES = "old_values"  # critic values before the update (0 without a critic)


@dataclass(frozen=True)
class Column:
    """One batch column: ``shape`` ([B] rows, [B, T] tokens, [B, N] turns), ``dtype``, who writes it
    (``driver``: :func:`~.batch.build_batch` or :class:`~.ragen.Ragen`; ``learner``: the learner's no-grad
    preparation or its micro-batching) and who reads it."""

    shape: str
    dtype: str
    writer: str
    readers: str


COLUMNS: dict[str, Column] = {
    INPUT_IDS: Column("[B, T]", "int64", "build_batch", "forward pass"),
    ATTENTION_MASK: Column("[B, T]", "int64", "build_batch", "padding_fraction"),
    LOSS_MASK: Column("[B, T]", "float32", "build_batch", "estimators, loss, micro-batch weights, the forward pass "
                      "(log-probs at these tokens only)"),
    SAMPLE_LOGPROBS: Column("[B, T]", "float32", "build_batch", "prepare_columns (old_logprobs='engine')"),
    SCORES: Column("[B]", "float32", "build_batch", "estimators"),
    GROUP_IDS: Column("[B]", "int64", "build_batch", "group estimators"),
    EPISODE_IDS: Column("[B]", "int64", "build_batch", "estimators (one entry per episode)"),
    TURN_ENDS: Column("[B, N]", "int64", "build_batch", "gigpo, bi_level_gae, turn-score GAE"),
    TURN_REWARDS: Column("[B, N]", "float32", "build_batch", "turn-score GAE"),
    LAST_INDEX: Column("[B]", "int64", "build_batch", "REINFORCE++, GAE on the score"),
    ADVANTAGES: Column("[B, T]", "float32", "build_batch (driver estimators) / prepare_columns (learner ones)",
                       "loss"),
    LOSS_SCALE: Column("[B]", "float32", "build_batch (1) / Ragen.training_step (filter_loss_scale)", "loss"),
    MICRO_WEIGHT: Column("[B]", "float32", "build_batch (1) / the torch learner's micro-batching", "loss"),
    OLD_LOGPROBS: Column("[B, T]", "float32", "prepare_columns", "loss"),
    OLD_IS_CURRENT: Column("[B]", "float32", "prepare_columns", "loss"),
    REF_LOGPROBS: Column("[B, T]", "float32", "prepare_columns", "loss (use_kl_loss), GAE (use_kl_in_reward)"),
    RETURNS: Column("[B, T]", "float32", "prepare_columns", "loss (critic estimators)"),
    OLD_VALUES: Column("[B, T]", "float32", "prepare_columns", "loss (critic estimators)"),
}
#: the driver's columns every learner update needs (estimator-specific ones are checked by their readers)
LEARNER_INPUTS = (INPUT_IDS, LOSS_MASK, SAMPLE_LOGPROBS, ADVANTAGES, LOSS_SCALE, MICRO_WEIGHT)

# ---- forward outputs
LOGPROBS = "logprobs"  # [B, T] log p(token_t | tokens_<t); 0 at t = 0
ENTROPY = "entropy"  # [B, T]
VALUES = "values"  # [B, T]

# ---- learner metrics
POLICY_LOSS = "policy_loss"
VALUE_LOSS = "value_loss"
ENTROPY_METRIC = "entropy"
APPROX_KL = "approx_kl"
CLIP_FRACTION = "clip_fraction"
DUAL_CLIP_FRACTION = "dual_clip_fraction"  # share of trained tokens where the dual-clip cap (A < 0) was active
GRAD_NORM = "grad_norm"
MICRO_BATCH_TOKENS = "max_tokens_per_micro_batch"  # the token budget of one forward/backward pass in use
MICRO_BATCHES = "micro_batches"  # forward/backward passes of the last minibatch (token-packed micro-batches)
SKIPPED_UPDATES = "skipped_updates"  # optimizer steps skipped because a loss or gradient was NaN or inf
LR_MULTIPLIER = "lr_multiplier"  # the lr schedule's factor on the base learning rate this step
TRAINING_STEP = "ragen_training_step"  # key of the timesteps dict the learners get: the 0-based training step
KL_LOSS = "kl_loss"
PADDING_FRACTION = "padding_fraction"  # share of the update batch's [B, T] cells that are padding (driver)

# ---- env runner metrics (result["env_runners"])
SUCCESS_RATE = "success_rate"
EPISODE_RETURN_MEAN = "episode_return_mean"
ACTION_VALID_RATE = "action_valid_rate"
TURNS_MEAN = "turns_mean"
RESPONSE_TOKENS_MEAN = "response_tokens_mean"
PASS_AT_K = "pass_at_k"
IN_GROUP_REWARD_STD_MEAN = "in_group_reward_std_mean"
GENERATED_TOKENS_PER_S = "generated_tokens_per_s"
RUNNER_ERRORS = "runner_errors"  # this step's trajectories that hit an env/model error (handled in the runner)
RUNNER_ERRORS_LIFETIME = "runner_errors_lifetime"  # such errors since the start, as the runners count them
GROUPS_LOST = "groups_lost"  # env groups whose runner died mid-sample this step
GROUPS_RESAMPLED = "groups_resampled"  # env groups sampled on a runner other than their own this step
RUNNERS_RESTORED = "runners_restored"  # env runners restarted and handed the current weights before this step
WEIGHTS_STALENESS = "weights_staleness"  # learner updates between the sampling weights and the trained ones

# ---- rollout filtering (result["learners"]["__all_modules__"] is RLlib's; these go under result["env_runners"])
FILTER_KEPT_RATIO = "filter_kept_ratio"  # kept groups / groups
FILTER_KEPT_GROUPS = "filter_kept_groups"
FILTER_ZERO_VARIANCE_GROUPS = "filter_zero_variance_groups"  # groups with reward std <= filter_min_std (0: all equal)
FILTER_KEPT_REWARD_STD_MEAN = "filter_kept_reward_std_mean"  # mean in-group reward std of the kept groups
FILTER_EMPTY_BATCHES = "filter_empty_batches"  # steps whose filtered batch was empty (update skipped)
OVERLONG_TURN_RATE = "overlong_turn_rate"  # share of turns the DAPO overlong penalty hit
DYNAMIC_SAMPLING_ROUNDS = "dynamic_sampling_rounds"  # extra sampling rounds this step (DAPO)
DYNAMIC_SAMPLING_GROUPS = "dynamic_sampling_groups"  # groups with reward variance after dynamic sampling
REASONING_MI = "reasoning_mi"  # RAGEN-2 mutual information prompt/reasoning (nats), every mi_interval steps
REASONING_MI_UPPER = "reasoning_mi_upper_bound"  # log K of that estimate
REASONING_RETRIEVAL = "reasoning_retrieval_acc"  # share of reasonings whose own prompt scores best
EFFECTIVE_ACTION_RATE = "effective_action_rate"  # actions that changed the env state / actions
IN_GROUP_REWARD_MEAN = "in_group_reward_mean"
