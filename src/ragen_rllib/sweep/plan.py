"""``ragen-rllib plan``: one trial's resources (a sweep's first point) and how many trials a cluster runs at once,
before anything starts."""

from __future__ import annotations

import os

from ragen_rllib.run.resources import check_fits, cluster_nodes, describe, local_node, parse_cluster, trial_plan
from ragen_rllib.sweep.space import apply_param_space


def plan(config_path: str, overrides: list[str], cluster: str | None = None, log=print) -> int:
    """``ragen-rllib plan``: print one trial's resources (a sweep's first point) and how many trials the cluster
    (``cluster``, else the connected Ray when ``run.ray_init.address`` or ``RAY_ADDRESS`` names one, else this
    machine) runs at once. Returns 0, or raises the :func:`check_fits` error when one trial does not fit."""
    from ragen_rllib.algorithms.ragen.ragen_config import RagenConfig
    config = RagenConfig.from_yaml(config_path, overrides)
    ray_init = dict(config.run_settings.get("ray_init") or {})
    space = dict(config.tune_settings.get("param_space") or {})
    config.tune_settings = {}
    sample = apply_param_space(config, space)[1] if space else config
    sample.validate()
    if cluster:
        nodes, where = parse_cluster(cluster), f"--cluster {cluster!r}"
    elif ray_init.get("address") or os.environ.get("RAY_ADDRESS"):
        from ragen_rllib.run.ray_init import init_ray

        init_ray(address=ray_init.get("address") or os.environ["RAY_ADDRESS"], log_to_driver=False)
        nodes, where = cluster_nodes(), "the connected Ray cluster"
    else:
        nodes, where = [local_node(ray_init)], "this machine, as a run started here sees it"
    trial = trial_plan(sample)
    log(describe(trial, nodes, where, config.tune_settings.get("max_concurrent_trials")))
    check_fits(trial, nodes, where)
    return 0
