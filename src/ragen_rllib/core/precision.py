"""Hardware-aware precision: when bfloat16 pays off, and what ``"auto"`` resolves to on this machine.

bfloat16 is fast only where the hardware has bf16 units: CUDA GPUs that support it, and CPUs with
AVX512-BF16 or AMX (Intel Xeon Sapphire Rapids and later), where bf16 autocast runs faster than fp32.
On CPUs without them (e.g. AMD EPYC with AVX2 only) a bf16 matmul is emulated and far slower than fp32
(the figures are in docs/results.md).
So every precision setting of the project defaults to ``"auto"``:

- ``autocast`` (forward passes of the SFT warm start and the learner): bf16 where it is fast, else none (fp32).
- ``dtype`` (weights): bf16 on a CUDA device with bf16 support, else fp32. On CPU the learner keeps fp32 master
  weights; CPU speed comes from autocast.
- a run's generation engine (:func:`resolve_engine_dtype`): the precision the learner computes in, so bf16 on a
  CPU with bf16 units under the learner's default autocast (there vLLM-CPU generates faster in bf16) and fp32
  on a CPU without them (there it generates faster in fp32); the synced fp32 weights are cast on load.

An explicit ``"bfloat16"`` is honoured everywhere, with one warning per process on a CPU without bf16 units.
This module depends only on torch and the standard library and does nothing at import time.
"""

from __future__ import annotations

import logging
import platform

import torch

logger = logging.getLogger("ragen_rllib.core.precision")

#: Accepted ``autocast`` values; ``None``, ``"none"`` and ``"float32"`` all mean no autocast.
AUTOCAST_VALUES: tuple[str | None, ...] = ("auto", "bfloat16", "none", "float32", None)
#: Accepted weight ``dtype`` names.
DTYPE_VALUES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")

_warned_slow_bf16 = False  # the one-per-process warning below has been logged


def cpu_has_bf16_units() -> bool:
    """Whether this CPU has bf16 matmul units (AVX512-BF16 or AMX tiles).

    The single detection point of the project (tests monkeypatch it); False when the torch build lacks the
    probes.
    """
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        fn = getattr(torch.cpu, probe, None)
        if fn is not None and fn():
            return True
    return False


def _device_type(device: torch.device | str) -> str:
    return torch.device(device).type


def bf16_is_fast(device: torch.device | str) -> bool:
    """Whether bf16 compute is fast on ``device``: CUDA with bf16 support, or a CPU with bf16 units."""
    kind = _device_type(device)
    if kind == "cuda":
        try:
            return bool(torch.cuda.is_bf16_supported())
        except (RuntimeError, AssertionError):  # no usable CUDA device
            return False
    if kind == "cpu":
        return cpu_has_bf16_units()
    return False


def _warn_if_slow_bf16(device: torch.device | str) -> None:
    """Log, once per process, that an explicit bf16 setting will be slow on this CPU."""
    global _warned_slow_bf16
    if _warned_slow_bf16 or _device_type(device) != "cpu" or cpu_has_bf16_units():
        return
    _warned_slow_bf16 = True
    logger.warning(
        "bfloat16 was requested on a CPU without bf16 units (no AVX512-BF16/AMX; %s): bf16 matmuls are emulated "
        "there, ~70x slower than fp32 as measured on AVX2-only CPUs. Use autocast='auto' or None (and "
        "dtype='auto' or 'float32') to run in fp32.", torch.backends.cpu.get_cpu_capability())


def validate_autocast(value: object, key: str = "autocast") -> None:
    """Raise ValueError naming ``key``, the value and the allowed values unless ``value`` is an autocast value."""
    if not (value is None or (isinstance(value, str) and value in AUTOCAST_VALUES)):
        raise ValueError(f"{key}={value!r} is invalid: use one of {AUTOCAST_VALUES} ('auto': bf16 only where "
                         "the hardware has bf16 units; None/'none'/'float32': no autocast)")


def validate_dtype(value: object, key: str = "dtype") -> None:
    """Raise ValueError naming ``key``, the value and the allowed values unless ``value`` is a weight dtype."""
    if not (isinstance(value, str) and value in DTYPE_VALUES):
        raise ValueError(f"{key}={value!r} is invalid: use one of {DTYPE_VALUES} ('auto': bfloat16 on a CUDA "
                         "device with bf16 support, else float32)")


def resolve_autocast(value: str | None, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype for ``value`` on ``device``: ``torch.bfloat16`` or None (no autocast, fp32).

    ``"auto"``: bf16 when :func:`bf16_is_fast` on the device, else None. ``"bfloat16"``: bf16 (one warning per
    process on a CPU without bf16 units). ``None``/``"none"``/``"float32"``: None. Anything else: ValueError.
    """
    validate_autocast(value)
    if value == "auto":
        return torch.bfloat16 if bf16_is_fast(device) else None
    if value == "bfloat16":
        _warn_if_slow_bf16(device)
        return torch.bfloat16
    return None


def resolve_dtype(value: str, device: torch.device | str) -> str:
    """The weight dtype name for ``value`` on ``device`` (``"float32"``, ``"bfloat16"`` or ``"float16"``).

    ``"auto"``: ``"bfloat16"`` on a CUDA device with bf16 support, else ``"float32"`` (always on CPU). Explicit
    names pass through (``"bfloat16"`` on a CPU without bf16 units warns once per process). Unknown: ValueError.
    """
    validate_dtype(value)
    if value == "auto":
        return "bfloat16" if _device_type(device) == "cuda" and bf16_is_fast(device) else "float32"
    if value == "bfloat16":
        _warn_if_slow_bf16(device)
    return value


def learner_weight_dtype(value: str) -> str:
    """The learner's master-weight dtype name for ``model_config['dtype']``: ``"float32"`` for ``"auto"`` on every
    device (bf16 compute comes from autocast), else the name given. Unknown: ValueError."""
    validate_dtype(value)
    return "float32" if value == "auto" else value


def resolve_engine_dtype(value: str, autocast: str | None, device: torch.device | str) -> str:
    """A run's generation-engine dtype: ``value`` (the engine's ``dtype``, else ``model_config['dtype']``) with
    ``"auto"`` resolved to the precision the learner computes in on ``device``: ``"bfloat16"`` when the learner's
    ``autocast`` resolves to bf16 there (or :func:`resolve_dtype` gives bf16, on CUDA), else ``"float32"``.
    Explicit names pass through :func:`resolve_dtype`.
    """
    if value == "auto" and resolve_autocast(autocast, device) is torch.bfloat16:
        return "bfloat16"
    return resolve_dtype(value, device)


def cpu_info() -> dict[str, object]:
    """This machine's CPU for benchmark and warm-start records: model name, bf16 units, torch's capability."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"model": model or platform.processor(), "bf16_units": cpu_has_bf16_units(),
            "capability": torch.backends.cpu.get_cpu_capability()}
