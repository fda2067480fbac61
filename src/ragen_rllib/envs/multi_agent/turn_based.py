"""Turn-based multi-agent text environments: PettingZoo's AEC API with text observations and actions.

A :class:`TurnBasedTextEnv` is a ``pettingzoo.AECEnv``: ``agent_selection`` is whose turn it is, ``observe(agent)``
is that agent's own text view, ``step(action)`` applies the current agent's action (a string), and ``rewards``,
``terminations``, ``truncations`` and ``infos`` are per agent. Subclasses implement four hooks:

- ``_reset_state(options)``: a new game from ``self.np_random`` (seeded by ``reset(seed=...)``);
- ``_observe_text(agent)``: the state as ``agent`` sees it;
- ``_parse(agent, text)``: a clean action string -> what ``_apply`` takes, or ``None`` when invalid;
- ``_apply(agent, action) -> Move``: apply one valid action; say who moves next, the rewards and the outcome.

The base class owns what must hold for every game: untrusted action strings never raise; an invalid action
leaves the state unchanged, gives the mover ``invalid_penalty`` and the turn again, and ``max_invalid`` invalid
actions in a row forfeit the game (the other agents win); ``infos[agent]`` always carries ``success``,
``action_is_valid`` and ``action_is_effective``; ``max_moves`` truncates. Environments know nothing of LLMs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv

from ragen_rllib.envs.base import (
    ACTION_IS_EFFECTIVE,
    ACTION_IS_VALID,
    MAX_ACTION_CHARS,
    SUCCESS,
    coerce_action,
    require,
    text_space,
)


@dataclass(frozen=True)
class Move:
    """What one valid action did.

    Attributes:
        next_agent: who acts next (ignored when the game ended).
        rewards: reward of each agent for this action (missing agents: 0).
        done: the game ended.
        winners: the agents that count as successful at the end (a draw: none; a cooperative success: all).
    """

    next_agent: str
    rewards: dict[str, float] = field(default_factory=dict)
    done: bool = False
    winners: tuple[str, ...] = ()


class TurnBasedTextEnv(AECEnv):
    """Base class of turn-based text games (see the module docstring).

    Args:
        invalid_penalty: reward of an invalid action (<= 0).
        max_invalid: invalid actions in a row by one agent that forfeit the game.
        max_moves: valid and invalid actions in total before the game is truncated.
    """

    metadata = {"render_modes": ["ansi"], "name": "turn_based_text", "is_parallelizable": False}
    possible_agents: list[str] = []
    #: What each role is told (agent -> instruction).
    instructions: dict[str, str] = {}
    #: The fixed opponents :meth:`opponent_action` plays (scripted agents, evaluation pools).
    opponents: tuple[str, ...] = ("oracle",)

    def __init__(self, invalid_penalty: float = -0.1, max_invalid: int = 3, max_moves: int = 30,
                 render_mode: str | None = "ansi") -> None:
        require(isinstance(invalid_penalty, (int, float)) and invalid_penalty <= 0, "invalid_penalty",
                invalid_penalty, "a number <= 0")
        require(isinstance(max_invalid, int) and max_invalid >= 1, "max_invalid", max_invalid, "a positive integer")
        require(isinstance(max_moves, int) and max_moves >= 1, "max_moves", max_moves, "a positive integer")
        super().__init__()
        self.invalid_penalty, self.max_invalid, self.max_moves = float(invalid_penalty), max_invalid, max_moves
        self.render_mode = render_mode
        self.agents: list[str] = []
        self._spaces = {a: text_space() for a in self.possible_agents}
        self._action_spaces = {a: text_space(MAX_ACTION_CHARS) for a in self.possible_agents}

    # ------------------------------------------------------------------ PettingZoo API
    def observation_space(self, agent: str) -> gym.spaces.Text:
        return self._spaces[agent]

    def action_space(self, agent: str) -> gym.spaces.Text:
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None or not hasattr(self, "_np_random"):
            self._np_random, _ = gym.utils.seeding.np_random(seed)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: self._info(False, False, False) for a in self.agents}
        self._invalid_streak = {a: 0 for a in self.agents}
        self._moves = 0
        self.agent_selection = self.agents[0]
        self._reset_state(options or {})

    @property
    def np_random(self):
        return self._np_random

    def observe(self, agent: str) -> str:
        return self._observe_text(agent)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        text = coerce_action(action)
        parsed = None if text is None else self._safe_parse(agent, text)
        self._moves += 1
        if parsed is None:
            self._invalid(agent)
        else:
            try:
                move = self._apply(agent, parsed)
            except (ValueError, ArithmeticError, OverflowError, RecursionError):
                move = None
            if move is None:
                self._invalid(agent)
            else:
                self._valid(agent, move)
        if not all(self.terminations.values()) and self._moves >= self.max_moves:
            self.truncations = {a: True for a in self.agents}
        self._accumulate_rewards()

    def render(self) -> str:
        return self._observe_text(self.agent_selection) if self.agents else ""

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ subclass hooks
    def _reset_state(self, options: dict) -> None:
        raise NotImplementedError

    def _observe_text(self, agent: str) -> str:
        raise NotImplementedError

    def _parse(self, agent: str, text: str) -> Any | None:
        raise NotImplementedError

    def _apply(self, agent: str, action: Any) -> Move:
        raise NotImplementedError

    def oracle_action(self, agent: str) -> str:
        """A strong action for ``agent`` (whose turn it is)."""
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A well-formed but unguided action for ``agent`` drawn from ``rng`` (a warm start's noise moves)."""
        raise NotImplementedError(f"{type(self).__name__} has no random action")

    def opponent_action(self, agent: str, kind: str) -> str:
        """An action of the fixed opponent ``kind`` (one of :attr:`opponents`) for ``agent``."""
        require(kind in self.opponents, "opponent", kind, f"one of {self.opponents}")
        return self.oracle_action(agent)

    # ------------------------------------------------------------------ helpers
    def _safe_parse(self, agent: str, text: str) -> Any | None:
        try:
            return self._parse(agent, text)
        except (ValueError, ArithmeticError, OverflowError, RecursionError):
            return None

    def _invalid(self, agent: str) -> None:
        self._invalid_streak[agent] += 1
        self.rewards[agent] = self.invalid_penalty
        self.infos[agent] = self._info(False, False, False)
        if self._invalid_streak[agent] >= self.max_invalid:
            self._valid_end(self._forfeit(agent))

    def _forfeit(self, agent: str) -> Move:
        """What ``max_invalid`` invalid actions in a row by ``agent`` do (default, for competitive games: every
        other agent wins, +1 each, and ``agent`` gets -1; cooperative games override: nobody succeeds)."""
        others = tuple(a for a in self.agents if a != agent)
        return Move(next_agent=agent, rewards={agent: -1.0, **{a: 1.0 for a in others}}, done=True, winners=others)

    def _valid_end(self, move: Move) -> None:
        for a, r in move.rewards.items():
            self.rewards[a] += float(r)
        self._end(move.winners)

    def _valid(self, agent: str, move: Move) -> None:
        self._invalid_streak[agent] = 0
        for a, r in move.rewards.items():
            self.rewards[a] += float(r)
        self.infos[agent] = self._info(False, True, True)
        if move.done:
            self._end(move.winners)
        else:
            self.agent_selection = move.next_agent

    def _end(self, winners: tuple[str, ...]) -> None:
        self.terminations = {a: True for a in self.agents}
        for a in self.agents:
            self.infos[a] = {**self.infos[a], SUCCESS: a in winners}

    @staticmethod
    def _info(success: bool, valid: bool, effective: bool) -> dict:
        return {SUCCESS: success, ACTION_IS_VALID: valid, ACTION_IS_EFFECTIVE: effective}


def is_multi_agent(env: object) -> bool:
    """A turn-based multi-agent (PettingZoo AEC) env, or env class, rather than a single-agent gymnasium one."""
    return hasattr(env, "agent_iter") and hasattr(env, "possible_agents")


def resolve_scripted(name: str, env_class: type, key: str = "scripted agent"):
    """A fixed policy ``(env, agent) -> action string`` from its name: one of ``env_class.opponents`` (played by
    ``env.opponent_action``) or an import path ``my_pkg.module:function``. ValueError naming ``key`` otherwise."""
    import importlib

    if not isinstance(name, str) or not name:
        raise ValueError(f"{key}={name!r}: name one of {env_class.__name__}'s opponents {env_class.opponents} or "
                         "a function 'my_pkg.module:function' taking (env, agent) and returning an action string")
    if name in getattr(env_class, "opponents", ()):
        return Opponent(name)
    if ":" not in name:
        raise ValueError(f"{key}={name!r} is not one of {env_class.__name__}'s opponents {env_class.opponents}; "
                         "give one of them or an import path 'my_pkg.module:function'")
    module_name, attr = name.split(":", 1)
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{key}={name!r}: cannot import it ({err})") from err
    if not callable(fn):
        raise ValueError(f"{key}={name!r} is not callable: give a function (env, agent) -> action string")
    return fn


@dataclass(frozen=True)
class Opponent:
    """One of an env's fixed opponents (``env.opponent_action(agent, kind)``) as a scripted policy (picklable)."""

    kind: str

    def __call__(self, env: TurnBasedTextEnv, agent: str) -> str:
        return env.opponent_action(agent, self.kind)
