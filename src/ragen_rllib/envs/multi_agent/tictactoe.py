"""Tic-tac-toe for two LLM agents (``x`` moves first, then ``o``), with a perfect minimax opponent.

Each agent sees the board from its own side (its mark, the grid, the cells still free) and answers with a cell
number 1-9 (row by row: 1 2 3 / 4 5 6 / 7 8 9). Win +1, loss -1, draw 0 for both; an occupied or unreadable cell
is invalid (``invalid_penalty``, the same agent tries again; ``max_invalid`` in a row forfeit the game).

``opening_moves`` random moves are played from the reset seed before the agents take over (``x``'s turn when it
is even), so train and held-out starts differ by seed. ``openings`` keeps training and evaluation apart: the
distinct opening boards of ``opening_moves`` moves are split once by a stable hash (:func:`validation_boards`:
about a quarter, at least one, are ``"validation"``, the rest ``"train"``); ``"train"`` / ``"validation"`` draw
only boards of that split (random openings redrawn from the seed until one falls in it), ``"all"`` (default) any.
The fixed opponent pool for evaluation
(:data:`OPPONENTS`): ``minimax`` (perfect play; ties broken by the env's rng), ``random`` and ``noisy`` (minimax,
a random cell with probability 0.3).
"""

from __future__ import annotations

import hashlib
from functools import cache
from itertools import permutations

import numpy as np

from ragen_rllib.envs.base import require
from ragen_rllib.envs.multi_agent.turn_based import Move, TurnBasedTextEnv

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MARKS = {"x": "X", "o": "O"}
INSTRUCTION = (
    "You are playing tic-tac-toe as {mark} against another player. Cells are numbered 1-9, row by row "
    "(1 2 3 / 4 5 6 / 7 8 9). Three of your marks in a row, column or diagonal win. Answer with the number of a "
    "free cell."
)
OPPONENTS = ("minimax", "random", "noisy")
NOISY_RANDOM_SHARE = 0.3
OPENING_SPLITS = ("all", "train", "validation")
VALIDATION_SHARE = 4  # one opening board in VALIDATION_SHARE is held out


def winner(board: tuple[str, ...]) -> str | None:
    """``"X"``, ``"O"`` or None."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@cache
def minimax_value(board: tuple[str, ...], to_move: str) -> int:
    """The game value for ``X`` with perfect play (+1 X wins, 0 draw, -1 O wins)."""
    won = winner(board)
    if won is not None:
        return 1 if won == "X" else -1
    free = [i for i, c in enumerate(board) if c == "."]
    if not free:
        return 0
    other = "O" if to_move == "X" else "X"
    values = [minimax_value(board[:i] + (to_move,) + board[i + 1:], other) for i in free]
    return max(values) if to_move == "X" else min(values)


def best_cells(board: tuple[str, ...], to_move: str) -> list[int]:
    """The free cells (0-based) of perfect play for ``to_move``."""
    other = "O" if to_move == "X" else "X"
    free = [i for i, c in enumerate(board) if c == "."]
    values = {i: minimax_value(board[:i] + (to_move,) + board[i + 1:], other) for i in free}
    best = max(values.values()) if to_move == "X" else min(values.values())
    return [i for i in free if values[i] == best]


def opening_boards(moves: int) -> list[tuple[str, ...]]:
    """Every distinct board after ``moves`` opening moves (X first, alternating; no game is decided by then)."""
    boards = set()
    for cells in permutations(range(9), moves):
        board = ["."] * 9
        for k, i in enumerate(cells):
            board[i] = "X" if k % 2 == 0 else "O"
        boards.add(tuple(board))
    return sorted(boards)


def _board_hash(board: tuple[str, ...]) -> str:
    return hashlib.sha256("".join(board).encode()).hexdigest()


@cache
def validation_boards(moves: int) -> frozenset[tuple[str, ...]]:
    """The held-out opening boards of ``moves`` moves: the ``ceil(n / VALIDATION_SHARE)`` boards with the
    smallest SHA-256 of their cells (stable across processes and Python versions); none for ``moves`` 0."""
    boards = opening_boards(moves)
    if len(boards) < 2:
        return frozenset()
    return frozenset(sorted(boards, key=_board_hash)[: -(-len(boards) // VALIDATION_SHARE)])


class TicTacToeEnv(TurnBasedTextEnv):
    """See the module docstring."""

    metadata = {**TurnBasedTextEnv.metadata, "name": "tictactoe"}
    possible_agents = ["x", "o"]
    instructions = {agent: INSTRUCTION.format(mark=mark) for agent, mark in MARKS.items()}
    opponents = OPPONENTS

    def __init__(self, opening_moves: int = 0, openings: str = "all", invalid_penalty: float = -0.1,
                 max_invalid: int = 3, render_mode: str | None = "ansi") -> None:
        require(isinstance(opening_moves, int) and 0 <= opening_moves <= 4, "opening_moves", opening_moves,
                "an integer from 0 to 4")
        require(openings in OPENING_SPLITS, "openings", openings, f"one of {OPENING_SPLITS}")
        require(openings == "all" or opening_moves >= 1, "openings", openings,
                "'all' when opening_moves is 0 (one empty board: nothing to hold out); set opening_moves >= 1")
        super().__init__(invalid_penalty=invalid_penalty, max_invalid=max_invalid, max_moves=30,
                         render_mode=render_mode)
        self.opening_moves, self.openings = opening_moves, openings
        self.board: tuple[str, ...] = ("." ,) * 9

    def _reset_state(self, options: dict) -> None:
        held_out = validation_boards(self.opening_moves)
        while True:
            self.board = self._random_opening()
            if self.openings == "all" or (self.board in held_out) == (self.openings == "validation"):
                break
        self.agent_selection = "x" if self.opening_moves % 2 == 0 else "o"

    def _random_opening(self) -> tuple[str, ...]:
        board, mark = (".",) * 9, "X"
        for _ in range(self.opening_moves):
            free = [i for i, c in enumerate(board) if c == "."]
            i = int(free[self.np_random.integers(len(free))])
            board = board[:i] + (mark,) + board[i + 1:]
            mark = "O" if mark == "X" else "X"
        return board

    def _observe_text(self, agent: str) -> str:
        rows = [" ".join(self.board[r * 3:(r + 1) * 3]) for r in range(3)]
        free = [str(i + 1) for i, c in enumerate(self.board) if c == "."]
        turn = "your turn" if agent == self.agent_selection else "the other player's turn"
        return (f"You are {MARKS[agent]}. Board:\n" + "\n".join(rows) + f"\nFree cells: {' '.join(free) or 'none'}"
                f" ({turn}).")

    def _parse(self, agent: str, text: str) -> int | None:
        text = text.strip().rstrip(".")
        if not text.isdigit() or not 1 <= int(text) <= 9 or self.board[int(text) - 1] != ".":
            return None
        return int(text) - 1

    def _apply(self, agent: str, cell: int) -> Move:
        mark = MARKS[agent]
        self.board = self.board[:cell] + (mark,) + self.board[cell + 1:]
        other = "o" if agent == "x" else "x"
        if winner(self.board) == mark:
            return Move(next_agent=other, rewards={agent: 1.0, other: -1.0}, done=True, winners=(agent,))
        if "." not in self.board:
            return Move(next_agent=other, done=True)
        return Move(next_agent=other)

    def oracle_action(self, agent: str) -> str:
        cells = best_cells(self.board, MARKS[agent])
        return str(int(cells[self.np_random.integers(len(cells))]) + 1)

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A random free cell."""
        free = [i for i, c in enumerate(self.board) if c == "."]
        return str(int(free[int(rng.integers(len(free)))]) + 1)

    def opponent_action(self, agent: str, kind: str) -> str:
        """An action of the fixed opponent ``kind`` (one of :data:`OPPONENTS`) for ``agent``."""
        require(kind in OPPONENTS, "opponent", kind, f"one of {OPPONENTS}")
        if kind == "random" or (kind == "noisy" and self.np_random.random() < NOISY_RANDOM_SHARE):
            return self.random_action(agent, self.np_random)
        return self.oracle_action(agent)
