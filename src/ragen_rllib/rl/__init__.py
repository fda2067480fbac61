"""Pure PyTorch RL math for StarPO: advantage estimators, losses and rollout-group filters.

No RLlib, models or environments here: every function takes and returns tensors (shapes in the
docstrings; ``B`` sequences, ``T`` tokens, ``N`` turns, ``G`` groups, ``V`` vocabulary).

- :mod:`ragen_rllib.rl.advantages`: token rewards, GAE, bi-level GAE, GRPO / Dr. GRPO, RLOO, REINFORCE++.
- :mod:`ragen_rllib.rl.losses`: clipped policy loss, loss aggregation, entropy, KL estimators, value loss.
- :mod:`ragen_rllib.rl.filters`: StarPO-S / RAGEN-2 reward-std group filtering.
"""
