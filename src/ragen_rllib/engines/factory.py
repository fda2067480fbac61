"""Pick and build a generation engine by name."""

from __future__ import annotations

import importlib.util

from ragen_rllib.engines.base import GenerationEngine

BACKENDS = ("auto", "vllm", "hf")


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def make_engine(backend: str, model: str, **kwargs) -> GenerationEngine:
    """``backend``: ``vllm`` | ``hf`` | ``auto`` (vLLM when importable, else HF). ``model``: HF id or local
    directory (the caller resolves ``tiny:`` and ``gguf:`` names: ``ragen_rllib.models.registry.resolve_model``).
    ``kwargs`` go to the engine (``dtype``, ``max_model_len``...)."""
    if backend not in BACKENDS:
        raise ValueError(f"engine backend={backend!r} is unknown: use one of {BACKENDS}")
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        from ragen_rllib.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model, **kwargs)
    from ragen_rllib.engines.hf_engine import HFEngine

    hf_kwargs = {k: v for k, v in kwargs.items() if k in ("dtype", "device", "max_batch_size", "num_threads")}
    return HFEngine(model, **hf_kwargs)
