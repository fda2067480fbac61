"""2048 as a text environment (RAGEN's ``game_2048`` env with its log reward).

Rules: a move slides every tile as far as it goes in that direction; two equal tiles that meet
merge into their sum, and a tile made by a merge does not merge again in the same move (so
``[2, 2, 2, 2]`` moved Left gives ``[4, 4, 0, 0]``). After every EFFECTIVE move (one that changes
the board) a new tile appears on a random empty cell: 2 with probability ``two_prob``, else 4.
The game starts with two such tiles.

Reward of a move: ``sum(0.1 * log2(m + 1) for m in merged values of the move)``, e.g. one 2+2
merge gives ``0.1 * log2(5) = 0.2322``; a move without merges gives 0. (RAGEN applies
``0.1 * log2(total + 1)`` to the move's summed merge values; the per-merge sum used here is additive
over merges and equal for a move with one merge.) A move that changes nothing is valid but not
effective (reward 0, no new tile). The episode terminates with success when a tile reaches
``target``, and without success when no move can change the board.

``reset(options={"board": rows})`` starts from a given board (no tiles are added).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragen_rllib.envs.base import StepOutcome, TextEnv, require

ACTIONS = ["Up", "Right", "Down", "Left"]
#: Reward scale of the log reward.
LOG_REWARD_SCALE = 0.1
#: Largest board side accepted.
MAX_SIZE = 10

Board = list[list[int]]


def merge_reward(value: int) -> float:
    """Reward of one merge producing ``value``."""
    return LOG_REWARD_SCALE * math.log2(value + 1)


def slide_left(line: Sequence[int]) -> tuple[list[int], list[int]]:
    """Slide and merge one line towards index 0. Returns (new line, values made by merges)."""
    tiles = [v for v in line if v]
    out, merges, i = [], [], 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(tiles[i] * 2)
            merges.append(tiles[i] * 2)
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(line) - len(out)), merges


def move(board: Board, action: str) -> tuple[Board, list[int]]:
    """Board after ``action`` (no new tile) and the values made by merges."""
    n = len(board)
    if action in ("Left", "Right"):
        lines = [list(row) for row in board]
    else:
        lines = [[board[r][c] for r in range(n)] for c in range(n)]
    reverse = action in ("Right", "Down")
    merges: list[int] = []
    new_lines = []
    for line in lines:
        slid, m = slide_left(line[::-1] if reverse else line)
        merges += m
        new_lines.append(slid[::-1] if reverse else slid)
    if action in ("Left", "Right"):
        return new_lines, merges
    return [[new_lines[c][r] for c in range(n)] for r in range(n)], merges


def can_move(board: Board) -> bool:
    """Some move changes the board."""
    return any(move(board, a)[0] != board for a in ACTIONS)


class Game2048Env(TextEnv):
    """Slide and merge tiles to build a tile of value ``target`` (see the module docstring).

    Args:
        size: side of the square board.
        target: tile value that ends the episode with success (a power of two >= 4).
        two_prob: probability that a new tile is a 2 (else a 4).
        max_steps: moves before truncation (reaching 2048 takes roughly 1000 moves).
    """

    action_names = ACTIONS

    def __init__(
        self,
        size: int = 4,
        target: int = 2048,
        two_prob: float = 0.9,
        max_steps: int = 1000,
        render_mode: str | None = "ansi",
    ) -> None:
        def is_int(v: object) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        require(is_int(size) and 2 <= size <= MAX_SIZE, "size", size, f"use an integer from 2 to {MAX_SIZE}")
        ok = is_int(target) and target >= 4 and target & (target - 1) == 0
        require(ok, "target", target, "use a power of two >= 4")
        ok = isinstance(two_prob, (int, float)) and not isinstance(two_prob, bool) and 0 <= two_prob <= 1
        require(ok, "two_prob", two_prob, "use a probability in [0, 1]")
        require(is_int(max_steps) and max_steps >= 1, "max_steps", max_steps, "use an integer >= 1")
        self.size, self.target, self.two_prob = size, target, float(two_prob)
        self.max_steps = max_steps
        super().__init__(render_mode)
        self.board: Board = []
        self.score = 0

    @property
    def instruction(self) -> str:
        return (
            f"You are playing 2048 on a {self.size}x{self.size} board ('.' is an empty cell). Each move "
            "slides all tiles Up, Right, Down or Left; two equal tiles that collide merge into one tile "
            "with their sum (each tile merges at most once per move). After every move that changes the "
            f"board a new 2 or 4 appears on an empty cell. Merges give reward. Reach a {self.target} tile "
            "to win; the game ends when no move can change the board."
        )

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        self.score = 0
        if "board" in options:
            self.board = self._load(options["board"])
            return
        self.board = [[0] * self.size for _ in range(self.size)]
        self._spawn()
        self._spawn()

    def _load(self, rows: object) -> Board:
        n = self.size
        try:
            board = [[int(v) for v in row] for row in rows]  # type: ignore[union-attr]
        except (TypeError, ValueError):
            board = []
        ok = len(board) == n and all(len(row) == n for row in board)
        ok = ok and all(v == 0 or (v >= 2 and v & (v - 1) == 0) for row in board for v in row)
        require(ok, "options.board", rows, f"use {n} rows of {n} tiles, each 0 or a power of two >= 2")
        return board

    def _apply(self, action: str) -> StepOutcome:
        new, merges = move(self.board, action)
        if new == self.board:
            return StepOutcome(reward=0.0, terminated=False, effective=False)
        self.board = new
        self.score += sum(merges)
        self._spawn()
        won = self.max_tile() >= self.target
        return StepOutcome(
            reward=sum(merge_reward(m) for m in merges),
            terminated=won or not can_move(self.board),
            effective=True,
            success=won,
        )

    def _render_text(self) -> str:
        width = max(len(str(v)) for row in self.board for v in row)
        rows = [" ".join((str(v) if v else ".").rjust(width) for v in row) for row in self.board]
        return "\n".join(rows) + f"\nScore: {self.score}"

    # ----------------------------------------------------------------- oracle
    def oracle_action(self) -> str | None:
        """Greedy one-step lookahead (a heuristic, not optimal play).

        Among the moves that change the board, the one leaving the most empty cells (before the new
        tile), ties broken by the larger merge reward, then by the order Up, Right, Down, Left.
        ``None`` when no move changes the board.
        """
        best, best_key = None, None
        for a in ACTIONS:
            new, merges = move(self.board, a)
            if new == self.board:
                continue
            key = (sum(v == 0 for row in new for v in row), sum(merge_reward(m) for m in merges))
            if best_key is None or key > best_key:
                best, best_key = a, key
        return best

    # ----------------------------------------------------------------- helpers
    def max_tile(self) -> int:
        """Largest tile on the board."""
        return max(v for row in self.board for v in row)

    def _spawn(self) -> None:
        empty = [(r, c) for r in range(self.size) for c in range(self.size) if not self.board[r][c]]
        if not empty:
            return
        r, c = empty[int(self.np_random.integers(len(empty)))]
        self.board[r][c] = 2 if self.np_random.random() < self.two_prob else 4
