"""Sokoban as a text environment (RAGEN's ``sokoban`` env, without ``gym_sokoban``).

Push every box (``X``) onto a target (``O``). Rewards follow RAGEN: -0.1 per step, +1 for a box
pushed onto a target, -1 for a box pushed off one, +10 when all boxes are placed (the episode
then terminates with success). Bumping into a wall or an unpushable box is a valid action that
changes nothing (``action_is_effective`` False, reward -0.1).

``reset(options={"level": "<symbol rows>"})`` starts from a given level instead of a random one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragen_rllib.envs.base import StepOutcome, TextEnv, require
from ragen_rllib.envs.games import grid
from ragen_rllib.envs.games.sokoban_levels import (
    ACTIONS,
    DEFAULT_NODE_LIMIT,
    LEGEND,
    Level,
    generate_level,
    move,
    parse_level,
    solve,
)

#: Reward of every step (RAGEN's penalty_for_step).
STEP_REWARD = -0.1
#: Reward for pushing a box onto a target.
BOX_ON_TARGET_REWARD = 1.0
#: Reward for pushing a box off a target.
BOX_OFF_TARGET_REWARD = -1.0
#: Bonus when all boxes are on targets.
FINISHED_REWARD = 10.0
#: Largest room side accepted (keeps observations well under the size limit).
MAX_DIM = 30

INSTRUCTION = (
    "You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets. "
    "When you are right next to a box, you can push it by moving in the same direction. "
    "You cannot push a box through a wall, and you cannot pull a box."
)


def _check_dim_room(dim_room: int | Sequence[int]) -> tuple[int, int]:
    """``n`` or ``(rows, cols)`` -> ``(rows, cols)``, validated."""
    allowed = (
        f"an int n (n x n) or a pair (rows, cols), each from 4 to {MAX_DIM} (walls border the room) "
        "and at least one side >= 5 (a 2x2 interior cannot move a box)"
    )
    if isinstance(dim_room, int) and not isinstance(dim_room, bool):
        dims: tuple = (dim_room, dim_room)
    elif isinstance(dim_room, Sequence) and not isinstance(dim_room, str) and len(dim_room) == 2:
        dims = tuple(dim_room)
    else:
        dims = ()
    ok = len(dims) == 2 and all(isinstance(d, int) and not isinstance(d, bool) for d in dims)
    ok = ok and all(4 <= d <= MAX_DIM for d in dims) and max(dims) >= 5
    require(ok, "dim_room", dim_room, allowed)
    return int(dims[0]), int(dims[1])


def _check_int(key: str, value: object, low: int) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    require(ok, key, value, f"an int >= {low}")
    return int(value)  # type: ignore[arg-type]


class SokobanEnv(TextEnv):
    """Sokoban on a random solvable room (reverse play), rendered as text.

    Args:
        dim_room: room size incl. the wall border; an int n means n x n.
        num_boxes: boxes (= targets) in a generated room.
        max_steps: steps before truncation.
        search_depth: reverse-play steps when generating a room.
        observation_format: ``grid`` | ``coord`` | ``grid_coord``.
    """

    action_names = list(ACTIONS)

    def __init__(
        self,
        dim_room: int | Sequence[int] = (6, 6),  # RAGEN: 6x6 room, border walls included
        num_boxes: int = 3,  # RAGEN default; the SimpleSokoban training tag uses 1
        max_steps: int = 100,  # steps before truncation
        search_depth: int = 300,  # reverse-play (pull) steps when generating a room
        observation_format: str = "grid",  # grid | coord | grid_coord
        render_mode: str | None = "ansi",
    ) -> None:
        self.dim_room = _check_dim_room(dim_room)
        self.num_boxes = _check_int("num_boxes", num_boxes, 1)
        interior = (self.dim_room[0] - 2) * (self.dim_room[1] - 2)
        require(
            self.num_boxes + 2 <= interior,
            "num_boxes",
            num_boxes,
            f"at most {interior - 2} for dim_room {self.dim_room} (the {interior} interior cells must "
            "hold the boxes, the player and at least one free cell)",
        )
        self.max_steps = _check_int("max_steps", max_steps, 1)
        self.search_depth = _check_int("search_depth", search_depth, 1)
        self.observation_format = grid.check_observation_format(observation_format)
        super().__init__(render_mode=render_mode)
        self._level: Level | None = None
        # state (player, boxes) -> next action of the cached shortest solution (None: unsolvable)
        self._plan: dict[tuple[int, frozenset[int]], str | None] = {}

    # ----------------------------------------------------------------- public API
    @property
    def instruction(self) -> str:
        return INSTRUCTION + "\n" + grid.legend_text(LEGEND)

    @property
    def level(self) -> Level:
        """The current state (room, boxes, player)."""
        if self._level is None:
            raise RuntimeError("call reset() first")
        return self._level

    def oracle_action(self) -> str | None:
        """Next move of a shortest solution from the current state (``None``: solved or no plan).

        The plan is cached as a state -> action map and recomputed when the state left it.
        """
        level = self.level
        if self._done or level.solved:
            return None
        key = (level.player, level.boxes)
        if key not in self._plan:
            self._plan = self._make_plan(level)
        return self._plan.get(key)

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        if "level" in options:
            self._level = parse_level(options["level"])
        else:
            self._level = generate_level(self.np_random, self.dim_room, self.num_boxes, self.search_depth)
        self._plan = {}

    def _render_text(self) -> str:
        level = self.level
        groups = {
            "Player": [level.player],
            "Boxes": level.boxes,
            "Targets": level.targets,
            "Walls": level.walls,
        }
        objects = {name: [level.rc(c) for c in sorted(group)] for name, group in groups.items()}
        return grid.render(self.observation_format, level.symbols(), objects)

    def _apply(self, action: str) -> StepOutcome:
        level = self.level
        moved = move(level, ACTIONS.index(action))
        if moved is None:
            return StepOutcome(reward=STEP_REWARD, terminated=False, effective=False)
        new_level, box_from, box_to = moved
        self._level = new_level
        reward = STEP_REWARD
        if box_from is not None:
            reward += BOX_ON_TARGET_REWARD * (box_to in level.targets)
            reward += BOX_OFF_TARGET_REWARD * (box_from in level.targets)
        solved = new_level.solved
        if solved:
            reward += FINISHED_REWARD
        return StepOutcome(reward=reward, terminated=solved, effective=True, success=solved)

    # ----------------------------------------------------------------- helpers
    @staticmethod
    def _make_plan(level: Level) -> dict[tuple[int, frozenset[int]], str | None]:
        """Solve from ``level`` and map each state along the solution to its action.

        An unsolvable state (or one past the node limit) maps to ``None`` so it is not re-solved.
        """
        actions = solve(level, node_limit=DEFAULT_NODE_LIMIT)
        if actions is None:
            return {(level.player, level.boxes): None}
        plan: dict[tuple[int, frozenset[int]], str | None] = {}
        for action in actions:
            plan[(level.player, level.boxes)] = action
            moved = move(level, ACTIONS.index(action))
            if moved is None:  # cannot happen: the solver only uses legal moves
                raise RuntimeError(f"solver produced a blocked move {action!r}")
            level = moved[0]
        return plan
