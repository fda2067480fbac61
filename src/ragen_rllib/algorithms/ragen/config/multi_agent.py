"""Several LLM agents in one env: which agent each RL module plays, which agents are scripted, and what each
module may set for itself -- checked on the driver before any actor starts.

RLlib's own multi-agent settings carry it: ``.multi_agent(policies=..., policy_mapping_fn=...)`` (one
``RagenTorchRLModule`` per policy id, built by RLlib as a ``MultiRLModuleSpec``) and
``.rl_module(algorithm_config_overrides_per_module={module: {key: value}})`` (each module's lr, estimator and group
settings; the learner and the driver read a module's settings with RLlib's ``get_config_for_module``). Ragen adds
two keys to ``multi_agent()``, both plain mappings so a config file holds them:

- ``agent_to_module``: ``{agent: module}``; sets ``policy_mapping_fn`` (:class:`AgentToModule`) and, unless given,
  ``policies`` (the modules named). Self-play: every agent maps to one module (the default: every agent to the
  run's one module, RLlib's ``default_policy``).
- ``scripted_agents``: ``{agent: opponent}``: agents played by a fixed policy instead of an LLM (training against a
  fixed pool): one of the env's ``opponents`` (``env.opponent_action(agent, name)``) or an import path
  ``my_pkg.module:function`` of a function ``(env, agent) -> action string``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragen_rllib.core.modules import AgentToModule, module_ids, module_of

#: The settings a module may override (``algorithm_config_overrides_per_module``): what its learner and its part
#: of the driver (reward shaping, group filter, advantages) read. Sampling, agent-layer and run-wide settings are
#: one per run (the runners sample every module's turns in the same rounds), so overriding them is refused.
PER_MODULE_KEYS = (
    "lr", "critic_lr", "grad_clip", "gamma", "minibatch_size", "num_epochs",
    "adv_estimator", "lambda_", "high_level_gamma", "grpo_norm_by_std", "gigpo_gamma", "gigpo_step_weight",
    "use_turn_scores", "clip_low", "clip_high", "old_logprobs", "dual_clip", "entropy_coeff", "use_kl_loss",
    "use_kl_in_reward", "kl_coeff", "kl_type", "loss_agg_mode", "micro_batch_size", "lr_warmup_steps", "lr_decay",
    "lr_decay_steps", "lr_min_ratio", "vf_loss_coeff", "vf_clip", "reward_norm", "reward_norm_scope",
    "overlong_buffer_ratio", "overlong_penalty",
    "filter_strategy", "filter_value", "filter_keep", "filter_top_p_mode", "filter_include_zero", "filter_min_std",
    "filter_metric", "filter_loss_scale",
)


def ragen_multi_agent_keys(config, agent_to_module, scripted_agents, kwargs: dict) -> dict:
    """Set Ragen's ``multi_agent()`` keys on ``config``; returns RLlib's keyword arguments (``agent_to_module``
    filling ``policy_mapping_fn`` and ``policies`` where the caller gave neither)."""
    from ray.rllib.algorithms.algorithm_config import NotProvided

    kwargs = dict(kwargs)
    if agent_to_module is not NotProvided:
        config.agent_to_module = {str(a): str(m) for a, m in (agent_to_module or {}).items()}
        if config.agent_to_module:
            kwargs.setdefault("policy_mapping_fn", AgentToModule(config.agent_to_module))
            kwargs.setdefault("policies", sorted(set(config.agent_to_module.values())))
    if scripted_agents is not NotProvided:
        config.scripted_agents = {str(a): str(p) for a, p in (scripted_agents or {}).items()}
    return kwargs


def check_multi_agent(config) -> None:
    """ValueError naming the key, the value and the fix for the first multi-agent problem of ``config``."""
    from ragen_rllib.envs.loading import multi_agent_class

    modules = module_ids(config)
    _check_overrides(config, modules)
    if len(modules) > 1 and config.mi_interval:
        raise ValueError(f"mi_interval={config.mi_interval!r}: the reasoning-MI diagnostic scores with one engine, and "
                         f"this run has one per module ({modules}); set mi_interval=None")
    multi_settings = config.is_multi_agent or config.agent_to_module or config.scripted_agents
    for tag in config.train_tags:
        env = multi_agent_class(tag.env)
        if env is None:
            if multi_settings:
                raise ValueError(f"multi_agent settings (policies={modules}, agent_to_module="
                                 f"{config.agent_to_module}, scripted_agents={config.scripted_agents}) need a "
                                 f"turn-based multi-agent env (a PettingZoo AEC env such as "
                                 "'ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv'); "
                                 f"env {tag.env!r} is single-agent: "
                                 "drop the multi_agent settings")
            continue
        agents = list(env.possible_agents)
        _check_scripted(config.scripted_agents, env, agents)
        llm = [a for a in agents if a not in config.scripted_agents]
        if not llm:
            raise ValueError(f"scripted_agents={config.scripted_agents} scripts every agent of {tag.env!r}: leave "
                             "at least one agent to an LLM module")
        unknown = sorted(set(config.agent_to_module) - set(agents))
        if unknown:
            raise ValueError(f"agent_to_module={config.agent_to_module} names {unknown}, which {tag.env!r} does "
                             f"not have: its agents are {agents}")
        for agent in llm:
            try:
                module = module_of(config, agent)
            except Exception as err:  # noqa: BLE001 - a user's mapping function: report what it did
                raise ValueError(f"policy_mapping_fn failed for agent {agent!r} of {tag.env!r} ({err!r}): map "
                                 f"every LLM agent ({llm}) to one of policies={modules}, e.g. "
                                 f"agent_to_module={{{', '.join(f'{a!r}: ...' for a in llm)}}}") from err
            if module not in modules:
                raise ValueError(f"policy_mapping_fn maps agent {agent!r} of {tag.env!r} to module {module!r}, "
                                 f"which is not in policies={modules}: add it to policies or map the agent to "
                                 "one of them (agent_to_module)")


def _check_scripted(scripted: Mapping[str, str], env: type, agents: list[str]) -> None:
    from ragen_rllib.envs.multi_agent.turn_based import resolve_scripted

    for agent, name in scripted.items():
        if agent not in agents:
            raise ValueError(f"scripted_agents[{agent!r}]: {env.__name__} has no agent {agent!r}; its agents are "
                             f"{agents}")
        resolve_scripted(name, env, f"scripted_agents[{agent!r}]")


def _check_overrides(config, modules: list[str]) -> None:
    from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS, check_value
    from ragen_rllib.algorithms.ragen.estimators import ESTIMATORS

    for module, overrides in config.algorithm_config_overrides_per_module.items():
        where = f"algorithm_config_overrides_per_module[{module!r}]"
        if module not in modules:
            raise ValueError(f"{where}: no module {module!r} in policies={modules}")
        if not isinstance(overrides, Mapping):
            raise ValueError(f"{where}={overrides!r}: use a mapping of settings, e.g. {{'lr': 1e-5}}")
        for key, value in overrides.items():
            if key not in PER_MODULE_KEYS:
                raise ValueError(f"{where}[{key!r}]={value!r}: {key!r} is one per run, not per module (a module "
                                 f"may set {', '.join(PER_MODULE_KEYS)}); set it in training()")
            if key in HYPERPARAMS:
                why = check_value(key, value)
            else:  # RLlib's numeric keys
                why = None if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else (
                    "use a positive number")
            if why:
                raise ValueError(f"{where}[{key!r}]={value!r} is invalid: {why}")
        # not get_config_for_module: RLlib caches its copy at the first call, so a later setting would be missed
        estimator = overrides.get("adv_estimator", config.adv_estimator)
        if ESTIMATORS[estimator].critic != config.uses_critic:
            raise ValueError(f"{where}['adv_estimator']={estimator!r}: every module of a run has a value "
                             f"head or none (the run's adv_estimator={config.adv_estimator!r} decides); pick an "
                             "estimator that agrees on the critic")
