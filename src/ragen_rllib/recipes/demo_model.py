"""The demo's warm-started model: one function that finds (and, once, builds) it, shared by the demo and the
benchmarks, so no benchmark measures an untrained model by accident."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

DEMO_EPOCHS = 2  # SFT epochs: converged in bf16 and in fp32 (one epoch is not, in fp32)
DEMO_NOISE = 0.45  # share of random actions in the demonstrations: the format is learnt, good play left to RL
DEMO_EPISODES = 640  # FrozenLake-4x4 oracle demonstrations


def demo_model_path(root: str | Path, epochs: int = DEMO_EPOCHS, noise: float = DEMO_NOISE,
                    autocast: str | None = "auto") -> Path:
    """Where the demo's model for these settings lives under ``root`` (one directory per setting and precision:
    ``autocast="auto"`` is bf16 where the CPU has bf16 units, else fp32; ``ragen_rllib.core.precision``)."""
    from ragen_rllib.core.precision import resolve_autocast

    precision = "bf16" if resolve_autocast(autocast, "cpu") is not None else "fp32"
    return Path(root) / "demo" / f"small-frozenlake-{epochs}ep-noise{noise:g}-{precision}"


def demo_model(root: str | Path, epochs: int = DEMO_EPOCHS, noise: float = DEMO_NOISE,
               autocast: str | None = "auto", build: bool = True, log: Callable[[str], None] = print) -> Path:
    """The small tiny model warm-started by ``epochs`` SFT epochs on FrozenLake demonstrations with a share
    ``noise`` of random actions. Built when missing and ``build`` (minutes on a CPU), announced by
    ``log``; with ``build=False`` a missing model raises a ``FileNotFoundError`` that says how to build it."""
    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    path = demo_model_path(root, epochs, noise, autocast)
    if (path / REPORT_FILE).exists():
        return path
    if not build:
        raise FileNotFoundError(f"the demo's warm-started model is missing at {path}: build it once with "
                                "`bash scripts/demo.sh` (or pass a model explicitly)")
    from ragen_rllib.models.tiny import build_model

    log(f"[demo] warm-starting the small model into {path} (once, 2-3 min)")
    build_model("small", path, seed=0)
    report = warm_start(path, WarmStartConfig(envs=("FrozenLake",), episodes_per_env=DEMO_EPISODES, epochs=epochs,
                                              noise=noise, eval_episodes=128, autocast=autocast))
    log(report.summary())
    return path
