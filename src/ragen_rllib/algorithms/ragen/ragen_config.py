"""RagenConfig: StarPO (RAGEN) as an RLlib AlgorithmConfig. Hyperparameters live in :mod:`.hyperparams`."""

from __future__ import annotations

from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from ragen_rllib.algorithms.ragen.hyperparams import (
    ADV_ESTIMATORS,
    OLD_LOGPROBS_SOURCES,
    AGENT_KEYS,
    ENGINES,
    HYPERPARAMS,
    RLLIB_OVERRIDES,
    training_doc,
)

DEFAULT_MODEL = "tiny:small"  # model_config["model"] when none is given (offline tiny model)


class RagenConfig(AlgorithmConfig):
    """Configuration of the Ragen (StarPO) algorithm.

    >>> from ragen_rllib import RagenConfig
    >>> config = (RagenConfig()
    ...     .environment("ragen/FrozenLake-v0", env_config={"size": 4})
    ...     .rl_module(model_config={"model": "tiny:nano"})
    ...     .training(adv_estimator="grpo", env_groups=2, group_size=4))
    """

    def __init__(self, algo_class=None) -> None:
        if algo_class is None:
            from ragen_rllib.algorithms.ragen.ragen import Ragen

            algo_class = Ragen
        super().__init__(algo_class=algo_class)
        for key, (default, _) in HYPERPARAMS.items():
            setattr(self, key, dict(default) if isinstance(default, dict) else default)
        for key, (value, _) in RLLIB_OVERRIDES.items():
            setattr(self, key, value)
        from ragen_rllib.env.ragen_env_runner import RagenEnvRunner

        self.env_runner_cls = RagenEnvRunner

    def training(self, **kwargs: Any) -> RagenConfig:
        # Docstring set below from the hyperparameter table.
        ours = {k: kwargs.pop(k) for k in list(kwargs) if k in HYPERPARAMS}
        try:
            super().training(**kwargs)
        except TypeError as err:
            known = sorted(HYPERPARAMS)
            raise ValueError(f"RagenConfig.training() got an unknown key: {err}. Ragen keys: {known}") from None
        for key, value in ours.items():
            if value is not NotProvided:
                setattr(self, key, value)
        return self

    training.__doc__ = "Sets Ragen's training settings (plus RLlib's own `training()` keys).\n\n" + training_doc()

    # ------------------------------------------------------------------ derived settings
    @property
    def model_name(self) -> str:
        return (self.model_config or {}).get("model", DEFAULT_MODEL)

    @property
    def uses_critic(self) -> bool:
        return self.adv_estimator == "gae"

    @property
    def train_batch_trajectories(self) -> int:
        """Trajectories sampled per training step."""
        return self.env_groups * self.group_size

    def agent_config(self):
        """The agent-layer settings (validated by AgentConfig itself)."""
        from ragen_rllib.agent.config import AgentConfig

        return AgentConfig(**{k: getattr(self, k) for k in AGENT_KEYS})

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule

        return RLModuleSpec(module_class=RagenTorchRLModule)

    def get_default_learner_class(self):
        from ragen_rllib.algorithms.ragen.torch.ragen_torch_learner import RagenTorchLearner

        return RagenTorchLearner

    @property
    def _model_config_auto_includes(self) -> dict[str, Any]:
        return super()._model_config_auto_includes | {
            "model": DEFAULT_MODEL,
            "value_head": self.uses_critic,
            "temperature": self.train_temperature,
        }

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        super().validate()
        self._validate_ragen()

    def _validate_ragen(self) -> None:
        def bad(key: str, fix: str) -> None:
            self._value_error(f"RagenConfig: {key}={getattr(self, key)!r} is invalid: {fix}")

        for key in ("env_groups", "group_size", "val_env_groups", "val_group_size", "minibatch_size", "num_epochs",
                    "micro_batch_size"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(key, "use a positive integer")
        if self.adv_estimator not in ADV_ESTIMATORS:
            bad("adv_estimator", f"use one of {ADV_ESTIMATORS}")
        if self.adv_estimator in ("grpo", "gigpo") and self.group_size < 2:
            name = {"grpo": "GRPO", "gigpo": "GiGPO"}[self.adv_estimator]
            bad("group_size", f"{name} normalises within a group: use group_size >= 2 (RAGEN: 16)")
        if self.adv_estimator == "gigpo" and not 0 <= self.gigpo_gamma <= 1:
            bad("gigpo_gamma", "use a discount in [0, 1] (verl-agent: 0.95)")
        if self.old_logprobs not in OLD_LOGPROBS_SOURCES:
            bad("old_logprobs", f"use one of {OLD_LOGPROBS_SOURCES}")
        if self.engine not in ENGINES:
            bad("engine", f"use one of {ENGINES}")
        runners = max(self.num_env_runners, 1)
        if self.env_groups % runners:
            bad("env_groups", f"it must be divisible by num_env_runners={self.num_env_runners} (each runner holds "
                f"whole groups): use env_groups={runners * max(1, self.env_groups // runners)} or change "
                "num_env_runners")
        if self.val_env_groups % runners:
            bad("val_env_groups", f"it must be divisible by num_env_runners={self.num_env_runners}")
        if self.minibatch_size > self.train_batch_trajectories:
            bad("minibatch_size", f"it exceeds the {self.train_batch_trajectories} trajectories of a training step "
                "(env_groups * group_size); lower minibatch_size or raise env_groups/group_size")
        learners = max(self.num_learners, 1)
        if self.train_batch_trajectories % learners:
            bad("env_groups", f"env_groups * group_size = {self.train_batch_trajectories} trajectories must split "
                f"evenly over num_learners={self.num_learners}")
        if not (0 <= self.clip_low < 1 and self.clip_high >= 0):
            bad("clip_low", "use 0 <= clip_low < 1 and clip_high >= 0 (RAGEN: 0.2 / 0.28)")
        if self.dual_clip is not None and self.dual_clip <= 1:
            bad("dual_clip", "use None or a value > 1 (RAGEN: 3.0)")
        if self.train_temperature <= 0:
            bad("train_temperature", "use a temperature > 0 for training rollouts (log-probs need sampling)")
        if not self.model_name:
            self._value_error("RagenConfig: model_config['model'] is empty: pass a Hugging Face id, a local "
                              "directory or 'tiny:small'")
        try:
            self.agent_config()
        except ValueError as err:
            self._value_error(f"RagenConfig: {err}")
