"""Batch column and metric names of the Ragen algorithm, named once."""

# ---- learner batch columns (all [B, T] unless noted)
INPUT_IDS = "input_ids"  # token ids of prompt + sampled responses, right-padded
ATTENTION_MASK = "attention_mask"  # 1 on real tokens, 0 on padding
LOSS_MASK = "loss_mask"  # 1 on sampled (trained) tokens
SAMPLE_LOGPROBS = "sample_logprobs"  # the engine's log-probs at sampling time (0 where not trained)
OLD_LOGPROBS = "old_logprobs"  # log-probs of the pre-update policy, recomputed on the learner
REF_LOGPROBS = "ref_logprobs"  # log-probs of the reference policy (KL loss / KL in the reward)
KL_REWARD = "kl_reward"  # [B, T] per-token KL(pre-update policy || reference) taken out of the reward
TOKEN_REWARDS = "token_rewards"  # rewards placed on tokens
ADVANTAGES = "advantages"
RETURNS = "returns"  # value targets
OLD_VALUES = "old_values"  # critic values before the update
SCORES = "scores"  # [B] trajectory reward
GROUP_IDS = "group_ids"  # [B] env group of each sample (same seed within a group)
EPISODE_IDS = "episode_ids"  # [B] episode of each sample (several in limited_multi_turn / single_turn modes)

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
GRAD_NORM = "grad_norm"
LR_MULTIPLIER = "lr_multiplier"  # the lr schedule's factor on the base learning rate this step
TRAINING_STEP = "ragen_training_step"  # key of the timesteps dict the learners get: the 0-based training step
KL_LOSS = "kl_loss"

# ---- env runner metrics (result["env_runners"])
SUCCESS_RATE = "success_rate"
EPISODE_RETURN_MEAN = "episode_return_mean"
ACTION_VALID_RATE = "action_valid_rate"
TURNS_MEAN = "turns_mean"
RESPONSE_TOKENS_MEAN = "response_tokens_mean"
PASS_AT_K = "pass_at_k"
IN_GROUP_REWARD_STD_MEAN = "in_group_reward_std_mean"
GENERATED_TOKENS_PER_S = "generated_tokens_per_s"
RUNNER_ERRORS = "runner_errors"  # env/model errors handled inside the runner

# ---- rollout filtering (result["learners"]["__all_modules__"] is RLlib's; these go under result["env_runners"])
FILTER_KEPT_RATIO = "filter_kept_ratio"  # kept groups / groups
FILTER_KEPT_GROUPS = "filter_kept_groups"
FILTER_ZERO_VARIANCE_GROUPS = "filter_zero_variance_groups"  # groups whose rewards are all equal
FILTER_KEPT_REWARD_STD_MEAN = "filter_kept_reward_std_mean"  # mean in-group reward std of the kept groups
FILTER_EMPTY_BATCHES = "filter_empty_batches"  # steps whose filtered batch was empty (update skipped)
LOSS_SCALE = "loss_scale"  # [B] factor on the loss (filter_loss_scale: the kept ratio), 1 otherwise
OVERLONG_TURN_RATE = "overlong_turn_rate"  # share of turns the DAPO overlong penalty hit
DYNAMIC_SAMPLING_ROUNDS = "dynamic_sampling_rounds"  # extra sampling rounds this step (DAPO)
DYNAMIC_SAMPLING_GROUPS = "dynamic_sampling_groups"  # groups with reward variance after dynamic sampling
REASONING_MI = "reasoning_mi"  # RAGEN-2 mutual information prompt/reasoning (nats), every mi_interval steps
REASONING_MI_UPPER = "reasoning_mi_upper_bound"  # log K of that estimate
REASONING_RETRIEVAL = "reasoning_retrieval_acc"  # share of reasonings whose own prompt scores best
EFFECTIVE_ACTION_RATE = "effective_action_rate"  # actions that changed the env state / actions
IN_GROUP_REWARD_MEAN = "in_group_reward_mean"
