"""A learner on CPU uses one torch thread per CPU its config asks for, wherever it runs (in a Ray worker: per CPU
Ray gave it, Ray's own default for OpenMP threads; in a driver: ``num_cpus_per_learner``), unless the user set
``OMP_NUM_THREADS`` themselves; the vLLM-CPU fix (``OMP_NUM_THREADS=1`` for every Ray worker) would otherwise leave
a learner with one thread whatever ``num_cpus_per_learner`` it asked for."""

import pytest
import torch

from ragen_rllib.core.threads import CPU_ENV_VARS, OMP_DEFAULTED, learner_cpu_threads
from ragen_rllib.run.ray_init import ray_init_kwargs

needs_cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the OMP_NUM_THREADS=1 fix applies without GPU")


@needs_cpu_only
def test_the_marker_is_set_only_when_omp_threads_are_the_cpu_fixs_default(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = ray_init_kwargs()["runtime_env"]["env_vars"]
    assert env["OMP_NUM_THREADS"] == CPU_ENV_VARS["OMP_NUM_THREADS"] and env[OMP_DEFAULTED] == "1"
    mine = ray_init_kwargs(runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})["runtime_env"]["env_vars"]
    assert OMP_DEFAULTED not in mine  # the user's own 1 is kept, not raised
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert OMP_DEFAULTED not in ray_init_kwargs()["runtime_env"]["env_vars"]


def test_in_a_driver_a_learner_takes_the_cpus_its_config_asks_for_unless_the_user_set_omp(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert learner_cpu_threads(2) == 2  # as a Tune trial's learner with num_cpus_per_learner: 2 gets
    assert learner_cpu_threads("auto") is None and learner_cpu_threads(None) is None  # RLlib's choice: left alone
    assert learner_cpu_threads(0) is None and learner_cpu_threads(True) is None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert learner_cpu_threads(2) is None  # the user's own setting


@pytest.mark.slow
@needs_cpu_only
@pytest.mark.parametrize("cpus, marker, expected", [(2, "1", 2), (1, "1", 1), (2, "0", 1)])
def test_a_learner_built_in_a_ray_worker_takes_its_cpus_as_threads(ray_session, cpus, marker, expected):
    import ray

    def _build_learner_threads():
        from ray.rllib.core import DEFAULT_MODULE_ID

        from ragen_rllib import RagenConfig
        from ragen_rllib.envs.base import text_space

        torch.set_num_threads(1)
        config = (RagenConfig().environment("ragen/FrozenLake-v0")
                  .rl_module(model_config={"model": "tiny:nano", "autocast": "none"})
                  .training(adv_estimator="grpo", env_groups=1, group_size=4, minibatch_size=4))
        config.validate()
        config.build_learner(spaces={DEFAULT_MODULE_ID: (text_space(), text_space())})
        return learner_cpu_threads(), torch.get_num_threads()

    probe = ray.remote(num_cpus=cpus, runtime_env={"env_vars": {OMP_DEFAULTED: marker}})(_build_learner_threads)
    asked, threads = ray.get(probe.remote())
    assert threads == expected
    assert asked == (cpus if marker == "1" else None)
