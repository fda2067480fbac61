"""The 2x2 Rubik's cube (pocket cube) as a text environment (RAGEN's ``rubikscube`` env).

The cube is 24 stickers; each of the 12 quarter turns (U U' D D' L L' R R' F F' B B') is a sticker
permutation computed from 3-D geometry: ``X`` turns face X clockwise as seen looking at that face,
``X'`` counterclockwise. A reset applies ``scramble_depth`` random quarter turns to the solved cube
(never a turn right after its inverse, and redrawn if the result is already solved). The cube counts
as solved when every face shows a single colour, in any orientation of the whole cube. Reward 1 when
solved (terminated, success), else 0; every turn changes the state, so every valid action is effective.

``reset(options={"scramble": ["R", "U'"]})`` applies the given turns instead of a random scramble.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import cache
from operator import itemgetter

from ragen_rllib.envs.base import StepOutcome, TextEnv, require

Vec = tuple[int, int, int]
#: Faces in sticker order: outward normal, then the net's right and down directions (x right, y up, z front).
FACES: dict[str, tuple[Vec, Vec, Vec]] = {
    "U": ((0, 1, 0), (1, 0, 0), (0, 0, 1)),
    "L": ((-1, 0, 0), (0, 0, 1), (0, -1, 0)),
    "F": ((0, 0, 1), (1, 0, 0), (0, -1, 0)),
    "R": ((1, 0, 0), (0, 0, -1), (0, -1, 0)),
    "B": ((0, 0, -1), (-1, 0, 0), (0, -1, 0)),
    "D": ((0, -1, 0), (1, 0, 0), (0, 0, -1)),
}
FACE_NAMES = list(FACES)
#: Colour letter of each face of the solved cube.
COLOURS = {"U": "W", "L": "O", "F": "G", "R": "R", "B": "B", "D": "Y"}
COLOUR_NAMES = {"W": "white", "Y": "yellow", "R": "red", "O": "orange", "G": "green", "B": "blue"}
ACTIONS = [f"{f}{p}" for f in "UDLRFB" for p in ("", "'")]
SOLVED: tuple[int, ...] = tuple(i // 4 for i in range(24))  # sticker i shows colour of face i // 4
#: Opposite face index (U-D, L-R, F-B).
OPPOSITE = {0: 5, 5: 0, 1: 3, 3: 1, 2: 4, 4: 2}
#: Turns the oracle searches with: they keep the D-B-L corner fixed, and D/L/B turns equal them up to a
#: whole-cube rotation, so this loses no optimality.
SEARCH_MOVES = ["U", "U'", "R", "R'", "F", "F'"]
#: Depth of the oracle's cached distance table around the solved cube (about 45k states).
TABLE_DEPTH = 7

State = tuple[int, ...]


def _add(*vs: Vec) -> Vec:
    return tuple(sum(c) for c in zip(*vs, strict=True))  # type: ignore[return-value]


def _scale(k: int, v: Vec) -> Vec:
    return (k * v[0], k * v[1], k * v[2])


def _dot(a: Vec, b: Vec) -> int:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _clockwise(n: Vec, v: Vec) -> Vec:
    """``v`` rotated by -90 degrees about the unit axis ``n`` (clockwise seen from the tip of ``n``)."""
    cross = (n[1] * v[2] - n[2] * v[1], n[2] * v[0] - n[0] * v[2], n[0] * v[1] - n[1] * v[0])
    return _add(_scale(-1, cross), _scale(_dot(n, v), n))


def _stickers() -> list[tuple[Vec, Vec]]:
    """(cubie position, outward normal) of each sticker, index = face * 4 + row * 2 + col."""
    out = []
    for normal, right, down in FACES.values():
        for row in range(2):
            for col in range(2):
                out.append((_add(normal, _scale(2 * col - 1, right), _scale(2 * row - 1, down)), normal))
    return out


def _turn_permutation(face: str) -> tuple[int, ...]:
    """``p`` with ``new_state[i] = state[p[i]]`` for a clockwise quarter turn of ``face``."""
    stickers = _stickers()
    index = {s: i for i, s in enumerate(stickers)}
    n = FACES[face][0]
    perm = list(range(24))
    for src, (pos, normal) in enumerate(stickers):
        if _dot(pos, n) == 1:
            perm[index[(_clockwise(n, pos), _clockwise(n, normal))]] = src
    return tuple(perm)


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _build_moves() -> dict[str, tuple[int, ...]]:
    moves = {}
    for face in "UDLRFB":
        moves[face] = _turn_permutation(face)
        moves[face + "'"] = _inverse(moves[face])
    return moves


#: Sticker permutation of every action.
MOVES: dict[str, tuple[int, ...]] = _build_moves()
_GETTERS = {name: itemgetter(*perm) for name, perm in MOVES.items()}
#: Sticker indices of the D-B-L corner on the D, B and L faces (the corner the search moves keep fixed).
_DBL = tuple(
    next(i for i, (pos, n) in enumerate(_stickers()) if pos == (-1, -1, -1) and n == FACES[f][0])
    for f in "DBL"
)


def apply_move(state: State, name: str) -> State:
    """The state after the quarter turn ``name``."""
    return _GETTERS[name](state)


def is_solved(state: State) -> bool:
    """Every face shows one colour."""
    return all(state[f] == state[f + 1] == state[f + 2] == state[f + 3] for f in range(0, 24, 4))


def _inverse_name(name: str) -> str:
    return name[:-1] if name.endswith("'") else name + "'"


# --------------------------------------------------------------------------- oracle search
def _normalise(state: State) -> State:
    """Recolour so the D-B-L corner shows its solved colours (a whole-cube rotation, in colour terms)."""
    d, b, l_ = (state[i] for i in _DBL)
    recolour = {d: 5, b: 4, l_: 1, OPPOSITE[d]: 0, OPPOSITE[b]: 2, OPPOSITE[l_]: 3}
    return tuple(recolour[c] for c in state)


@cache
def distance_table() -> dict[State, int]:
    """Quarter-turn distance to the solved cube of every state within :data:`TABLE_DEPTH` (cached)."""
    table = {SOLVED: 0}
    frontier = [SOLVED]
    for depth in range(1, TABLE_DEPTH + 1):
        nxt = []
        for state in frontier:
            for name in SEARCH_MOVES:
                s = _GETTERS[name](state)
                if s not in table:
                    table[s] = depth
                    nxt.append(s)
        frontier = nxt
    return table


def solve_first_move(state: State) -> str | None:
    """First turn of a shortest solution (quarter-turn metric), ``None`` when already solved."""
    table = distance_table()
    start = _normalise(state)
    d = table.get(start)
    if d == 0:
        return None
    if d is not None:
        return next(m for m in SEARCH_MOVES if table.get(_GETTERS[m](start)) == d - 1)
    # Beyond the table: BFS until the first level touching it (all hits there are optimal).
    first: dict[State, str] = {start: ""}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        for m in SEARCH_MOVES:
            t = _GETTERS[m](s)
            if t not in first:
                first[t] = first[s] or m
                if t in table:
                    return first[t]
                queue.append(t)
    raise ValueError("state is not a legal cube")  # unreachable for states made by turns


def solution(state: State) -> list[str]:
    """A shortest sequence of quarter turns solving ``state``."""
    moves = []
    while (m := solve_first_move(state)) is not None:
        moves.append(m)
        state = apply_move(state, m)
    return moves


# --------------------------------------------------------------------------- env
def _check_depth(value: object) -> tuple[int, int]:
    allowed = "use an int d >= 0 or a pair (lo, hi) with 0 <= lo <= hi (a random depth in [lo, hi])"
    if isinstance(value, int) and not isinstance(value, bool):
        pair: tuple = (value, value)
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        pair = tuple(value)
    else:
        pair = ()
    ok = len(pair) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
    require(ok and 0 <= pair[0] <= pair[1] <= 1000, "scramble_depth", value, allowed)
    return int(pair[0]), int(pair[1])


class RubiksCube2x2Env(TextEnv):
    """Solve a scrambled 2x2 Rubik's cube with quarter turns (see the module docstring).

    Args:
        scramble_depth: random quarter turns applied at reset: an int, or (lo, hi) for a random
            depth in [lo, hi].
        max_steps: turns before truncation (the default scramble needs at most 5).
    """

    action_names = ACTIONS

    def __init__(
        self,
        scramble_depth: int | Sequence[int] = (1, 5),
        max_steps: int = 10,
        render_mode: str | None = "ansi",
    ) -> None:
        self.depth_range = _check_depth(scramble_depth)
        ok = isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps >= 1
        require(ok, "max_steps", max_steps, "use an integer >= 1")
        self.max_steps = max_steps
        super().__init__(render_mode)
        self.state: State = SOLVED
        self.scramble: list[str] = []

    @property
    def instruction(self) -> str:
        legend = ", ".join(f"{k}: {v}" for k, v in COLOUR_NAMES.items())
        return (
            "You are solving a 2x2 Rubik's cube. The state is the unfolded cube: the Up face on top, "
            "then the Left, Front, Right and Back faces in a row, and the Down face at the bottom; each "
            f"letter is the colour of one sticker ({legend}). A move turns one face by a quarter turn: "
            "U, D, L, R, F, B turn the Up, Down, Left, Right, Front or Back face clockwise as seen looking "
            "at that face, and a prime (U', D', L', R', F', B') turns it counterclockwise. The cube is "
            "solved when every face shows a single colour; you get reward 1 when it is solved."
        )

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        if "scramble" in options:
            moves = options["scramble"]
            ok = isinstance(moves, Sequence) and not isinstance(moves, str) and all(m in MOVES for m in moves)
            require(ok, "options.scramble", moves, f"use a list of turns from {ACTIONS}")
            self.scramble = list(moves)
        else:
            self.scramble = self._random_scramble()
        self.state = SOLVED
        for m in self.scramble:
            self.state = apply_move(self.state, m)

    def _random_scramble(self) -> list[str]:
        lo, hi = self.depth_range
        depth = int(self.np_random.integers(lo, hi + 1))
        while True:
            moves: list[str] = []
            for _ in range(depth):
                choices = [a for a in ACTIONS if not moves or a != _inverse_name(moves[-1])]
                moves.append(choices[int(self.np_random.integers(len(choices)))])
            state = SOLVED
            for m in moves:
                state = apply_move(state, m)
            if depth == 0 or not is_solved(state):
                return moves

    def _parse_action(self, text: str) -> str | None:
        return super()._parse_action(text.replace("\u2019", "'").replace("\u2032", "'"))

    def _apply(self, action: str) -> StepOutcome:
        self.state = apply_move(self.state, action)
        solved = is_solved(self.state)
        return StepOutcome(reward=1.0 if solved else 0.0, terminated=solved, effective=True, success=solved)

    def _render_text(self) -> str:
        letters = [COLOURS[FACE_NAMES[c]] for c in self.state]

        def row(face: str, r: int) -> str:
            i = FACE_NAMES.index(face) * 4 + r * 2
            return f"{letters[i]} {letters[i + 1]}"

        pad = " " * 5
        top = [pad + row("U", r) for r in range(2)]
        middle = ["  ".join(row(f, r) for f in "LFRB") for r in range(2)]
        bottom = [pad + row("D", r) for r in range(2)]
        return "\n".join(top + middle + bottom)

    # ----------------------------------------------------------------- oracle
    def oracle_action(self) -> str | None:
        """First turn of a shortest solution from the current state (``None`` when solved).

        Exact search: a cached table of all states within 7 quarter turns of solved, plus a
        breadth-first search from the current state until it meets the table (2x2 needs at most 14).
        """
        return solve_first_move(self.state)
