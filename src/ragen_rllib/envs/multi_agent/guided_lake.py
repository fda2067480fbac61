"""A cooperative, asymmetric pair on FrozenLake: a guide who sees the map, a walker who moves without it.

Each step the ``guide`` sees the whole lake (the FrozenLake env's own text view, with the walker on it) and names a
move; the ``walker`` sees only its own row and column and the guide's advice, and makes the move. Reaching the goal
ends the game with reward 1 for both (joint success); a hole or the step limit ends it with 0. The lake
is :class:`~ragen_rllib.envs.games.frozen_lake.FrozenLakeEnv` (its maps, its slip, its step limit), seeded by the
reset seed.
The walker's move is the only one that changes the lake, so good advice is worth nothing unless the walker
follows it, and the walker cannot reach the goal alone.
"""

from __future__ import annotations

import numpy as np

from ragen_rllib.envs.base import SUCCESS, require
from ragen_rllib.envs.games.frozen_lake import ACTIONS, LEGEND, FrozenLakeEnv
from ragen_rllib.envs.games.grid import legend_text
from ragen_rllib.envs.multi_agent.turn_based import Move, TurnBasedTextEnv

GUIDE, WALKER = "guide", "walker"
MOVES = ", ".join(ACTIONS[:-1]) + " or " + ACTIONS[-1]


class GuidedLakeEnv(TurnBasedTextEnv):
    """See the module docstring. ``size``, ``p``, ``is_slippery``, ``success_rate`` and ``max_steps`` are the
    lake's (:class:`~ragen_rllib.envs.games.frozen_lake.FrozenLakeEnv`); ``max_steps`` counts the walker's moves."""

    metadata = {**TurnBasedTextEnv.metadata, "name": "guided_frozen_lake"}
    possible_agents = [GUIDE, WALKER]

    def __init__(self, size: int = 4, p: float = 0.9, is_slippery: bool = False, success_rate: float = 0.8,
                 max_steps: int = 10, invalid_penalty: float = -0.1, max_invalid: int = 3,
                 render_mode: str | None = "ansi") -> None:
        require(isinstance(max_steps, int) and max_steps >= 1, "max_steps", max_steps, "a positive integer")
        super().__init__(invalid_penalty=invalid_penalty, max_invalid=max_invalid,
                         max_moves=2 * max_steps * max_invalid, render_mode=render_mode)
        self.lake = FrozenLakeEnv(size=size, p=p, is_slippery=is_slippery, success_rate=success_rate,
                                  max_steps=max_steps)
        slip = self.lake.slip_text
        self.instructions = {
            GUIDE: (f"You are the guide in a team on a frozen lake. You see the map; the walker does not. Each step, "
                    f"tell the walker the next move towards the goal G that avoids the holes O: answer {MOVES}. The "
                    f"team gets reward 1 when the walker reaches the goal.{slip}\n{legend_text(LEGEND)}"),
            WALKER: (f"You are the walker in a team on a frozen lake. You cannot see the map; the guide can and "
                     f"tells you which way to go. Each step, answer your move: {MOVES}. The team gets reward 1 when "
                     f"you reach the goal; a hole ends the game.{slip}"),
        }
        self.advice = ""

    def _reset_state(self, options: dict) -> None:
        self.lake.reset(seed=int(self.np_random.integers(2**31)), options=options)
        self.advice = ""

    def _observe_text(self, agent: str) -> str:
        if agent == GUIDE:
            return f"{self.lake.render()}\nYour advice for the walker:"
        row, col = divmod(self.lake.state, self.lake.ncol)
        return (f"You are at row {row + 1}, column {col + 1} of a {self.lake.nrow}x{self.lake.ncol} lake (row 1 is "
                f"the top, column 1 the left).\nThe guide says: {self.advice or '(nothing yet)'}")

    def _parse(self, agent: str, text: str) -> str | None:
        move = text.strip().rstrip(".!").strip().capitalize()
        return move if move in ACTIONS else None

    def _apply(self, agent: str, action: str) -> Move:
        if agent == GUIDE:
            self.advice = action
            return Move(next_agent=WALKER)
        _, _, terminated, truncated, info = self.lake.step(action)
        self.advice = ""
        if terminated or truncated:
            won = bool(info[SUCCESS])
            reward = 1.0 if won else 0.0
            return Move(next_agent=GUIDE, rewards={GUIDE: reward, WALKER: reward}, done=True,
                        winners=(GUIDE, WALKER) if won else ())
        return Move(next_agent=GUIDE)

    def _forfeit(self, agent: str) -> Move:
        return Move(next_agent=agent, done=True)  # cooperative: a stuck teammate fails the team

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A random move (either role)."""
        return ACTIONS[int(rng.integers(len(ACTIONS)))]

    def oracle_action(self, agent: str) -> str:
        """The guide: the first move of a shortest hole-free path; the walker: the guide's advice."""
        if agent == WALKER:
            return self.advice or (self.lake.oracle_action() or ACTIONS[0])
        return self.lake.oracle_action() or ACTIONS[0]
