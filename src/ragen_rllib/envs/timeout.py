"""A time limit on an env's ``reset`` and ``step``: the call runs in a daemon thread, and a call that runs
longer than ``timeout_s`` raises :class:`EnvTimeout` in the caller. Python cannot stop a thread, so the
timed-out call keeps running in the background and the wrapper is ``stuck`` from then on (every later call
raises at once): its owner replaces the env with a fresh one."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym


class EnvTimeout(RuntimeError):
    """An env's reset or step ran past its time limit."""


class TimeLimitedEnv(gym.Wrapper):
    """``env`` whose ``reset`` and ``step`` each take at most ``timeout_s`` seconds (see the module docstring)."""

    def __init__(self, env: gym.Env, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s!r} is invalid: use a positive number of seconds")
        super().__init__(env)
        self.timeout_s = float(timeout_s)
        self.stuck = False

    def reset(self, **kwargs: Any):
        return self._call("reset", self.env.reset, **kwargs)

    def step(self, action: Any):
        return self._call("step", self.env.step, action)

    def _call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.stuck:
            raise EnvTimeout(f"env.{name}: this env is still running a call that timed out; replace the env")
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = fn(*args, **kwargs)
            except BaseException as err:  # handed to the caller below
                box["err"] = err

        thread = threading.Thread(target=target, name=f"env-{name}", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive():
            self.stuck = True
            raise EnvTimeout(f"env.{name} ran longer than env_step_timeout_s={self.timeout_s:g}")
        if "err" in box:
            raise box["err"]
        return box["out"]
