"""A config's envs, checked on the driver before any actor starts: env modules import, every env resolves and
takes its ``env_config``, an env the runners could not make (registered in the driver's process only) is named
with the fix, tags parse, and the groups split evenly over the runners (see :mod:`ragen_rllib.core.env_tags` and
:mod:`ragen_rllib.envs.loading`)."""

from __future__ import annotations

from ragen_rllib.core.env_tags import split_groups
from ragen_rllib.envs.loading import check_env_config, env_offers_tools, import_env_modules, unregistered_in_runners
from ragen_rllib.envs.remote.served import check_server, is_url


def check_envs(config) -> None:
    """ValueError naming the setting and the fix for the first env problem of ``config`` (a RagenConfig)."""
    import_env_modules(config.env_modules)
    if config.env is None and not config.env_tags:
        raise ValueError("env=None: name an env with .environment('ragen/FrozenLake-v0') or env_tags")
    train, val = config.train_tags, config.val_tags
    for tag in (*train, *val):
        check_env_config(tag.env, tag.env_config)
        if is_url(tag.env):
            check_server(tag.env, tag.env_config)
        if env_offers_tools(tag.env) and not config.agent_config().enable_think:
            raise ValueError(f"env {tag.env!r} offers tools, which need enable_think=True (agent settings): with "
                             "enable_think=False every response is pre-filled with <answer>, so no tool can be "
                             "called. Set .training(enable_think=True) (config files: training: {enable_think: true})")
    remote = config.num_env_runners > 0  # a local runner (0) shares the driver's gymnasium registry
    local = unregistered_in_runners([t.env for t in (*train, *val)], config.env_modules) if remote else []
    if local:
        raise ValueError(
            f"env {local[0]!r} is registered in this process only (gymnasium.register in your script?): the env "
            "runners are processes of their own that import ragen_rllib's envs and "
            f"environment.env_modules={config.env_modules} only, so they could not make it. Fix: move the register "
            "call into a module and name it in environment.env_modules (ship it to remote runners with Ray's "
            f"runtime_env py_modules or working_dir), or give env='your_module:{local[0]}'")
    if config.env_tags and sum(t.groups for t in train) != config.env_groups:
        raise ValueError(f"env_groups={config.env_groups} disagrees with the env_tags' groups "
                         f"({' + '.join(str(t.groups) for t in train)} = {sum(t.groups for t in train)}): "
                         "drop env_groups (env_tags set it) or change the tags' groups")
    runners = max(config.num_env_runners, 1)
    for key, tags in (("env_tags" if config.env_tags else f"env_groups={config.env_groups}", train),
                      ("val_env_tags" if config.val_env_tags else f"val_env_groups={config.val_env_groups}", val)):
        try:
            split_groups(tags, runners)
        except ValueError as err:
            raise ValueError(f"{key}: {err}") from None
