"""What an env runner sends to the learner: one plain, picklable record per trajectory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ragen_rllib.agent.episode import AgentEpisode
from ragen_rllib.agent.multi_agent import MultiAgentEpisode
from ragen_rllib.agent.transcript import Sample


@dataclass
class Trajectory:
    """A finished multi-turn trajectory.

    Attributes:
        env_id: its env's tag (the gymnasium id when the run has one env); metrics are split by it.
        group_id: the group it belongs to, unique within a rollout (training: the env seed); GRPO, pass@k and
            filtering work per group.
        seed: the env reset seed.
        samples: its training samples (token ids, loss mask, sampling log-probs, turn ends and rewards).
        score: trajectory reward = sum of turn rewards (format penalties included).
        metrics: RAGEN's episode metrics (success, num_actions, action_is_valid, ...).
        response_ids: the engine's sampled ids of each turn, exactly as generated.
        turn_states: the observation text each turn acted on (GiGPO's anchor states).
        error: a message when the runner caught an error in this trajectory (it is then not trained).
        module_id: the RL module that sampled it and learns from it (set by the env runner).
        agent: the agent whose side of a multi-agent episode it is (None: a single-agent episode).
    """

    env_id: str
    group_id: int
    seed: int
    samples: list[Sample] = field(default_factory=list)
    score: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    response_ids: list[list[int]] = field(default_factory=list)
    turn_states: list[str] = field(default_factory=list)
    error: str | None = None
    module_id: str | None = None
    agent: str | None = None

    @classmethod
    def from_episode(cls, ep: AgentEpisode, env_id: str, group_id: int) -> Trajectory:
        return cls(env_id=env_id, group_id=group_id, seed=int(ep.seed), samples=ep.samples(),
                   score=ep.episodic_return, metrics=ep.metrics(),
                   response_ids=[list(turn.response_ids) for turn in ep.turns],
                   turn_states=[turn.state for turn in ep.turns], error=ep.error)

    @classmethod
    def from_agent(cls, ep: MultiAgentEpisode, agent: str, env_id: str, group_id: int) -> Trajectory:
        """One LLM agent's side of a multi-agent episode (its own samples, turn rewards and metrics)."""
        turns = ep.turns[agent]
        return cls(env_id=env_id, group_id=group_id, seed=int(ep.seed), samples=ep.samples(agent),
                   score=sum(t.reward for t in turns), metrics=ep.metrics(agent),
                   response_ids=[list(t.response_ids) for t in turns], turn_states=[t.observation for t in turns],
                   error=ep.error, agent=agent)


def agent_trajectories(episodes: list[MultiAgentEpisode], tags: list[str], group_ids: list[int],
                       module_of: Callable[[str], str] | None = None) -> list[Trajectory]:
    """Each LLM agent's side of each multi-agent episode, as its own trajectory.

    Every (group, agent) pair is a group of its own (group normalisation per agent: ``group_id * agents + i``),
    and trajectories are tagged by agent (``<agent>``, or ``<tag>/<agent>`` in a run with several env tags), so
    metrics come per agent (``result["env_runners"]["<agent>/success_rate"]``). An agent that never moved (the
    other forfeited first) has no samples to train but counts in the metrics (its win is a win). ``module_of``
    names each agent's module (``module_id``)."""
    several = len(set(tags)) > 1
    out = []
    for ep, tag, group in zip(episodes, tags, group_ids):
        for i, agent in enumerate(ep.llm_agents):
            traj = Trajectory.from_agent(ep, agent, f"{tag}/{agent}" if several else agent,
                                         group * len(ep.llm_agents) + i)
            traj.module_id = module_of(agent) if module_of is not None else None
            out.append(traj)
    return out
