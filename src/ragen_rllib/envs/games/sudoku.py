"""Sudoku as a text environment (RAGEN's ``sudoku`` env, with its +1 / +0.5 / -0.1 / +10 rewards).

A full grid is made from the canonical pattern by random digit, row-in-band, band, column-in-stack
and stack permutations (drawn from ``self.np_random``); then cells are removed in random order
(40 / 50 / 60 % for easy / medium / hard). With ``unique=True`` (default) a cell is only removed
if the puzzle keeps exactly one solution, so "the solution" is well defined; when that stops the
removal early the puzzle keeps a few more clues than the target.

Actions (free-form text, 1-based, case-insensitive, any spacing):

- ``place V at row R col C`` writes V into a non-given cell (overwriting what the player wrote);
- ``clear row R col C`` empties a non-given cell (the way out when wrong placements block each other).

Rewards, per action:

- a placement that is valid by the rules (no row/column/box conflict): +1 if V is the solution's value,
  +0.5 otherwise; a cell pays at most its best tier once per episode (re-placing pays only the increase
  over what that cell already earned), so overwrite/clear loops cannot farm reward;
- a well-formed action that breaks the rules (conflict, given cell, row/column/value out of range):
  -0.1, ``action_is_valid`` True, ``action_is_effective`` False, state unchanged (RAGEN's penalty);
- a clear, or re-placing the same value: 0;
- the step that completes the grid adds +10 and terminates with success (every placement is
  conflict-free, so a full grid is always a correct one, even if it differs from the stored solution).

Unparsable text is an invalid action (reward 0, base-class rule).
``reset(options={"puzzle": rows})`` starts from given rows (0 or "." for empty).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache

import numpy as np

from ragen_rllib.envs.base import StepOutcome, TextEnv, require

#: Fraction of cells removed per difficulty (RAGEN).
DIFFICULTY_REMOVED = {"easy": 0.4, "medium": 0.5, "hard": 0.6}
SIZES = (4, 9, 16)
CORRECT_REWARD = 1.0
VALID_REWARD = 0.5
RULE_BREAK_REWARD = -0.1
SOLVED_REWARD = 10.0
#: Search nodes one uniqueness check may use before that removal is refused.
UNIQUE_CHECK_NODES = 2_000
#: Search nodes all uniqueness checks of one puzzle may use; removal stops there (keeps 16x16 resets fast).
UNIQUE_TOTAL_NODES = 40_000
#: Search nodes the oracle's solver may use on the current grid.
ORACLE_NODES = 20_000

_PLACE = re.compile(r"place\s+(\d{1,4})\s+at\s+row\s+(\d{1,4})\s*,?\s*col(?:umn)?\s+(\d{1,4})\s*\.?")
_CLEAR = re.compile(r"clear\s+row\s+(\d{1,4})\s*,?\s*col(?:umn)?\s+(\d{1,4})\s*\.?")

Grid = list[list[int]]


# --------------------------------------------------------------------------- solver
@cache
def _units(n: int) -> tuple[tuple[int, int, int], ...]:
    """(row, col, box) index of every cell of an n x n grid, row-major."""
    b = math.isqrt(n)
    return tuple((i // n, i % n, (i // n // b) * b + (i % n) // b) for i in range(n * n))


def _search(cells: list[int], n: int, limit: int, max_nodes: int) -> tuple[list[list[int]], bool, int]:
    """DFS with minimum-remaining-values over bitmasks.

    Returns (solutions, up to ``limit``; whether the search finished within ``max_nodes``; nodes used).
    """
    units, full = _units(n), (1 << (n + 1)) - 2
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    for i, v in enumerate(cells):
        if v:
            r, c, b = units[i]
            bit = 1 << v
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return [], True, 0  # the givens already conflict
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
    grid, found, nodes = list(cells), [], 0

    def dfs() -> bool:  # False: budget exhausted
        nonlocal nodes
        nodes += 1
        if nodes > max_nodes:
            return False
        best, best_mask, best_count = -1, 0, n + 1
        for i, v in enumerate(grid):
            if not v:
                r, c, b = units[i]
                mask = full & ~(rows[r] | cols[c] | boxes[b])
                count = mask.bit_count()
                if count < best_count:
                    best, best_mask, best_count = i, mask, count
                    if count <= 1:
                        break
        if best < 0:
            found.append(list(grid))
            return True
        r, c, b = units[best]
        while best_mask:
            bit = best_mask & -best_mask
            best_mask ^= bit
            grid[best] = bit.bit_length() - 1
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            ok = dfs()
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            grid[best] = 0
            if not ok:
                return False
            if len(found) >= limit:
                return True
        return True

    complete = dfs()
    return found, complete, nodes


def solve(grid: Sequence[Sequence[int]], max_nodes: int = 10**7) -> Grid | None:
    """A solution of ``grid`` (0 = empty) by backtracking, or ``None`` if none was found in ``max_nodes``."""
    n = len(grid)
    sols, _, _ = _search([int(v) for row in grid for v in row], n, 1, max_nodes)
    return [sols[0][r * n : (r + 1) * n] for r in range(n)] if sols else None


# --------------------------------------------------------------------------- generator
def full_grid(n: int, rng: np.random.Generator) -> Grid:
    """A random complete grid: the canonical pattern under random symmetry permutations."""
    b = math.isqrt(n)

    def order() -> list[int]:  # groups of b in random order, each shuffled inside
        return [g * b + int(i) for g in rng.permutation(b) for i in rng.permutation(b)]

    rows, cols, digits = order(), order(), [int(d) + 1 for d in rng.permutation(n)]
    return [[digits[(b * (r % b) + r // b + c) % n] for c in cols] for r in rows]


def make_puzzle(solution: Grid, removed: int, unique: bool, rng: np.random.Generator) -> Grid:
    """Remove up to ``removed`` cells in random order.

    With ``unique`` a removal is kept only if the puzzle provably keeps one solution; removal stops
    early when the checks have used :data:`UNIQUE_TOTAL_NODES` (the puzzle then has a few more clues).
    """
    n = len(solution)
    cells = [v for row in solution for v in row]
    left, spent = removed, 0
    for i in rng.permutation(n * n):
        if left == 0 or spent >= UNIQUE_TOTAL_NODES:
            break
        keep, cells[i] = cells[i], 0
        if unique:
            sols, complete, nodes = _search(cells, n, 2, UNIQUE_CHECK_NODES)
            spent += nodes
            if not complete or len(sols) != 1:
                cells[i] = keep
                continue
        left -= 1
    return [cells[r * n : (r + 1) * n] for r in range(n)]


# --------------------------------------------------------------------------- env
class SudokuEnv(TextEnv):
    """Fill the grid so every row, column and box holds each digit once (see the module docstring).

    Args:
        size: side of the grid: 4, 9 or 16 (boxes of 2x2, 3x3, 4x4).
        difficulty: "easy" | "medium" | "hard": 40 / 50 / 60 % of the cells start empty (exact for 4 and
            9; 16 x 16 "hard" stops at about 140-150 of the 154 when uniqueness checks get costly).
        unique: only remove a cell if the puzzle keeps exactly one solution.
        max_steps: actions before truncation (81 fills a 9x9 grid and leaves room for mistakes).
    """

    action_names: list[str] = []

    def __init__(
        self,
        size: int = 4,
        difficulty: str = "easy",
        unique: bool = True,
        max_steps: int = 81,
        render_mode: str | None = "ansi",
    ) -> None:
        require(isinstance(size, int) and size in SIZES, "size", size, f"use one of {SIZES}")
        require(
            isinstance(difficulty, str) and difficulty in DIFFICULTY_REMOVED,
            "difficulty",
            difficulty,
            f"use one of {tuple(DIFFICULTY_REMOVED)}",
        )
        require(isinstance(unique, bool), "unique", unique, "use true or false")
        ok = isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps >= 1
        require(ok, "max_steps", max_steps, "use an integer >= 1")
        self.size, self.difficulty, self.unique = size, difficulty, unique
        self.box = math.isqrt(size)
        self.max_steps = max_steps
        super().__init__(render_mode)
        self.grid: Grid = []
        self.givens: Grid = []
        self.solution: Grid = []
        self._paid: dict[tuple[int, int], float] = {}

    @property
    def instruction(self) -> str:
        n, b = self.size, self.box
        return (
            f"You are solving a {n}x{n} Sudoku. Fill every empty cell (shown as '.') with a number "
            f"from 1 to {n} so that each row, each column and each {b}x{b} box contains every number "
            f"exactly once. Rows and columns are numbered 1 to {n} from the top left. "
            "Answer with one action: 'place V at row R col C' (e.g. 'place 3 at row 1 col 2') writes V "
            "into a cell, and 'clear row R col C' empties a cell you filled; the starting numbers cannot "
            "be changed. You get +1 for a correct number, +0.5 for a number that breaks no rule but is "
            "not the solution's, -0.1 for a move that breaks a rule, and +10 when the grid is complete."
        )

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        if "puzzle" in options:
            self.givens, self.solution = self._load(options["puzzle"])
        else:
            self.solution = full_grid(self.size, self.np_random)
            removed = math.floor(DIFFICULTY_REMOVED[self.difficulty] * self.size**2 + 0.5)
            self.givens = make_puzzle(self.solution, removed, self.unique, self.np_random)
        self.grid = [list(row) for row in self.givens]
        self._paid = {}

    def _load(self, rows: object) -> tuple[Grid, Grid]:
        n = self.size
        try:
            grid = [[0 if v in (".", "0") else int(v) for v in self._cells(row)] for row in rows]  # type: ignore
        except (TypeError, ValueError):
            grid = []
        ok = len(grid) == n and all(len(row) == n and all(0 <= v <= n for v in row) for row in grid)
        solution = solve(grid) if ok else None
        require(
            solution is not None,
            "options.puzzle",
            rows,
            f"use {n} rows of {n} values 0-{n} that can be solved",
        )
        return grid, solution  # type: ignore[return-value]

    @staticmethod
    def _cells(row: object) -> list:
        """A row given as a string ("1.3.", or space-separated for 16x16) or a sequence of values."""
        if isinstance(row, str):
            return row.split() if " " in row.strip() else list(row.strip())
        return list(row)  # type: ignore[call-overload]

    def _parse_action(self, text: str) -> tuple[str, int, int, int] | None:
        text = text.lower()
        if m := _PLACE.fullmatch(text):
            return "place", int(m[2]) - 1, int(m[3]) - 1, int(m[1])
        if m := _CLEAR.fullmatch(text):
            return "clear", int(m[1]) - 1, int(m[2]) - 1, 0
        return None

    def _apply(self, action: tuple[str, int, int, int]) -> StepOutcome:
        kind, r, c, v = action
        n = self.size
        in_range = 0 <= r < n and 0 <= c < n and (kind == "clear" or 1 <= v <= n)
        if not in_range or self.givens[r][c] or (kind == "place" and self._conflicts(r, c, v)):
            return StepOutcome(reward=RULE_BREAK_REWARD, terminated=False, effective=False)
        effective = self.grid[r][c] != v
        self.grid[r][c] = v
        reward = 0.0
        if kind == "place":
            tier = CORRECT_REWARD if v == self.solution[r][c] else VALID_REWARD
            paid = self._paid.get((r, c), 0.0)
            reward, self._paid[(r, c)] = max(0.0, tier - paid), max(tier, paid)
        solved = all(all(row) for row in self.grid)
        return StepOutcome(
            reward=reward + (SOLVED_REWARD if solved else 0.0),
            terminated=solved,
            effective=effective,
            success=solved,
        )

    def _render_text(self) -> str:
        n, b = self.size, self.box
        width = len(str(n))
        lines = []
        for r, row in enumerate(self.grid):
            if r and r % b == 0:
                lines.append("-+-".join("-" * ((width + 1) * b - 1) for _ in range(b)))
            boxes = [" ".join(str(v or ".").rjust(width) for v in row[s : s + b]) for s in range(0, n, b)]
            lines.append(" | ".join(boxes))
        return "\n".join(lines)

    # ----------------------------------------------------------------- oracle
    def oracle_action(self) -> str | None:
        """Next action of a solver for the CURRENT grid.

        Fills the first empty cell (row-major) with its value in a solution of the current grid (the
        stored solution while every written cell agrees with it, else a backtracking search). When the
        current grid has no solution, it rewrites a wrong cell to the stored solution's value, or clears
        it when that would conflict with another wrong cell.
        """
        if self._done:
            return None
        wrong = [
            (r, c)
            for r in range(self.size)
            for c in range(self.size)
            if self.grid[r][c] and self.grid[r][c] != self.solution[r][c]
        ]
        target = self.solution if not wrong else solve(self.grid, ORACLE_NODES)
        empty = next(
            ((r, c) for r in range(self.size) for c in range(self.size) if not self.grid[r][c]), None
        )
        if target is not None and empty is not None:
            r, c = empty
            return f"place {target[r][c]} at row {r + 1} col {c + 1}"
        for r, c in wrong:
            if not self._conflicts(r, c, self.solution[r][c]):
                return f"place {self.solution[r][c]} at row {r + 1} col {c + 1}"
        r, c = wrong[0]
        return f"clear row {r + 1} col {c + 1}"

    # ----------------------------------------------------------------- helpers
    def _conflicts(self, r: int, c: int, v: int) -> bool:
        """``v`` at (r, c) repeats a value of another cell in its row, column or box."""
        b = self.box
        br, bc = r - r % b, c - c % b
        peers = {(r, j) for j in range(self.size)} | {(i, c) for i in range(self.size)}
        peers |= {(i, j) for i in range(br, br + b) for j in range(bc, bc + b)}
        peers.discard((r, c))
        return any(self.grid[i][j] == v for i, j in peers)
