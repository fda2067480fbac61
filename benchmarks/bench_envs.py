"""Env presets shared by the rollout and learner benchmarks (``--env``): env id, env config and agent settings."""

from __future__ import annotations

#: env presets: env id, env config and agent settings ({}: the agent's defaults)
ENVS = {
    "frozenlake": {"env": "ragen/FrozenLake-v0", "env_config": {"size": 4, "is_slippery": False}, "agent": {}},
    "sokoban": {"env": "ragen/Sokoban-v0",
                "env_config": {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300},
                "agent": {"enable_think": False, "max_response_tokens": 48, "max_turns": 5}},
}


def agent_settings(args) -> dict:
    """The env preset's agent settings with the command line's overrides."""
    agent = dict(ENVS[args.env]["agent"])
    for key in ("enable_think", "max_response_tokens", "max_turns"):
        if getattr(args, key) is not None:
            agent[key] = getattr(args, key)
    return agent
