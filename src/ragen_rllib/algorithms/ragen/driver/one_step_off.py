"""One-step-off rollout (``training(rollout_mode="one_step_off")``): the next batch is sampled while the
learner trains on this one.

Weights versions count learner updates: version ``v`` is the policy after ``v`` updates. Each collected batch
records the version the engines held when it was sampled; the learner trains it at its own version, and the
difference is the batch's staleness (``env_runners/weights_staleness``): 0 in sync mode, 1 in one-step-off mode
once the pipeline runs (iteration 1 samples synchronously, so its staleness is 0 too). Per iteration
``t >= 2``::

    main thread:   sync W(t-1) -> launch sample of B(t+1) -> learn on B(t) -> W(t) -> wait for B(t+1)
    sample thread:                 B(t+1) with W(t-1) ..........................

The sync happens between rollouts (the runners are idle then), never inside a trajectory. The iteration ends
with nothing in flight, so RLlib's runner restores, validation and checkpoints see idle runners; the sampled
batch waits in :class:`Collected` form (a checkpoint stores it, so a resumed run trains on it as the
uninterrupted run would).
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


class NoHealthyRunners(RuntimeError):
    """Raised by a background sample that finds no healthy env runner (restores are left to the main thread)."""


@dataclass
class Collected:
    """One training step's sampled trajectories, waiting to be learned on.

    Attributes:
        sampled: every trajectory sampled (all rounds of dynamic sampling).
        kept: the ones to train on.
        seconds: sampling wall time (its rounds together).
        extra: dynamic-sampling metrics for ``result["env_runners"]``.
        runner_metrics: the runners' own metrics, to aggregate into ``result["env_runners"]``.
        lost, resampled: env groups lost with a dead runner / sampled again elsewhere.
        version: the learner weights version the engines held while sampling.
        start, end: ``time.perf_counter()`` stamps of the sampling.
    """

    sampled: list
    kept: list
    seconds: float
    extra: dict[str, float]
    runner_metrics: list = field(default_factory=list)
    lost: float = 0.0
    resampled: float = 0.0
    version: int = 0
    start: float = 0.0
    end: float = 0.0


def staleness(learner_version: int, batch: Collected) -> int:
    """Learner updates between the weights that sampled ``batch`` and the weights about to train on it."""
    if batch.version > learner_version:
        raise ValueError(f"a batch sampled by weights version {batch.version} cannot be newer than the learner "
                         f"({learner_version})")
    return learner_version - batch.version


def dumps(batch: Collected | None) -> bytes | None:
    """A waiting batch as checkpointable bytes (runner metrics dropped: they were logged when sampled)."""
    if batch is None:
        return None
    return pickle.dumps(Collected(batch.sampled, batch.kept, batch.seconds, batch.extra, version=batch.version))


def loads(data: bytes | None) -> Collected | None:
    return None if data is None else pickle.loads(data)


class Prefetcher:
    """Runs one sampling call at a time on a background thread of the driver."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragen-sample")
        self._future: Future | None = None

    def launch(self, collect: Callable[[], Collected]) -> None:
        if self._future is not None:
            raise RuntimeError("a sample is already in flight")
        self._future = self._pool.submit(collect)

    def wait(self) -> tuple[Collected | None, float]:
        """The in-flight batch (None when its sample found no healthy runner: the caller samples again in the
        foreground) and the seconds spent waiting for it. Other errors of the sample are raised here."""
        start = time.perf_counter()
        future, self._future = self._future, None
        if future is None:
            return None, 0.0
        try:
            batch = future.result()
        except NoHealthyRunners:
            logger.warning("one-step-off: the background sample found no healthy env runner; the next iteration "
                           "samples in the foreground after the runners are restored")
            batch = None
        return batch, time.perf_counter() - start

    def close(self) -> None:
        try:
            self.wait()
        except Exception as err:  # noqa: BLE001 (stopping: a failed last sample is not worth raising)
            logger.warning("one-step-off: the last background sample failed while stopping: %s", err)
        self._pool.shutdown(wait=True)


def timeline(iteration_start: float, **phases: tuple[float, float] | None) -> dict[str, Any]:
    """``{ragen_<phase>_start_s, ragen_<phase>_end_s}`` relative to the iteration's start, for the result's
    timers (phases that did not happen are left out)."""
    out: dict[str, Any] = {}
    for phase, span in phases.items():
        if span is not None:
            out[f"ragen_{phase}_start_s"] = span[0] - iteration_start
            out[f"ragen_{phase}_end_s"] = span[1] - iteration_start
    return out
