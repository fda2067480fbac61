"""The one device rule (core/device.py): every reader (a runner's engine, a standalone engine, the learner memory
estimate, Ray's CPU env vars) gives the same answer for the same GPU count, with CUDA simulated present and
absent. And no other module asks torch whether CUDA is there."""

from pathlib import Path

import pytest
import torch

from ragen_rllib.algorithms.ragen import memory
from ragen_rllib.core.device import device_type, planned_device_type
from ragen_rllib.core.threads import CPU_ENV_VARS
from ragen_rllib.run.ray_init import ray_init_kwargs
from ragen_rllib.runner.ragen_env_runner import engine_device

SRC = Path(__file__).resolve().parents[2] / "src" / "ragen_rllib"


def _config(gpus):
    from ragen_rllib import RagenConfig

    return RagenConfig().rl_module(model_config={"model": "tiny:nano"}).learners(num_gpus_per_learner=gpus) \
        .training(learner_memory_gib=8)


@pytest.mark.parametrize("cuda", [True, False])
@pytest.mark.parametrize("gpus, expected_with_cuda", [(0, "cpu"), (0.5, "cuda"), (1, "cuda"), (2, "cuda")])
def test_every_reader_agrees_on_the_device(monkeypatch, cuda, gpus, expected_with_cuda):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    expected = expected_with_cuda if cuda else "cpu"
    assert device_type(gpus) == expected
    assert engine_device(gpus) == expected  # a runner's engine (HF or vLLM), num_gpus_per_env_runner
    assert planned_device_type(gpus) == expected_with_cuda  # what the driver plans for, CUDA or not here
    # the memory check sizes the planned device, and stands aside only where this process cannot see it
    checked = memory.check_config(_config(gpus))
    assert (checked is None) == (device_type(gpus) != planned_device_type(gpus))


@pytest.mark.parametrize("cuda", [True, False])
def test_an_unconfigured_process_uses_any_visible_gpu(monkeypatch, cuda):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert device_type() == ("cuda" if cuda else "cpu") == device_type(None)
    env_vars = ray_init_kwargs()["runtime_env"]["env_vars"]
    assert (env_vars.get("OMP_NUM_THREADS") == CPU_ENV_VARS["OMP_NUM_THREADS"]) == (not cuda) or \
        "OMP_NUM_THREADS" in __import__("os").environ


def test_a_standalone_hf_engine_takes_the_rule_default(monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_rllib.engines.hf_engine import HFEngine
    from ragen_rllib.models.tiny import tiny_model_path

    path = tiny_model_path("nano")
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path))
    assert engine.device == device_type() == "cpu"  # this machine has no GPU


def test_only_the_home_of_the_rule_asks_torch_for_cuda():
    spellings = ("torch.cuda.is_available()", "_cpu_only(")
    found = sorted(f"{p.relative_to(SRC)}: {s}" for p in SRC.rglob("*.py") for s in spellings
                   if s in p.read_text() and p.name != "device.py")
    assert found == []
