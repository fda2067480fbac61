"""Pick and build a generation engine by name: the one home of the backend names and of what ``auto`` means."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragen_rllib.engines.base import GenerationEngine

#: The engine backends a config, ``ragen-rllib eval --engine`` and :func:`make_engine` accept.
BACKENDS = ("auto", "vllm", "hf")


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def resolve_backend(backend: str) -> str:
    """``"vllm"`` or ``"hf"`` for ``backend`` (``auto``: vLLM when importable, else HF); ValueError when unknown."""
    if backend not in BACKENDS:
        raise ValueError(f"engine backend={backend!r} is unknown: use one of {BACKENDS}")
    return "vllm" if backend == "vllm" or (backend == "auto" and vllm_available()) else "hf"


def make_engine(backend: str, model: str, **kwargs) -> GenerationEngine:
    """``backend``: ``vllm`` | ``hf`` | ``auto`` (vLLM when importable, else HF). ``model``: HF id or local
    directory (the caller resolves ``tiny:`` and ``gguf:`` names: ``ragen_rllib.models.registry.resolve_model``).
    ``kwargs`` go to the engine (``dtype``, ``max_model_len``...)."""
    if resolve_backend(backend) == "vllm":
        from ragen_rllib.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model, **kwargs)
    from ragen_rllib.engines.hf_engine import HFEngine

    hf_kwargs = {k: v for k, v in kwargs.items() if k in ("dtype", "device", "max_batch_size", "num_threads")}
    return HFEngine(model, **hf_kwargs)
