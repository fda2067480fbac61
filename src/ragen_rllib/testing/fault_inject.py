"""An env that fails on purpose, in chosen processes only: the fault-injection tool of the fault-tolerance
tests (like RLlib's ``FaultInjectEnv``), for anyone who wants to see what a run does when an env or a runner
breaks. Use it by import path: ``env="ragen_rllib.testing.fault_inject:FaultInjectEnv"``.

Faults are armed from outside, while the run goes on, by writing one line into ``trigger_file``::

    <fault> <target> [<when>]      e.g. "kill 12345", "hang *", "raise * reset"

``fault``: ``raise`` (a RuntimeError), ``hang`` (sleep ``hang_s``), ``nan`` (a NaN reward) or ``kill``
(SIGKILL of the process). ``target``: ``*`` or the id of the process the env lives in (an env runner's PID:
a restarted runner has a new PID, so a ``kill`` fires once). ``when``: ``step`` (default) or ``reset``. No
file, or an empty one: no fault.
"""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

FAULTS = ("raise", "hang", "nan", "kill")
WHEN = ("step", "reset")


def read_trigger(path: Path | None) -> tuple[str, str, str] | None:
    """``(fault, target, when)`` from the trigger file, or None (no file, or empty)."""
    if path is None or not path.exists():
        return None
    parts = path.read_text().split()
    if not parts:
        return None
    fault, target, when = (parts + ["", "*", "step"][len(parts):])[:3]
    if fault not in FAULTS or when not in WHEN:
        raise ValueError(f"{path}: {' '.join(parts)!r} is not '<fault> <target> [<when>]' with fault in {FAULTS} "
                         f"and when in {WHEN}")
    return fault, target, when


class FaultInjectEnv(gym.Wrapper):
    """``env`` (with ``env_config``) plus the fault armed in ``trigger_file`` (see the module docstring).

    Args:
        env: the wrapped env's id or import path.
        env_config: the wrapped env's config.
        trigger_file: the file that arms a fault.
        hang_s: how long ``hang`` sleeps.
    """

    def __init__(self, env: str = "ragen/FrozenLake-v0", env_config: dict | None = None, trigger_file: str = "",
                 hang_s: float = 3600.0) -> None:
        from ragen_rllib.envs.loading import make_env

        super().__init__(make_env(env, env_config))
        self.hang_s = float(hang_s)
        self.trigger_file = Path(trigger_file) if trigger_file else None

    def _maybe_fail(self, when: str) -> bool:
        """Run the armed fault if it targets this process at ``when``; True for ``nan`` (the caller poisons the
        reward)."""
        armed = read_trigger(self.trigger_file)
        if armed is None or armed[2] != when or armed[1] not in ("*", str(os.getpid())):
            return False
        fault = armed[0]
        if fault == "raise":
            raise RuntimeError(f"injected fault in {when}")
        if fault == "hang":
            time.sleep(self.hang_s)
        elif fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        return fault == "nan"

    def reset(self, **kwargs: Any):
        self._maybe_fail("reset")
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        nan = self._maybe_fail("step")
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, math.nan if nan else reward, terminated, truncated, info
