"""The driver's data preparation between sampling and the learner: the batch, reward shaping, rollout filtering,
rollout metrics, early stops, the reasoning-MI diagnostic, the one-step-off schedule, runner failures and
checkpoint files."""
