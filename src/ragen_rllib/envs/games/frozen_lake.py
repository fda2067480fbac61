"""FrozenLake as text: gymnasium's toy-text transition law, RAGEN's symbols, maps and defaults.

Each reset builds gymnasium's ``FrozenLakeEnv`` for the episode's map (the map seed is the reset
seed, as in RAGEN) and samples its transition table ``P`` with this env's ``np_random``: the intended
move happens with probability ``success_rate``, each perpendicular move with ``(1 - success_rate) / 2``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as _GymFrozenLake
from gymnasium.envs.toy_text.frozen_lake import is_valid

from ragen_rllib.envs.base import StepOutcome, TextEnv, require
from ragen_rllib.envs.games import grid

ACTIONS = ["Left", "Down", "Right", "Up"]  # gymnasium's action order 0..3
LEGEND = {
    "P": "player",
    "_": "frozen tile",
    "O": "hole",
    "G": "goal",
    "X": "player fell into a hole",
    "√": "player on the goal",
}
_MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}
_MAX_MAP_TRIES = 10_000


def random_map(size: int, p: float, rng: np.random.Generator) -> list[str]:
    """A random ``size`` x ``size`` map with a path from S (top left) to G (bottom right).

    Same sampling as gymnasium's ``generate_random_map`` but with a bounded number of tries.
    """
    for _ in range(_MAX_MAP_TRIES):
        board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p])
        board[0][0], board[-1][-1] = "S", "G"
        if is_valid(board, size):
            return ["".join(row) for row in board]
    raise ValueError(f"env_config['p'] = {p!r} is too low to find a {size}x{size} map with a path; raise p")


class FrozenLakeEnv(TextEnv):
    """Walk from the start to the goal without falling into a hole; the ice may be slippery.

    Args:
        size: side of a random square map (>= 2).
        p: probability that a tile of a random map is frozen (0 < p <= 1).
        success_rate: probability the intended move happens when slippery ("slipper rate" = 1 - success_rate).
        is_slippery: moves can slip to a perpendicular direction.
        desc: a fixed map as rows of S/F/H/G (gymnasium's letters); overrides size and p.
        observation_format: "grid" | "coord" | "grid_coord".
        max_steps: step limit of an episode before truncation.
    """

    action_names = ACTIONS

    def __init__(
        self,
        size: int = 4,
        p: float = 0.9,
        success_rate: float = 0.8,
        is_slippery: bool = True,
        desc: Sequence[str] | None = None,
        observation_format: str = "grid",
        max_steps: int = 100,
        render_mode: str | None = "ansi",
    ) -> None:
        require(isinstance(size, int) and size >= 2, "size", size, "use an integer >= 2")
        require(isinstance(p, (int, float)) and 0 < p <= 1, "p", p, "use a probability in (0, 1]")
        require(
            isinstance(success_rate, (int, float)) and 0 <= success_rate <= 1,
            "success_rate",
            success_rate,
            "use a probability in [0, 1]",
        )
        require(isinstance(max_steps, int) and max_steps >= 1, "max_steps", max_steps, "use an integer >= 1")
        if desc is not None:
            desc = [str(row) for row in desc]
            ok = (
                len(desc) >= 2
                and all(len(row) == len(desc[0]) for row in desc)
                and all(set(row) <= set("SFHG") for row in desc)
                and sum(row.count("S") for row in desc) == 1
                and sum(row.count("G") for row in desc) >= 1
            )
            require(ok, "desc", desc, "use equal-length rows of S/F/H/G with one S and at least one G")
        self.size, self.p = size, float(p)
        self.success_rate, self.is_slippery = float(success_rate), bool(is_slippery)
        self.fixed_desc = desc
        self.observation_format = grid.check_observation_format(observation_format)
        self.max_steps = max_steps
        super().__init__(render_mode)
        self.desc: list[str] = []
        self._P: dict = {}
        self.state = 0

    @property
    def slip_text(self) -> str:
        """The sentence that explains the slip (with a leading space), or ``""`` on ice that does not slip."""
        if not (self.is_slippery and self.success_rate < 1):
            return ""
        return (f" The ice is slippery: you move in the intended direction with probability {self.success_rate:g}, "
                "otherwise to one of the two perpendicular directions.")

    @property
    def instruction(self) -> str:
        return (
            "You are solving the FrozenLake puzzle. Walk from the start to the goal G over the frozen tiles "
            "without falling into a hole O. You get reward 1 when you reach the goal." + self.slip_text + "\n"
            + grid.legend_text(LEGEND)
        )

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        if self.fixed_desc is not None:
            self.desc = list(self.fixed_desc)
        else:
            self.desc = random_map(self.size, self.p, self.np_random)
        inner = _GymFrozenLake(desc=self.desc, is_slippery=self.is_slippery, success_rate=self.success_rate)
        self._P = inner.P
        self.nrow, self.ncol = len(self.desc), len(self.desc[0])
        self.state = int(np.flatnonzero(np.asarray(inner.initial_state_distrib))[0])

    def _apply(self, action: str) -> StepOutcome:
        transitions = self._P[self.state][ACTIONS.index(action)]
        probs = np.array([t[0] for t in transitions])
        i = int(self.np_random.choice(len(transitions), p=probs / probs.sum()))
        _, new_state, reward, terminated = transitions[i]
        effective = new_state != self.state
        self.state = int(new_state)
        return StepOutcome(
            reward=float(reward), terminated=bool(terminated), effective=effective, success=self._tile() == "G"
        )

    def _render_text(self) -> str:
        r, c = divmod(self.state, self.ncol)
        symbols = [["O" if ch == "H" else "G" if ch == "G" else "_" for ch in row] for row in self.desc]
        symbols[r][c] = {"H": "X", "G": "√"}.get(self._tile(), "P")
        objects = {
            "Player": [(r, c)],
            "Goal": self._cells("G"),
            "Holes": self._cells("H"),
        }
        return grid.render(self.observation_format, symbols, objects)

    # ----------------------------------------------------------------- oracle
    def oracle_action(self) -> str | None:
        """First move of a shortest hole-free path to a goal (intended moves; re-plans every step)."""
        path = self._shortest_path()
        return path[0] if path else None

    def _shortest_path(self) -> list[str] | None:
        start = divmod(self.state, self.ncol)
        if self._tile() in "GH":
            return None
        prev: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            if self.desc[cell[0]][cell[1]] == "G":
                moves = []
                while prev[cell] is not None:
                    cell, move = prev[cell]  # type: ignore[misc]
                    moves.append(move)
                return moves[::-1]
            for a, (dr, dc) in _MOVES.items():
                nxt = (cell[0] + dr, cell[1] + dc)
                if (
                    0 <= nxt[0] < self.nrow
                    and 0 <= nxt[1] < self.ncol
                    and nxt not in prev
                    and self.desc[nxt[0]][nxt[1]] != "H"
                ):
                    prev[nxt] = (cell, ACTIONS[a])
                    queue.append(nxt)
        return None

    # ----------------------------------------------------------------- helpers
    def _tile(self) -> str:
        r, c = divmod(self.state, self.ncol)
        return self.desc[r][c]

    def _cells(self, letter: str) -> list[tuple[int, int]]:
        return [(r, c) for r, row in enumerate(self.desc) for c, ch in enumerate(row) if ch == letter]
