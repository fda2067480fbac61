"""A config file's ``tune`` section as Tune objects: search spaces in plain YAML, schedulers by name.

The search space (``tune.param_space``) maps config key paths to values or distributions::

    tune:
      param_space:
        environment.env_config.success_rate: {grid_search: [1.0, 0.8, 0.5]}
        training.lr: {loguniform: [1.0e-6, 1.0e-4]}
        variant:                      # settings that change together, one grid entry each
          grid_search:
            - {name: filter, training.filter_strategy: top_p, training.filter_value: 0.9}
            - {name: nofilter, training.filter_strategy: top_p, training.filter_value: 1.0}
        variant.algo:                 # more grouped axes: variant.<axis>, crossed with the others
          grid_search: [{name: ppo, preset: ppo}, {name: grpo, preset: grpo}]   # preset: an algorithm preset

Distributions: ``grid_search``, ``choice`` (lists), ``uniform``, ``loguniform``, ``randint``, ``randn``
(``[low, high]`` / ``[mean, sd]``). A key path is ``section.key`` with a builder section of the config file
(``training.lr``, ``environment.env_config.<key>``, ``rl_module.model_config.<key>``). Every key is checked
before any trial starts (the nearest valid key is suggested), and one sample of the space is validated as a
whole config.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ragen_rllib.algorithms.ragen.config.key_paths import apply_variant, check_path, set_path, variant_axis

DISTRIBUTIONS = ("grid_search", "choice", "uniform", "loguniform", "randint", "randn")
SCHEDULERS = ("fifo", "asha", "pbt")


def to_tune(value: Any, where: str) -> Any:
    """A YAML value as a Tune search space object (or the value itself)."""
    from ray import tune

    if not (isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in DISTRIBUTIONS):
        return value
    (kind, args), = value.items()
    if kind in ("grid_search", "choice"):
        if not isinstance(args, list) or not args:
            raise ValueError(f"{where}: {kind} takes a non-empty list, not {args!r}")
        return getattr(tune, kind)(args)
    if not isinstance(args, list) or len(args) != 2:
        raise ValueError(f"{where}: {kind} takes [low, high] (randn: [mean, sd]), not {args!r}")
    return getattr(tune, kind)(*args)


def first_value(value: Any) -> Any:
    """One representative value of a YAML search space (the first grid/choice entry, the low end of a range)."""
    if isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in DISTRIBUTIONS:
        (kind, args), = value.items()
        return args[0] if isinstance(args, list) and args else args
    return value


def apply_param_space(config, space: Mapping[str, Any]):
    """``(config with Tune objects in place, one sampled config for validation)``."""
    sample = config.copy(copy_frozen=False)
    for path, value in space.items():
        axis = variant_axis(path)
        if axis is not None:
            entries = value.get("grid_search") if isinstance(value, Mapping) else None
            if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries) or not entries:
                raise ValueError(f"tune.param_space.{path}: use {{grid_search: [{{name: a, section.key: value, ...}}, "
                                 "...]}")
            for entry in entries:
                apply_variant(sample.copy(copy_frozen=False), entry)  # every key checked
            grid = to_tune(value, f"tune.param_space.{path}")
            if axis:
                config.sweep_variants = {**(config.sweep_variants or {}), axis: grid}
            else:
                config.sweep_variant = grid
            apply_variant(sample, entries[0])
            continue
        set_path(config, path, to_tune(value, f"tune.param_space.{path}"))
        set_path(sample, path, first_value(value))
    return config, sample


def make_scheduler(spec: Mapping[str, Any] | None, metric: str, mode: str, config):
    """A Tune scheduler from ``tune.scheduler`` (``{type: asha | pbt | fifo, ...its arguments}``); PBT's
    ``hyperparam_mutations`` keys are config key paths like the search space's."""
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining

    spec = dict(spec or {"type": "fifo"})
    kind = spec.pop("type", "fifo")
    check_metric(metric)
    if kind not in SCHEDULERS:
        raise ValueError(f"tune.scheduler.type={kind!r} is unknown; use one of {list(SCHEDULERS)}")
    if kind == "fifo":
        return FIFOScheduler()
    if kind == "asha":
        spec.setdefault("time_attr", "training_iteration")
        return ASHAScheduler(metric=metric, mode=mode, **spec)
    mutations = {}
    for path, value in dict(spec.pop("hyperparam_mutations", {}) or {}).items():
        _, keys = check_path(path, config)
        node = mutations
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = to_tune(value, f"tune.scheduler.hyperparam_mutations.{path}")
    if not mutations:
        raise ValueError("tune.scheduler: pbt needs hyperparam_mutations, e.g. {training.lr: {loguniform: [1e-6, "
                         "1e-4]}}")
    spec.setdefault("time_attr", "training_iteration")
    return PopulationBasedTraining(metric=metric, mode=mode, hyperparam_mutations=mutations, **spec)


#: top-level result keys a metric may name directly (Tune's and RLlib's)
TOP_LEVEL = ("training_iteration", "time_total_s", "time_this_iter_s", "num_env_steps_sampled_lifetime",
             "num_episodes_lifetime")
ROLLOUT_ROOTS = ("env_runners", "evaluation/env_runners", "evaluation_before_training/env_runners")


def rollout_metric_names() -> list[str]:
    """The metric names a rollout reports (``result["env_runners"]`` and validation's)."""
    from ragen_rllib.agent import episode as E
    from ragen_rllib.agent.trajectory import Trajectory
    from ragen_rllib.algorithms.ragen.driver.rollout_metrics import rollout_metrics

    one = Trajectory(env_id="x", group_id=0, seed=0, metrics={E.M_SUCCESS: 0.0})
    return sorted(rollout_metrics([one], 1.0))


def check_metric(metric: str) -> None:
    """A scheduler's metric must be one a result reports: a top-level key, a rollout metric under
    ``env_runners`` / ``evaluation/env_runners`` (optionally per tag), or a learner / timer path."""
    if metric in TOP_LEVEL or metric.startswith(("learners/", "timers/")):
        return
    names = rollout_metric_names()
    for root in ROLLOUT_ROOTS:
        if metric.startswith(root + "/") and metric[len(root) + 1:].split("/")[-1] in names:
            return
    close = difflib.get_close_matches(metric, [f"{r}/{n}" for r in ROLLOUT_ROOTS for n in names], n=3)
    raise ValueError(f"tune.metric={metric!r} is not reported by any result"
                     + (f"; did you mean {close}?" if close else "")
                     + f"; rollout metrics (under {list(ROLLOUT_ROOTS)}, or <root>/<tag>/<name>): {names}; "
                     f"also {list(TOP_LEVEL)} and learners/... timers/...")
