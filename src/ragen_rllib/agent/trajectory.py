"""What an env runner sends to the learner: one plain, picklable record per trajectory."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragen_rllib.agent.episode import AgentEpisode
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

    @classmethod
    def from_episode(cls, ep: AgentEpisode, env_id: str, group_id: int) -> Trajectory:
        return cls(env_id=env_id, group_id=group_id, seed=int(ep.seed), samples=ep.samples(),
                   score=ep.episodic_return, metrics=ep.metrics(),
                   response_ids=[list(turn.response_ids) for turn in ep.turns],
                   turn_states=[turn.state for turn in ep.turns], error=ep.error)
