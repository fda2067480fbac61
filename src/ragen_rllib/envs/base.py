"""The text-environment contract every built-in and user-defined environment follows.

A :class:`TextEnv` is a ``gymnasium.Env`` whose observations are text renderings and whose
actions are ONE action given as a string (an action name such as ``"Left"``, matched
case-insensitively, or a whole free-form answer). Subclasses implement three hooks:

- ``_reset_state()``: build a new instance from ``self.np_random`` (seeded by ``reset(seed=...)``).
- ``_render_text()``: the current state as text.
- ``_apply(action)``: apply one already-validated action and return a :class:`StepOutcome`.

The base class owns everything that must hold for every env: untrusted action strings never
raise, invalid actions leave the state unchanged with reward 0, ``info`` always carries
``success``/``action_is_valid``/``action_is_effective``, ``max_steps`` truncation, and stepping
after the episode ended is a no-op. Environments know nothing of LLMs.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

# Info keys, named once.
SUCCESS = "success"
ACTION_IS_VALID = "action_is_valid"
ACTION_IS_EFFECTIVE = "action_is_effective"

#: Longest action string an env looks at; longer input is invalid (never parsed).
MAX_ACTION_CHARS = 4096
#: Characters text observations may use (printable ASCII plus RAGEN's grid symbols).
TEXT_CHARSET = frozenset(string.printable) | frozenset("√✓·")
#: Upper bound on the length of a rendered observation.
MAX_OBSERVATION_CHARS = 65536


@dataclass(frozen=True)
class StepOutcome:
    """Result of applying one valid action.

    Attributes:
        reward: scalar reward of this action.
        terminated: the episode reached a terminal state (goal, hole, solved, answered).
        effective: the action changed the state.
        success: the task counts as solved (RAGEN: terminated and not truncated, per env rule).
    """

    reward: float
    terminated: bool
    effective: bool
    success: bool = False


def text_space(max_length: int = MAX_OBSERVATION_CHARS) -> gym.spaces.Text:
    """A ``gym.spaces.Text`` accepting RAGEN's renderings (the default charset is alphanumeric only)."""
    return gym.spaces.Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)


def coerce_action(action: Any) -> str | None:
    """Turn any untrusted action into a clean string, or ``None`` when it cannot be one.

    Never raises: bytes are decoded with replacement, lone surrogates are dropped, strings
    longer than :data:`MAX_ACTION_CHARS` are rejected.
    """
    if isinstance(action, bytes):
        action = action.decode("utf-8", errors="replace")
    if not isinstance(action, str):
        return None
    if len(action) > MAX_ACTION_CHARS:
        return None
    # Drop invalid surrogates so downstream code (regex, printing, hashing) is safe.
    return action.encode("utf-8", errors="ignore").decode("utf-8", errors="ignore").strip()


class TextEnv(gym.Env[str, str]):
    """Base class for text environments (see the module docstring for the contract)."""

    metadata = {"render_modes": ["ansi"]}

    #: Action names the env accepts (case-insensitive); empty for free-form answer envs.
    action_names: list[str] = []
    #: Episode step limit handled by the base class (``None``: no limit).
    max_steps: int | None = None

    def __init__(self, render_mode: str | None = "ansi") -> None:
        super().__init__()
        self.render_mode = render_mode
        self.observation_space = text_space()
        self.action_space = text_space(MAX_ACTION_CHARS)
        self._steps = 0
        self._done = False
        self._success = False

    # ----------------------------------------------------------------- public API
    @property
    def instruction(self) -> str:
        """What the task is, including the symbol legend for grid envs."""
        raise NotImplementedError

    def oracle_action(self) -> str | None:
        """The next action of an (approximately) optimal policy from the current state, if any."""
        raise NotImplementedError(f"{type(self).__name__} has no oracle solver")

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self._steps = 0
        self._done = False
        self._success = False
        self._reset_state(options or {})
        return self._render_text(), self._info(valid=True, effective=False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return self._render_text(), 0.0, True, False, self._info(valid=False, effective=False)
        text = coerce_action(action)
        parsed = None if text is None else self._parse_action(text)
        if parsed is None:
            outcome = None
        else:
            try:
                outcome = self._apply(parsed)
            except (ValueError, ArithmeticError, OverflowError, RecursionError):
                outcome = None
        self._steps += 1
        if outcome is None:  # invalid: state unchanged, no reward
            truncated = self._truncated(terminated=False)
            self._done = truncated
            return self._render_text(), 0.0, False, truncated, self._info(valid=False, effective=False)
        terminated = bool(outcome.terminated)
        truncated = self._truncated(terminated)
        self._done = terminated or truncated
        self._success = bool(outcome.success) and terminated
        info = self._info(valid=True, effective=bool(outcome.effective))
        return self._render_text(), float(outcome.reward), terminated, truncated, info

    def render(self) -> str:
        return self._render_text()

    # ----------------------------------------------------------------- subclass hooks
    def _reset_state(self, options: dict) -> None:
        raise NotImplementedError

    def _render_text(self) -> str:
        raise NotImplementedError

    def _parse_action(self, text: str) -> Any | None:
        """Map a clean action string to what ``_apply`` takes, or ``None`` if invalid.

        Default: a case-insensitive match against ``action_names`` returning the canonical name.
        Free-form envs override this.
        """
        wanted = text.lower()
        return next((name for name in self.action_names if name.lower() == wanted), None)

    def _apply(self, action: Any) -> StepOutcome:
        raise NotImplementedError

    # ----------------------------------------------------------------- helpers
    def _truncated(self, terminated: bool) -> bool:
        return not terminated and self.max_steps is not None and self._steps >= self.max_steps

    def _info(self, *, valid: bool, effective: bool) -> dict:
        return {SUCCESS: self._success, ACTION_IS_VALID: valid, ACTION_IS_EFFECTIVE: effective}


def require(ok: bool, key: str, value: Any, allowed: str) -> None:
    """Raise a ``ValueError`` naming the env_config key, the bad value and what is allowed."""
    if not ok:
        raise ValueError(f"env_config[{key!r}] = {value!r} is invalid: {allowed}.")


def pick_index(options: dict, n: int, rng) -> int:
    """The item an episode plays: ``options["index"]`` when given (checked: an int in ``[0, n)``), else drawn
    from the env's seeded ``rng`` (``self.np_random``)."""
    if "index" not in options:
        return int(rng.integers(n))
    i = options["index"]
    require(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n, "index", i, f"an integer in [0, {n})")
    return i
