"""Which RL module plays which agent of a multi-agent env: what the env runners and the algorithm share (RLlib's
``policies``, ``policy_mapping_fn`` and ``policies_to_train``, read from a config). The settings themselves are
set and checked in :mod:`ragen_rllib.algorithms.ragen.config.multi_agent`."""

from __future__ import annotations

from collections.abc import Mapping


class AgentToModule:
    """RLlib's ``policy_mapping_fn`` from a ``{agent: module}`` mapping (picklable, so it reaches the runners)."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = dict(mapping)

    def __call__(self, agent_id, episode=None, **kwargs) -> str:
        if agent_id not in self.mapping:
            raise KeyError(f"agent {agent_id!r} is not in agent_to_module={self.mapping}")
        return self.mapping[agent_id]

    def __eq__(self, other) -> bool:
        return isinstance(other, AgentToModule) and other.mapping == self.mapping

    def __repr__(self) -> str:
        return f"AgentToModule({self.mapping!r})"


def module_ids(config) -> list[str]:
    """The run's RL modules, in a fixed order (RLlib's ``policies``; ``[default_policy]`` in a one-module run)."""
    return sorted(config.policies)


def module_of(config, agent: str) -> str:
    """The module that plays ``agent`` (RLlib's ``policy_mapping_fn``, called as RLlib's new API stack calls it:
    ``(agent_id, episode)``; RLlib's default maps every agent to ``default_policy``)."""
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

    fn = config.policy_mapping_fn
    if fn is AlgorithmConfig.DEFAULT_POLICY_MAPPING_FN:  # old-stack signature (it needs a worker): same answer
        return AlgorithmConfig.DEFAULT_AGENT_TO_MODULE_MAPPING_FN(agent, None)
    return fn(agent, None)


def is_trained(config, module_id: str) -> bool:
    """Whether ``module_id`` learns (RLlib's ``policies_to_train``; None: every module)."""
    which = config.policies_to_train
    if which is None:
        return True
    return which(module_id, None) if callable(which) else module_id in which
