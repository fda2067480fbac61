"""Countdown (RAGEN/TinyZero): combine the given numbers with + - * / to reach the target.

Instances are generated from the seed: 3 or 4 numbers (``num_numbers``) drawn from
``1..max_number``, and a target computed by a random expression over all of them that yields an
integer in ``1..max_target``; every instance is checked with :func:`solve`, so all are solvable.

The answer is ONE arithmetic expression (digits, ``+ - * /``, parentheses; optionally followed by
``= <number>``, which is ignored), evaluated exactly by :mod:`ragen_rllib.envs.games.safe_math`.
As in TinyZero, every given number must be used exactly once (all of them, in any order).
Rewards: 1.0 for the right numbers and the target value (success); 0.1 for the right numbers but a
wrong value; 0.0 for a well-formed expression with the wrong numbers. Anything the safe evaluator
rejects (unparsable, unsafe, decimal literals, division by zero, out-of-range values) is an
invalid action: state unchanged, reward 0, and ``max_steps`` attempts truncate the episode.

``reset(options={"numbers": [2, 3, 4], "target": 24})`` starts from a given instance instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

from ragen_rllib.envs.base import StepOutcome, TextEnv, require
from ragen_rllib.envs.games.safe_math import MAX_MAGNITUDE, numbers_used, safe_eval

#: Reward for the right numbers and the target value.
CORRECT_REWARD = 1.0
#: Reward for the right numbers with a wrong value (TinyZero's format score).
FORMAT_REWARD = 0.1
#: Largest ``num_numbers`` accepted (the exhaustive solver grows fast beyond that).
MAX_NUM_NUMBERS = 5
#: Random expressions tried per reset before giving up (each hit rate is far above 1/1000).
_MAX_TRIES = 10_000
_RESULT_RE = re.compile(r"-?\d+(\.\d+)?")

_Item = tuple[Fraction, str, bool]  # value, text, is_atom


def _combine(a: _Item, b: _Item) -> list[_Item]:
    """Every value of ``a op b`` and ``b op a`` (within the evaluator's bounds), with its text."""
    va, ta, _ = a
    vb, tb, _ = b
    wa = ta if a[2] else f"({ta})"
    wb = tb if b[2] else f"({tb})"
    out = [
        (va + vb, f"{wa} + {wb}"),
        (va * vb, f"{wa} * {wb}"),
        (va - vb, f"{wa} - {wb}"),
        (vb - va, f"{wb} - {wa}"),
    ]
    if vb != 0:
        out.append((va / vb, f"{wa} / {wb}"))
    if va != 0:
        out.append((vb / va, f"{wb} / {wa}"))
    return [(v, t, False) for v, t in out if abs(v) < MAX_MAGNITUDE and v.denominator < MAX_MAGNITUDE]


def solve(numbers: Sequence[int], target: int) -> str | None:
    """An expression using every number exactly once that equals ``target``, or None if none exists.

    Exhaustive search: repeatedly replace two items by one of their six combinations (this covers
    every ordering, operator choice and binary tree); failed multisets of values are memoised.
    """
    goal = Fraction(target)
    failed: set[tuple[Fraction, ...]] = set()

    def search(items: list[_Item]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == goal else None
        key = tuple(sorted(item[0] for item in items))
        if key in failed:
            return None
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                rest = items[:i] + items[i + 1 : j] + items[j + 1 :]
                for item in _combine(items[i], items[j]):
                    found = search(rest + [item])
                    if found is not None:
                        return found
        failed.add(key)
        return None

    if not numbers:
        return None
    return search([(Fraction(int(n)), str(int(n)), True) for n in numbers])


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_num_numbers(value: object) -> tuple[int, ...]:
    choices = (value,) if isinstance(value, int) else tuple(value) if isinstance(value, Sequence) else ()
    ok = bool(choices) and not isinstance(value, str)
    ok = ok and all(_is_int(n) and 2 <= n <= MAX_NUM_NUMBERS for n in choices)
    require(ok, "num_numbers", value, f"use an int or a list of ints, each from 2 to {MAX_NUM_NUMBERS}")
    return tuple(int(n) for n in choices)  # type: ignore[arg-type]


def _check_int(key: str, value: object, low: int, high: int) -> int:
    ok = _is_int(value) and low <= value <= high  # type: ignore[operator]
    require(ok, key, value, f"use an integer from {low} to {high}")
    return int(value)  # type: ignore[arg-type]


def _given_instance(options: dict) -> tuple[list[int], int]:
    """``reset(options={"numbers": [...], "target": t})``, validated (solvability is not required)."""
    numbers, target = options.get("numbers"), options.get("target")
    ok = isinstance(numbers, Sequence) and not isinstance(numbers, str)
    ok = ok and 1 <= len(numbers) <= MAX_NUM_NUMBERS  # type: ignore[arg-type]
    ok = ok and all(_is_int(n) and 0 <= n < MAX_MAGNITUDE for n in numbers)  # type: ignore[union-attr]
    ok = ok and _is_int(target) and abs(target) < MAX_MAGNITUDE  # type: ignore[arg-type]
    if not ok:
        raise ValueError(
            f"reset options numbers={numbers!r}, target={target!r} are invalid: use 1 to {MAX_NUM_NUMBERS} "
            "non-negative ints and an int target"
        )
    return [int(n) for n in numbers], int(target)  # type: ignore[union-attr, arg-type]


class CountdownEnv(TextEnv):
    """Reach the target with the given numbers, each used exactly once (one answer per episode).

    Args:
        num_numbers: how many numbers an instance has; an int or a list to pick from uniformly.
        max_number: numbers are drawn uniformly from 1..max_number.
        max_target: targets are integers from 1..max_target.
        max_steps: attempts (invalid answers included) before truncation.
    """

    action_names: list[str] = []  # free-form answer

    def __init__(
        self,
        num_numbers: int | Sequence[int] = (3, 4),
        max_number: int = 99,
        max_target: int = 100,
        max_steps: int = 3,
        render_mode: str | None = "ansi",
    ) -> None:
        self.num_numbers = _check_num_numbers(num_numbers)
        self.max_number = _check_int("max_number", max_number, 1, 10_000)
        self.max_target = _check_int("max_target", max_target, 1, 1_000_000)
        self.max_steps = _check_int("max_steps", max_steps, 1, 1_000_000)
        super().__init__(render_mode)
        self.numbers: list[int] = []
        self.target = 0

    # ----------------------------------------------------------------- public API
    @property
    def instruction(self) -> str:
        task = (
            f"Using the numbers {self.numbers}, create an equation that equals {self.target}."
            if self.numbers
            else "Using the given numbers, create an equation that equals the target."
        )
        return (
            f"You are playing Countdown. {task} You can use + - * / and parentheses, and each number must "
            "be used exactly once (all of them, in any order). Answer with the expression only, "
            "e.g. (1 + 2) * 3."
        )

    def oracle_action(self) -> str | None:
        """A solving expression for the current instance (None before reset)."""
        return solve(self.numbers, self.target) if self.numbers else None

    # ----------------------------------------------------------------- hooks
    def _reset_state(self, options: dict) -> None:
        if "numbers" in options or "target" in options:
            self.numbers, self.target = _given_instance(options)
            return
        rng = self.np_random
        count = self.num_numbers[int(rng.integers(len(self.num_numbers)))]  # drawn once: uniform sizes
        for _ in range(_MAX_TRIES):
            numbers = [int(n) for n in rng.integers(1, self.max_number + 1, size=count)]
            target = self._random_target(numbers)
            if target is not None and solve(numbers, target) is not None:
                self.numbers, self.target = numbers, target
                return
        raise ValueError(
            f"no Countdown instance found with max_number={self.max_number}, max_target={self.max_target}; "
            "raise env_config['max_target']"
        )

    def _random_target(self, numbers: list[int]) -> int | None:
        """Value of a random expression over all ``numbers`` if it is an integer in 1..max_target."""
        rng = self.np_random
        items: list[_Item] = [(Fraction(n), str(n), True) for n in numbers]
        while len(items) > 1:
            i, j = (int(k) for k in rng.choice(len(items), size=2, replace=False))
            options = _combine(items[i], items[j])
            if not options:
                return None
            pick = options[int(rng.integers(len(options)))]
            items = [item for k, item in enumerate(items) if k not in (i, j)] + [pick]
        value = items[0][0]
        if value.denominator == 1 and 1 <= value <= self.max_target:
            return int(value)
        return None

    def _parse_action(self, text: str) -> tuple[list[int], Fraction] | None:
        expr, eq, result = text.partition("=")
        if eq and not _RESULT_RE.fullmatch(result.strip()):
            return None
        try:
            return numbers_used(expr), safe_eval(expr, allow_decimals=False)
        except ValueError:
            return None

    def _apply(self, action: tuple[list[int], Fraction]) -> StepOutcome:
        used, value = action
        right_numbers = sorted(used) == sorted(self.numbers)
        solved = right_numbers and value == self.target
        reward = CORRECT_REWARD if solved else FORMAT_REWARD if right_numbers else 0.0
        return StepOutcome(reward=reward, terminated=True, effective=True, success=solved)

    def _render_text(self) -> str:
        return f"Target: {self.target}, Numbers: {self.numbers}"
