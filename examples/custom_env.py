"""A user-defined text environment registered from user code, with no change to the library.

It shows the whole env contract in ~40 lines: subclass ``TextEnv``, implement ``_reset_state``,
``_render_text`` and ``_apply`` (plus ``instruction``, optionally ``oracle_action``), register it
with ``gymnasium.register`` and use it like a built-in env (also from RagenConfig.environment(...)).

Run:  .venv/bin/python examples/custom_env.py
"""

from __future__ import annotations

import gymnasium as gym

from ragen_rllib.envs import StepOutcome, TextEnv
from ragen_rllib.envs.base import require


class GuessNumberEnv(TextEnv):
    """Guess a hidden number in [1, high]; the env answers Higher/Lower. Actions are free text."""

    action_names: list[str] = []  # free-form answers

    def __init__(self, high: int = 16, max_steps: int = 6, render_mode: str | None = "ansi") -> None:
        require(isinstance(high, int) and high >= 2, "high", high, "use an integer >= 2")
        self.high, self.max_steps = high, max_steps
        super().__init__(render_mode)

    @property
    def instruction(self) -> str:
        return f"Guess the hidden integer between 1 and {self.high}. Answer with one number."

    def _reset_state(self, options: dict) -> None:
        self.secret = int(self.np_random.integers(1, self.high + 1))
        self.lo, self.hi, self.hint = 1, self.high, "No guess yet."

    def _render_text(self) -> str:
        return f"{self.hint} The number is between {self.lo} and {self.hi}."

    def _parse_action(self, text: str) -> int | None:
        return int(text) if text.isdigit() and 1 <= int(text) <= self.high else None

    def _apply(self, guess: int) -> StepOutcome:
        if guess == self.secret:
            self.hint = f"{guess} is correct!"
            return StepOutcome(reward=1.0, terminated=True, effective=True, success=True)
        before = (self.lo, self.hi)
        if guess < self.secret:
            self.hint, self.lo = f"{guess} is too low.", max(self.lo, guess + 1)
        else:
            self.hint, self.hi = f"{guess} is too high.", min(self.hi, guess - 1)
        return StepOutcome(reward=0.0, terminated=False, effective=(self.lo, self.hi) != before)

    def oracle_action(self) -> str:
        return str((self.lo + self.hi) // 2)  # binary search


gym.register(id="my/GuessNumber-v0", entry_point=GuessNumberEnv)

if __name__ == "__main__":
    env = gym.make("my/GuessNumber-v0", high=32)
    obs, info = env.reset(seed=0)
    print(env.unwrapped.instruction)
    print(obs)
    for _ in range(10):
        action = env.unwrapped.oracle_action()
        obs, reward, terminated, truncated, info = env.step(action)
        print(f"> {action}\n{obs}  reward={reward} success={info['success']}")
        if terminated or truncated:
            break
