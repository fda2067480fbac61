"""RagenConfig: StarPO (RAGEN) as an RLlib AlgorithmConfig. Hyperparameters live in :mod:`.config.hyperparams`."""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from ragen_rllib.algorithms.ragen.config.hyperparams import (
    AGENT_KEYS,
    HYPERPARAMS,
    RLLIB_OVERRIDES,
    RagenHyperparams,
    check_value,
    defaults,
    training_doc,
)
from ragen_rllib.algorithms.ragen.estimators import ESTIMATORS
from ragen_rllib.algorithms.ragen.estimators import problems as estimator_problems
from ragen_rllib.core.model_config import DEFAULT_MODEL, model_setting, validate_model_config


class RagenConfig(AlgorithmConfig, RagenHyperparams):
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
        self.__dict__.update(defaults())  # the typed attributes of RagenHyperparams, with their defaults
        for key, (value, _) in RLLIB_OVERRIDES.items():
            setattr(self, key, value)
        from ragen_rllib.runner.ragen_env_runner import RagenEnvRunner

        self.env_runner_cls = RagenEnvRunner
        self.env_tags: list[dict] = []  # training envs of a multi-env run (see .env_tags); [] = the one `env`
        self.val_env_tags: list[dict] = []  # validation envs; [] = the training envs, val_env_groups each
        self.agent_to_module: dict[str, str] = {}  # multi-agent envs: agent -> RL module (see .multi_agent)
        self.scripted_agents: dict[str, str] = {}  # multi-agent envs: agent -> fixed opponent (no LLM)
        self.env_modules: list[str] = []  # modules imported (driver and every runner) before envs are made
        self.sweep_variant: Any = None  # a sweep's grouped setting (config.key_paths.VARIANT)
        self.sweep_variants: Any = None  # more grouped axes, {axis: setting} (param_space keys variant.<axis>)
        self.run_settings: dict[str, Any] = {}  # a config file's `run` section (stop, checkpoint_every, out_dir)
        self.tune_settings: dict[str, Any] = {}  # a config file's `tune` section (sweeps)

    # ------------------------------------------------------------------ config files
    @classmethod
    def from_yaml(cls, path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RagenConfig:
        """A config from a YAML file (sections = the builder methods, plus ``run`` and ``tune``; see
        :mod:`.config.config_files`) and OmegaConf dotlist ``overrides`` such as ``["training.lr=1e-5"]``. Unknown keys
        and bad types fail here, naming the file, the key path, the value and the nearest valid keys."""
        from ragen_rllib.algorithms.ragen.config.config_files import apply_tree, load_tree

        return apply_tree(cls(), load_tree(path, overrides))

    def to_yaml(self, path: str | Path | None = None) -> str:
        """This config as YAML that :meth:`from_yaml` loads back to an equal config (written to ``path`` if
        given)."""
        from omegaconf import OmegaConf

        from ragen_rllib.algorithms.ragen.config.config_files import dump_tree

        text = OmegaConf.to_yaml(OmegaConf.create(dump_tree(self)))
        if path is not None:
            Path(path).write_text(text)
        return text

    @override(AlgorithmConfig)
    def update_from_dict(self, config_dict: dict) -> RagenConfig:
        # A Tune trial's resolved config arrives here; its grouped sweep setting (several keys that change
        # together, e.g. filter on / off) is applied after the plain keys.
        config_dict = dict(config_dict)
        variant = config_dict.pop("sweep_variant", None)
        variants = config_dict.pop("sweep_variants", None)
        super().update_from_dict(config_dict)
        from ragen_rllib.algorithms.ragen.config.key_paths import apply_variant

        for axis_setting in ([variant] if variant else []) + list((variants or {}).values()):
            apply_variant(self, axis_setting)
        if variant:
            self.sweep_variant = variant
        if variants:
            self.sweep_variants = variants
        return self

    def preset(self, name: str) -> RagenConfig:
        """Apply an algorithm preset (``ppo``, ``grpo``, ``dr_grpo``, ``dapo``, ``starpo_s``, ``gigpo``; see
        :mod:`.config.presets`); later ``training()`` calls override it."""
        from ragen_rllib.algorithms.ragen.config.presets import preset_settings

        return self.training(**preset_settings(name))

    @override(AlgorithmConfig)
    def environment(self, env: Any = NotProvided, *, env_tags: Any = NotProvided, val_env_tags: Any = NotProvided,
                    env_modules: Any = NotProvided, **kwargs: Any) -> RagenConfig:
        """RLlib's ``environment()`` plus Ragen's multi-env keys (see :mod:`ragen_rllib.core.env_tags`).

        Args:
            env: a gymnasium id (``ragen/Sokoban-v0``), gymnasium's ``module:Id``, or a class import path
                (``my_pkg.envs:MyEnv``).
            env_tags: training envs, each ``{tag, env, env_config, groups}`` (a built-in tag needs only ``tag``
                and ``groups``); sets ``env_groups`` to their total. Empty: the run's one ``env``.
            val_env_tags: validation envs, each ``{tag, env, env_config, groups, seed}``. Empty: the training
                envs with ``val_env_groups`` groups each, from ``val_seed``.
            env_modules: modules to import before envs are made, on the driver and in every env runner (they
                register user envs with ``gymnasium.register``).
        """
        from ragen_rllib.core.env_tags import parse_tags

        if env_modules is not NotProvided:
            self.env_modules = [str(m) for m in (env_modules or [])]
        if val_env_tags is not NotProvided:
            self.val_env_tags = [dict(e) for e in (val_env_tags or [])]
        if env_tags is not NotProvided:
            self.env_tags = [dict(e) for e in (env_tags or [])]
            if self.env_tags:
                tags = parse_tags(self.env_tags, "env_tags")
                self.env_groups = sum(t.groups for t in tags)
                if env is NotProvided and self.env is None:  # RLlib's `env` names the first one
                    env = tags[0].env
                    kwargs.setdefault("env_config", tags[0].env_config)
        super().environment(env, **kwargs)
        return self

    @override(AlgorithmConfig)
    def multi_agent(self, *, agent_to_module: Any = NotProvided, scripted_agents: Any = NotProvided,
                    **kwargs: Any) -> RagenConfig:
        """RLlib's ``multi_agent()`` (``policies``, ``policy_mapping_fn``, ``policies_to_train``: one RL module per
        policy id) plus Ragen's ``agent_to_module`` ({agent: module}: sets ``policy_mapping_fn`` and, unless given,
        ``policies``) and ``scripted_agents`` ({agent: fixed opponent}); see :mod:`.config.multi_agent`."""
        from ragen_rllib.algorithms.ragen.config.multi_agent import ragen_multi_agent_keys

        super().multi_agent(**ragen_multi_agent_keys(self, agent_to_module, scripted_agents, kwargs))
        return self

    @override(AlgorithmConfig)
    def get_config_for_module(self, module_id: str) -> RagenConfig:
        # RLlib 2.60 applies a module's overrides to a copy that keeps this config's frozen state, so on a built
        # algorithm's (frozen) config it raises: apply them to an unfrozen copy, frozen afterwards like this one.
        overrides = self.algorithm_config_overrides_per_module.get(module_id)
        if overrides and module_id not in self._per_module_overrides:
            own = self.copy(copy_frozen=False).update_from_dict(overrides)
            self._per_module_overrides[module_id] = own.copy(copy_frozen=self._is_frozen)
        return super().get_config_for_module(module_id)

    @override(AlgorithmConfig)
    def training(self, **kwargs: Any) -> RagenConfig:
        # Docstring set below from the hyperparameter table.
        ours = {k: kwargs.pop(k) for k in list(kwargs) if k in HYPERPARAMS}
        rllib = set(inspect.signature(AlgorithmConfig.training).parameters) - {"self"}
        unknown = sorted(set(kwargs) - rllib)
        if unknown:
            hints = {k: difflib.get_close_matches(k, [*HYPERPARAMS, *rllib], n=3) for k in unknown}
            said = "; ".join(f"{k!r} (did you mean {', '.join(map(repr, h))}?)" if h else repr(k)
                             for k, h in hints.items())
            raise ValueError(f"RagenConfig.training() got unknown key(s): {said}. Ragen's keys are listed in "
                             "help(RagenConfig.training); RLlib's in help(AlgorithmConfig.training)")
        super().training(**kwargs)
        for key, value in ours.items():
            if value is not NotProvided:
                setattr(self, key, value)
        return self

    training.__doc__ = "Sets Ragen's training settings (plus RLlib's own `training()` keys).\n\n" + training_doc()

    # ------------------------------------------------------------------ derived settings
    @property
    def model_name(self) -> str:
        return model_setting(self.model_config, "model")

    @property
    def uses_critic(self) -> bool:
        """Whether the estimator needs a value head (the estimator table's ``critic``)."""
        return self.adv_estimator in ESTIMATORS and ESTIMATORS[self.adv_estimator].critic

    @property
    def train_batch_trajectories(self) -> int:
        """Trajectories sampled per training step."""
        return self.env_groups * self.group_size

    @property
    def train_tags(self):
        """The training envs (:class:`~.env_tags.EnvTag` list): ``env_tags``, or the one ``env``."""
        from ragen_rllib.core.env_tags import EnvTag, parse_tags

        if self.env_tags:
            return parse_tags(self.env_tags, "env_tags")
        return [EnvTag(tag=str(self.env), env=str(self.env), env_config=dict(self.env_config or {}),
                       groups=self.env_groups)]

    @property
    def val_tags(self):
        """The validation envs: ``val_env_tags``, or the training envs with ``val_env_groups`` groups each."""
        from dataclasses import replace

        from ragen_rllib.core.env_tags import parse_tags

        if self.val_env_tags:
            return parse_tags(self.val_env_tags, "val_env_tags")
        return [replace(t, groups=self.val_env_groups, seed=None) for t in self.train_tags]

    def agent_config(self):
        """The agent-layer settings (validated by AgentConfig itself)."""
        from ragen_rllib.agent.config import AgentConfig

        return AgentConfig(**{k: getattr(self, k) for k in AGENT_KEYS})

    @override(AlgorithmConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from ragen_rllib.algorithms.ragen.torch.ragen_torch_rl_module import RagenTorchRLModule

        return RLModuleSpec(module_class=RagenTorchRLModule)

    @override(AlgorithmConfig)
    def get_default_learner_class(self):
        from ragen_rllib.algorithms.ragen.torch.ragen_torch_learner import RagenTorchLearner

        return RagenTorchLearner

    @property
    @override(AlgorithmConfig)
    def _model_config_auto_includes(self) -> dict[str, Any]:
        # The hook RLlib's own configs (PPOConfig) use to put algorithm defaults into model_config.
        return super()._model_config_auto_includes | {
            "model": DEFAULT_MODEL,
            "value_head": self.uses_critic,
            "temperature": self.train_temperature,
        }

    # ------------------------------------------------------------------ validation
    @override(AlgorithmConfig)
    def validate(self) -> None:
        # Every failure below goes through AlgorithmConfig._value_error, RLlib's own way to fail validate() (a
        # ValueError, or a warning where the user set experimental(_validate_config=False)); it has no public name.
        super().validate()
        self._validate_ragen()

    def _validate_filter(self, bad) -> None:
        m = self.filter_min_std
        if not isinstance(m, (int, float)) or isinstance(m, bool) or not m >= 0:
            bad("filter_min_std", "use a reward std >= 0 (0: only groups whose rewards are all equal count as "
                "zero-variance)")
        if self.filter_strategy is None:
            return
        v = self.filter_value
        if self.filter_strategy == "top_k_abs":
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                bad("filter_value", "top_k_abs keeps a count of groups: use an integer >= 1")
            elif v > self.env_groups:
                bad("filter_value", f"top_k_abs={v} exceeds env_groups={self.env_groups}")
        elif not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= 1:
            bad("filter_value", f"{self.filter_strategy} takes a fraction in (0, 1] (RAGEN: top_p 0.9)")

    def _validate_lr_schedule(self, bad) -> None:
        for key in ("lr", "critic_lr"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                bad(key, "use a positive number; Ragen schedules it by training step with lr_warmup_steps, "
                    "lr_decay and lr_decay_steps (RLlib's piecewise lr schedules are not supported)")
        steps = self.lr_warmup_steps
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            bad("lr_warmup_steps", "use an integer >= 0 (training steps)")
        if self.lr_decay != "constant" and (not isinstance(self.lr_decay_steps, int)
                                            or self.lr_decay_steps <= self.lr_warmup_steps):
            bad("lr_decay_steps", f"lr_decay={self.lr_decay!r} needs the training step where the decay ends: an "
                f"integer > lr_warmup_steps={self.lr_warmup_steps}")
        if not 0 <= self.lr_min_ratio <= 1:
            bad("lr_min_ratio", "use a fraction in [0, 1]")

    def _validate_model_config(self) -> None:
        """Every ``model_config`` key and value (:mod:`ragen_rllib.core.model_config`)."""
        try:
            validate_model_config(self.model_config)
        except ValueError as err:
            self._value_error(f"RagenConfig: {err}")

    def _validate_model(self) -> None:
        from ragen_rllib.models.registry import model_problem

        name = self.model_name
        problem = "it is empty" if not name else model_problem(name)
        if problem:
            self._value_error(f"RagenConfig: model_config['model']={name!r} cannot be loaded: {problem}. Pass a "
                              "Hugging Face id, a local model directory, 'tiny:small' or "
                              "'gguf:smollm2-135m-instruct'")

    def _validate_learner_memory(self) -> None:
        """The learner memory estimate (:mod:`.memory`, from the model's config.json, no weights loaded): a
        micro-batch budget that fits ``learner_memory_gib``, checked here before any actor starts."""
        from ragen_rllib.algorithms.ragen.memory import check_config

        for key, low in (("max_tokens_per_micro_batch", 1), ("learner_memory_gib", 0)):
            value = getattr(self, key)
            if value is not None and not value > low:
                self._value_error(f"RagenConfig: {key}={value!r} is invalid: use None (automatic) or a value > {low}")
        try:
            check_config(self)
        except ValueError as err:
            self._value_error(f"RagenConfig: {err}")

    def _validate_env(self) -> None:
        from ragen_rllib.algorithms.ragen.config.env_checks import check_envs
        from ragen_rllib.algorithms.ragen.config.multi_agent import check_multi_agent

        try:
            check_envs(self)
            check_multi_agent(self)
        except ValueError as err:
            self._value_error(f"RagenConfig: {err}")

    def _validate_ragen(self) -> None:
        def bad(key: str, fix: str) -> None:
            self._value_error(f"RagenConfig: {key}={getattr(self, key)!r} is invalid: {fix}")

        for key in HYPERPARAMS:  # every key against its declared type and, if enumerated, its choices
            why = check_value(key, getattr(self, key))
            if why:
                bad(key, why)

        if self.num_env_runners < 1 and not self.in_evaluation:  # validation uses the training runners
            bad("num_env_runners", "Ragen samples on remote env runners only (each holds whole env groups and one "
                "engine; the driver loads no model): use num_env_runners >= 1")
        for key in ("env_groups", "group_size", "val_env_groups", "val_group_size", "minibatch_size", "num_epochs",
                    "micro_batch_size"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(key, "use a positive integer")
        for key, fix in estimator_problems(self.adv_estimator, self):  # the estimator table row's own checks
            bad(key, fix)
        head = model_setting(self.model_config, "value_head")
        head = self.uses_critic if head is None else head
        if bool(head) != self.uses_critic:
            need = "needs a critic" if self.uses_critic else "has no critic"
            self._value_error(f"RagenConfig: model_config['value_head']={head!r} disagrees with "
                              f"adv_estimator={self.adv_estimator!r}, which {need}: drop that key (the value head "
                              "follows the estimator) or pick an estimator that matches it")
        self._validate_filter(bad)
        if self.mi_interval is not None and (not isinstance(self.mi_interval, int) or self.mi_interval < 1):
            bad("mi_interval", "use None (off) or a positive integer")
        if not isinstance(self.mi_samples, int) or self.mi_samples < 2:
            bad("mi_samples", "the estimate compares prompts: use an integer >= 2")
        if not isinstance(self.dynamic_sampling_max_rounds, int) or self.dynamic_sampling_max_rounds < 0:
            bad("dynamic_sampling_max_rounds", "use an integer >= 0")
        if self.overlong_buffer_ratio is not None and not 0 < self.overlong_buffer_ratio <= 1:
            bad("overlong_buffer_ratio", "use None (off) or a fraction of max_response_tokens in (0, 1] (DAPO: 0.2)")
        for key in ("early_stop_std_patience", "early_stop_empty_patience", "early_stop_val_patience"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                bad(key, "use a positive integer, or None to turn the rule off")
        if not isinstance(self.early_stop_std_baseline_steps, int) or self.early_stop_std_baseline_steps < 1:
            bad("early_stop_std_baseline_steps", "use a positive integer")
        if not 0 < self.early_stop_std_ratio <= 1:
            bad("early_stop_std_ratio", "use a ratio in (0, 1] (RAGEN: 0.1)")
        self._validate_lr_schedule(bad)
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
        if self.rollout_mode == "one_step_off" and self.old_logprobs != "engine":
            bad("old_logprobs", "rollout_mode='one_step_off' trains on a batch sampled with the weights before the "
                "last update, so the PPO ratio must use the engine's behaviour log-probs: set "
                "old_logprobs='engine' (or rollout_mode='sync')")
        if self.train_temperature <= 0:
            bad("train_temperature", "use a temperature > 0 for training rollouts (log-probs need sampling)")
        self._validate_model_config()
        self._validate_env()
        self._validate_model()
        try:
            self.agent_config()
        except ValueError as err:
            self._value_error(f"RagenConfig: {err}")
        self._validate_learner_memory()
