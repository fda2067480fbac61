"""Sokoban levels: the text format, the push rule, generation by reverse play, and a BFS solver.

Cells are integer indices ``row * width + col``. Every level has walls all around its border,
so a move from an interior cell never leaves the grid and no bounds checks are needed.

Generation (no ``gym_sokoban``): carve a random connected room, put every box on a target and
the player on a free floor cell (a solved state), then play *in reverse*: the player walks at
random and pulls the box behind it. Every pull undone is a push, so each state visited is
solvable by construction. Of a few such walks, the level is the visited state with the most
boxes off targets (ties: the largest total box displacement); the player may have walked on
from it while the boxes stayed put.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

#: Action names in RAGEN's order.
ACTIONS = ("Up", "Down", "Left", "Right")
#: (row, column) step of each action.
DIRECTIONS = ((-1, 0), (1, 0), (0, -1), (0, 1))

WALL, EMPTY, TARGET, BOX_ON_TARGET, BOX, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "√", "X", "P", "S"
#: RAGEN's symbol legend, in its order.
LEGEND = {
    WALL: "wall",
    EMPTY: "empty",
    TARGET: "target",
    BOX_ON_TARGET: "box on target",
    BOX: "box",
    PLAYER: "player",
    PLAYER_ON_TARGET: "player on target",
}

#: Probability that the reverse-play player pulls the box behind it when it can.
PULL_PROB = 0.75
#: Reverse-play walks from each solved room; the best visited state over all walks is kept.
WALKS_PER_ROOM = 4
#: Topology attempts before falling back to a fully open interior.
RANDOM_TOPOLOGY_ATTEMPTS = 50
#: Total generation attempts before giving up.
MAX_GENERATION_ATTEMPTS = 500
#: Default cap on states the solver expands.
DEFAULT_NODE_LIMIT = 200_000

# Carving patterns of the room topology walk, as (row, column) offsets from the walker.
_MASKS = (
    ((0, 0),),
    ((0, 0), (0, 1)),
    ((0, 0), (1, 0)),
    ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)),
    ((0, 0), (0, 1), (1, 0), (1, 1)),
)
# Probability that the topology walker turns at a step.
_P_TURN = 0.35


@dataclass(frozen=True)
class Level:
    """One Sokoban state: static room (walls, targets) plus the movable player and boxes."""

    height: int
    width: int
    walls: frozenset[int]
    targets: frozenset[int]
    boxes: frozenset[int]
    player: int

    def deltas(self) -> tuple[int, int, int, int]:
        """Cell-index step of each action (Up, Down, Left, Right)."""
        return (-self.width, self.width, -1, 1)

    def rc(self, cell: int) -> tuple[int, int]:
        """(row, column) of a cell index."""
        return divmod(cell, self.width)

    @property
    def solved(self) -> bool:
        """All boxes are on targets."""
        return self.boxes == self.targets

    def symbols(self) -> list[list[str]]:
        """Rows of one-character symbols (see :data:`LEGEND`)."""
        rows = []
        for r in range(self.height):
            row = []
            for c in range(self.width):
                cell = r * self.width + c
                on_target = cell in self.targets
                if cell in self.walls:
                    row.append(WALL)
                elif cell == self.player:
                    row.append(PLAYER_ON_TARGET if on_target else PLAYER)
                elif cell in self.boxes:
                    row.append(BOX_ON_TARGET if on_target else BOX)
                else:
                    row.append(TARGET if on_target else EMPTY)
            rows.append(row)
        return rows

    def to_text(self) -> str:
        """The level in the symbol text format :func:`parse_level` reads."""
        return "\n".join("".join(row) for row in self.symbols())


def parse_level(text: str) -> Level:
    """Read a level written with :data:`LEGEND` symbols, one row per line.

    Rules: rectangular, walls all around the border, exactly one player, as many boxes as
    targets (at least one). Raises ``ValueError`` otherwise.
    """
    if not isinstance(text, str):
        raise ValueError(f"a level must be a string of symbol rows, got {type(text).__name__}")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 3 or len({len(line) for line in lines}) != 1 or len(lines[0]) < 3:
        raise ValueError("a level must be a rectangle of at least 3x3 symbols")
    height, width = len(lines), len(lines[0])
    walls, targets, boxes, players = set(), set(), set(), []
    for r, line in enumerate(lines):
        for c, ch in enumerate(line):
            cell = r * width + c
            if ch not in LEGEND:
                raise ValueError(f"unknown symbol {ch!r} at ({r}, {c}); allowed: {''.join(LEGEND)}")
            border = r in (0, height - 1) or c in (0, width - 1)
            if border and ch != WALL:
                raise ValueError(f"the border must be walls, found {ch!r} at ({r}, {c})")
            if ch == WALL:
                walls.add(cell)
            if ch in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
                targets.add(cell)
            if ch in (BOX, BOX_ON_TARGET):
                boxes.add(cell)
            if ch in (PLAYER, PLAYER_ON_TARGET):
                players.append(cell)
    if len(players) != 1:
        raise ValueError(f"a level needs exactly one player (P or S), found {len(players)}")
    if not boxes or len(boxes) != len(targets):
        raise ValueError(
            f"a level needs as many boxes as targets (>= 1): {len(boxes)} boxes, {len(targets)} targets"
        )
    return Level(height, width, frozenset(walls), frozenset(targets), frozenset(boxes), players[0])


def move(level: Level, action: int) -> tuple[Level, int | None, int | None] | None:
    """Apply action ``action`` (index into :data:`ACTIONS`).

    Returns ``(new_level, box_from, box_to)`` (the box cells are ``None`` without a push), or
    ``None`` when the move is blocked by a wall or by a box that cannot be pushed.
    """
    d = level.deltas()[action]
    nxt = level.player + d
    if nxt in level.walls:
        return None
    if nxt not in level.boxes:
        return Level(level.height, level.width, level.walls, level.targets, level.boxes, nxt), None, None
    beyond = nxt + d
    if beyond in level.walls or beyond in level.boxes:
        return None
    boxes = (level.boxes - {nxt}) | {beyond}
    return Level(level.height, level.width, level.walls, level.targets, boxes, nxt), nxt, beyond


# --------------------------------------------------------------------------- generation
def _room_topology(rng: np.random.Generator, height: int, width: int, open_room: bool) -> list[int]:
    """Floor cells of a connected room (random walk carving ``_MASKS``; or the whole interior)."""
    if open_room:
        return [r * width + c for r in range(1, height - 1) for c in range(1, width - 1)]
    interior = (height - 2) * (width - 2)
    steps = int(1.5 * interior) + 1
    turns = (rng.random(steps) < _P_TURN).tolist()
    new_dirs = rng.integers(0, 4, steps).tolist()
    masks = rng.integers(0, len(_MASKS), steps).tolist()
    r = int(rng.integers(1, height - 1))
    c = int(rng.integers(1, width - 1))
    dr, dc = DIRECTIONS[int(rng.integers(0, 4))]
    floor: set[int] = set()
    for t in range(steps):
        for orr, occ in _MASKS[masks[t]]:
            rr, cc = r + orr, c + occ
            if 0 < rr < height - 1 and 0 < cc < width - 1:
                floor.add(rr * width + cc)
        if turns[t]:
            dr, dc = DIRECTIONS[new_dirs[t]]
        r = min(max(r + dr, 1), height - 2)
        c = min(max(c + dc, 1), width - 2)
    return sorted(floor)


def _reverse_play(
    rng: np.random.Generator,
    width: int,
    is_floor: bytearray,
    targets: list[int],
    player: int,
    search_depth: int,
) -> tuple[int, int, tuple[int, ...]]:
    """One random reverse-play walk from the solved state.

    Returns ``(score, player, boxes)`` of the best state it visited.

    Score: boxes off targets first, then total box displacement (0: no box left its target).
    While the boxes stay as in the best state, the player keeps walking, so the level does not
    always start with the player next to the box it must push.
    """
    size = len(is_floor)
    target_set = frozenset(targets)
    box_at = [-1] * size  # cell -> box id
    boxes = list(targets)  # box id -> cell
    for b, cell in enumerate(boxes):
        box_at[cell] = b
    origin = [divmod(cell, width) for cell in targets]
    disp = [0] * len(targets)
    deltas = (-width, width, -1, 1)
    dirs = rng.integers(0, 4, search_depth).tolist()
    pulls = (rng.random(search_depth) < PULL_PROB).tolist()
    off, total = 0, 0
    best_score, best_player, best_boxes, at_best = 0, player, tuple(targets), False
    for t in range(search_depth):
        k = dirs[t]
        for j in range(4):
            d = deltas[(k + j) & 3]
            nxt = player + d
            if is_floor[nxt] and box_at[nxt] < 0:
                break
        else:
            break  # boxed in: the player cannot move at all
        b = box_at[player - d]
        if b >= 0 and pulls[t]:
            old = boxes[b]
            box_at[old], box_at[player], boxes[b] = -1, b, player
            off += (old in target_set) - (player in target_set)
            r, c = divmod(player, width)
            r0, c0 = origin[b]
            new_disp = abs(r - r0) + abs(c - c0)
            total += new_disp - disp[b]
            disp[b] = new_disp
            score = off * 4 * size + total
            at_best = off > 0 and score > best_score
            if at_best:
                best_score, best_boxes = score, tuple(boxes)
        player = nxt
        if at_best:
            best_player = player
    return best_score, best_player, best_boxes


def generate_level(
    rng: np.random.Generator, dim_room: tuple[int, int], num_boxes: int, search_depth: int
) -> Level:
    """A random solvable level of ``dim_room`` (rows, columns, border included) with ``num_boxes`` boxes.

    Retries with a new topology whenever no box moved off its target; after
    :data:`RANDOM_TOPOLOGY_ATTEMPTS` failures it uses the fully open interior. Raises
    ``RuntimeError`` if :data:`MAX_GENERATION_ATTEMPTS` attempts all fail.
    """
    height, width = dim_room
    size = height * width
    for attempt in range(MAX_GENERATION_ATTEMPTS):
        floor = _room_topology(rng, height, width, open_room=attempt >= RANDOM_TOPOLOGY_ATTEMPTS)
        if len(floor) < num_boxes + 2:
            continue
        is_floor = bytearray(size)
        for cell in floor:
            is_floor[cell] = 1
        picks = rng.choice(len(floor), size=num_boxes + 1, replace=False).tolist()
        targets = [floor[i] for i in picks[1:]]
        player = floor[picks[0]]
        walks = [
            _reverse_play(rng, width, is_floor, targets, player, search_depth) for _ in range(WALKS_PER_ROOM)
        ]
        score, player, boxes = max(walks, key=lambda walk: walk[0])
        if score > 0:
            walls = frozenset(cell for cell in range(size) if not is_floor[cell])
            return Level(height, width, walls, frozenset(targets), frozenset(boxes), player)
    raise RuntimeError(
        f"could not generate a {height}x{width} Sokoban level with {num_boxes} boxes "
        f"in {MAX_GENERATION_ATTEMPTS} attempts (search_depth={search_depth})"
    )


# --------------------------------------------------------------------------- solver
def _live_cells(level: Level) -> bytearray:
    """Cells from which a lone box can still be pushed onto some target (others are dead)."""
    live = bytearray(level.height * level.width)
    queue = deque(level.targets)
    for cell in level.targets:
        live[cell] = 1
    deltas = level.deltas()
    while queue:
        cell = queue.popleft()
        for d in deltas:  # the box came from cell - d, pushed by a player at cell - 2d
            src = cell - d
            if not live[src] and src not in level.walls and (src - d) not in level.walls:
                live[src] = 1
                queue.append(src)
    return live


def solve(level: Level, node_limit: int = DEFAULT_NODE_LIMIT) -> list[str] | None:
    """A shortest action list (in player moves) that solves ``level``.

    Breadth-first search over (player, boxes) states, never pushing a box onto a dead cell.
    Returns ``[]`` for a solved level and ``None`` if unsolvable or more than ``node_limit``
    states would be expanded.
    """
    size = level.height * level.width
    wall = bytearray(size)
    for cell in level.walls:
        wall[cell] = 1
    live = _live_cells(level)
    deltas = level.deltas()
    goal = sum(1 << cell for cell in level.targets)
    start_mask = sum(1 << cell for cell in level.boxes)
    if start_mask == goal:
        return []
    start = start_mask * size + level.player
    parent: dict[int, tuple[int, int]] = {start: (-1, -1)}
    queue = deque([start])
    while queue:
        key = queue.popleft()
        mask, player = divmod(key, size)
        for a in range(4):
            d = deltas[a]
            nxt = player + d
            if wall[nxt]:
                continue
            new_mask = mask
            if mask >> nxt & 1:
                beyond = nxt + d
                if wall[beyond] or not live[beyond] or mask >> beyond & 1:
                    continue
                new_mask = mask ^ (1 << nxt) ^ (1 << beyond)
            new_key = new_mask * size + nxt
            if new_key in parent:
                continue
            parent[new_key] = (key, a)
            if new_mask == goal:
                return _path(parent, new_key)
            if len(parent) > node_limit:
                return None
            queue.append(new_key)
    return None


def _path(parent: dict[int, tuple[int, int]], key: int) -> list[str]:
    actions = []
    while True:
        prev, a = parent[key]
        if prev < 0:
            return actions[::-1]
        actions.append(ACTIONS[a])
        key = prev
