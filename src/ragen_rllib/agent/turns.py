"""Execute one parsed response in an environment: actions in order, within the trajectory budget."""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym

from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.parsing import ParsedResponse
from ragen_rllib.envs.base import ACTION_IS_EFFECTIVE, ACTION_IS_VALID, SUCCESS


@dataclass(frozen=True)
class TurnResult:
    """Outcome of one turn.

    Attributes:
        reward: turn reward = sum of the executed actions' rewards + the format penalty (if any).
        format_ok: the response parsed.
        action_is_valid: format_ok and every parsed action was valid.
        actions: the actions executed, in order.
        num_effective: executed actions that changed the state.
        done: the env terminated or was truncated.
        success: the env reports success.
        state: the rendering after the turn.
        observations: the observation after each executed action (tool envs: each call's result).
    """

    reward: float
    format_ok: bool
    action_is_valid: bool
    actions: tuple[str, ...]
    num_effective: int
    done: bool
    success: bool
    state: str
    observations: tuple[str, ...] = ()

    @property
    def penalized(self) -> bool:
        """The format penalty applied (no parsable answer or an invalid action)."""
        return not self.action_is_valid


def execute_turn(env: gym.Env, parsed: ParsedResponse, cfg: AgentConfig, actions_left: int, state: str) -> TurnResult:
    """Step ``env`` with ``parsed.actions`` in order until it is done or ``actions_left`` is spent.

    Invalid action names were already dropped by the parser (the env never sees them); free-form
    answers go to the env, whose ``action_is_valid`` decides. ``state`` is the rendering before the turn.
    A NaN or inf reward raises ValueError: the episode is then an env error, never trained on.
    """
    reward, executed, effective, observations = 0.0, [], 0, []
    valid = parsed.format_ok and parsed.num_invalid == 0
    done = success = False
    for action in parsed.actions:
        if actions_left - len(executed) <= 0:
            break
        state, r, terminated, truncated, info = env.step(action)
        if not math.isfinite(float(r)):  # ends the episode as an env error (rollout() catches it)
            raise ValueError(f"the env returned a non-finite reward {r!r} for the action {action!r}")
        executed.append(action)
        observations.append(str(state))
        reward += float(r)
        valid = valid and bool(info[ACTION_IS_VALID])
        effective += int(bool(info[ACTION_IS_EFFECTIVE]))
        success = bool(info[SUCCESS])
        if terminated or truncated:
            done = True
            break
    if not valid:
        reward += cfg.format_penalty
    return TurnResult(reward=reward, format_ok=parsed.format_ok, action_is_valid=valid, actions=tuple(executed),
                      num_effective=effective, done=done, success=success, state=state,
                      observations=tuple(observations))
