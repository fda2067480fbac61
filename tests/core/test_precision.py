"""Hardware-aware precision: what "auto" resolves to with and without bf16 units, warnings, errors, SFT wiring."""

import logging

import pytest
import torch

from ragen_rllib.core import precision
from ragen_rllib.core.precision import (
    bf16_is_fast,
    cpu_has_bf16_units,
    cpu_info,
    resolve_autocast,
    resolve_dtype,
    resolve_engine_dtype,
)


@pytest.fixture(autouse=True)
def fresh_warning_flag(monkeypatch):
    """Every test starts as a fresh process would: the one-time warning not yet logged."""
    monkeypatch.setattr(precision, "_warned_slow_bf16", False)


def units(monkeypatch, present: bool) -> None:
    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: present)


def slow_bf16_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ragen_rllib.core.precision" and r.levelno == logging.WARNING]


@pytest.mark.parametrize("avx512_bf16, amx, expected", [(False, False, False), (True, False, True),
                                                        (False, True, True), (True, True, True)])
def test_cpu_detection_reads_the_torch_probes(monkeypatch, avx512_bf16, amx, expected):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert cpu_has_bf16_units() is expected
    assert bf16_is_fast("cpu") is expected and bf16_is_fast(torch.device("cpu")) is expected


def test_cpu_detection_is_false_when_torch_lacks_the_probes(monkeypatch):
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported", raising=False)
    assert cpu_has_bf16_units() is False


def test_auto_autocast_is_bf16_only_with_bf16_units(monkeypatch):
    units(monkeypatch, True)
    assert resolve_autocast("auto", "cpu") is torch.bfloat16
    assert resolve_autocast("auto", torch.device("cpu")) is torch.bfloat16
    assert resolve_autocast("auto", "meta") is None  # neither CUDA nor CPU: never "fast"
    units(monkeypatch, False)
    assert resolve_autocast("auto", "cpu") is None
    for off in (None, "none", "float32"):
        assert resolve_autocast(off, "cpu") is None


def test_explicit_bf16_on_a_cpu_without_units_warns_exactly_once(monkeypatch, caplog):
    units(monkeypatch, False)
    with caplog.at_level(logging.WARNING, logger="ragen_rllib.core.precision"):
        assert resolve_autocast("bfloat16", "cpu") is torch.bfloat16  # honoured, not overridden
        assert resolve_autocast("bfloat16", "cpu") is torch.bfloat16
        assert resolve_dtype("bfloat16", "cpu") == "bfloat16"
    records = slow_bf16_warnings(caplog)
    assert len(records) == 1
    message = records[0].getMessage()
    assert "70x" in message and "autocast='auto'" in message and "None" in message


def test_explicit_bf16_with_units_or_off_cpu_does_not_warn(monkeypatch, caplog):
    units(monkeypatch, True)
    with caplog.at_level(logging.WARNING, logger="ragen_rllib.core.precision"):
        assert resolve_autocast("bfloat16", "cpu") is torch.bfloat16
        assert resolve_dtype("bfloat16", "cpu") == "bfloat16"
    units(monkeypatch, False)
    with caplog.at_level(logging.WARNING, logger="ragen_rllib.core.precision"):
        assert resolve_autocast("bfloat16", "cuda") is torch.bfloat16  # a GPU is not a slow CPU
        assert resolve_autocast(None, "cpu") is None
    assert slow_bf16_warnings(caplog) == []


@pytest.mark.parametrize("call, match", [
    (lambda: resolve_autocast("fp16", "cpu"), r"autocast='fp16' is invalid.*'auto', 'bfloat16', 'none'"),
    (lambda: resolve_autocast(True, "cpu"), r"autocast=True is invalid"),
    (lambda: resolve_dtype("fp8", "cpu"), r"dtype='fp8' is invalid.*'auto', 'float32', 'bfloat16', 'float16'"),
    (lambda: resolve_dtype(None, "cpu"), r"dtype=None is invalid"),
])
def test_bad_values_name_the_key_the_value_and_the_allowed_ones(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_auto_weight_dtype_is_float32_on_cpu_even_with_bf16_units(monkeypatch):
    for present in (True, False):
        units(monkeypatch, present)
        assert resolve_dtype("auto", "cpu") == "float32"
    for name in ("float32", "float16"):
        assert resolve_dtype(name, "cpu") == name


@pytest.mark.parametrize("supported", [True, False])
def test_cuda_follows_torch_cuda_bf16_support(monkeypatch, supported):
    units(monkeypatch, not supported)  # the CPU probe must not matter on CUDA
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: supported)
    assert bf16_is_fast("cuda") is supported and bf16_is_fast(torch.device("cuda", 0)) is supported
    assert resolve_dtype("auto", "cuda") == ("bfloat16" if supported else "float32")
    assert resolve_autocast("auto", "cuda") is (torch.bfloat16 if supported else None)


def test_cuda_probe_failure_means_not_fast(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no CUDA device")

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", broken)
    assert bf16_is_fast("cuda") is False and resolve_dtype("auto", "cuda") == "float32"


def test_cpu_info_names_the_machine(monkeypatch):
    units(monkeypatch, True)
    info = cpu_info()
    assert set(info) == {"model", "bf16_units", "capability"}
    assert info["bf16_units"] is True  # read through the single detection point
    assert info["capability"] == torch.backends.cpu.get_cpu_capability()
    assert isinstance(info["model"], str)
    units(monkeypatch, False)
    assert cpu_info()["bf16_units"] is False


# ---------------------------------------------------------------------- SFT wiring (tiny random Qwen2)
def tiny_qwen(seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=50, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return Qwen2ForCausalLM(config)


def samples():
    gen = torch.Generator().manual_seed(1)
    out = []
    for n in (6, 8, 9, 12, 7, 10):
        ids = torch.randint(1, 50, (n,), generator=gen).tolist()
        out.append({"input_ids": ids, "loss_mask": [0] * (n // 2) + [1] * (n - n // 2)})
    return out


def sft(autocast, seed: int = 0) -> list[float]:
    from ragen_rllib.models.sft import sft_train

    return sft_train(tiny_qwen(), samples(), pad_id=0, lr=1e-2, epochs=2, batch_size=2, seed=seed,
                     progress=False, autocast=autocast)


def test_sft_auto_without_bf16_units_trains_in_fp32_and_with_them_in_bf16(monkeypatch):
    fp32, bf16 = sft(None), sft("bfloat16")
    assert fp32 != bf16  # autocast really changes the numbers, so the comparisons below can tell them apart
    units(monkeypatch, False)
    assert sft("auto") == fp32
    units(monkeypatch, True)
    assert sft("auto") == bf16


def test_sft_rejects_a_bad_autocast_before_training():
    with pytest.raises(ValueError, match="autocast='fp16'"):
        sft("fp16")


@pytest.mark.parametrize("autocast", [None, "auto"])
def test_sft_runs_are_reproducible(autocast):
    first, second = sft(autocast, seed=3), sft(autocast, seed=3)
    assert len(first) == 6 and all(torch.isfinite(torch.tensor(first)))  # 2 epochs x 3 batches of 2
    assert first == second


@pytest.mark.parametrize("bf16_units", [True, False])
def test_a_runs_engine_computes_in_the_learners_precision(monkeypatch, bf16_units):
    units(monkeypatch, bf16_units)
    expected = "bfloat16" if bf16_units else "float32"  # vLLM-CPU generates faster in bf16 only with bf16 units
    assert resolve_engine_dtype("auto", "auto", "cpu") == expected
    assert resolve_engine_dtype("auto", None, "cpu") == "float32"  # a learner without autocast: an fp32 engine
    assert resolve_engine_dtype("float32", "auto", "cpu") == "float32"  # the user's dtype is kept
    assert resolve_engine_dtype("bfloat16", None, "cpu") == "bfloat16"
    with pytest.raises(ValueError, match=r"dtype='fp8' is invalid"):
        resolve_engine_dtype("fp8", "auto", "cpu")
