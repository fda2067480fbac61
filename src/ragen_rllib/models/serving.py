"""A model name -> the generation engine and the chat format that sample it: the one set-up the env runners and
``ragen-rllib eval`` share (the same model resolution, tokenizer, RAGEN prefill and engine choice)."""

from __future__ import annotations

from typing import Any

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.engines.base import GenerationEngine


def engine_and_chat(model_name: str, agent_cfg: AgentConfig, backend: str = "auto",
                    **engine_kwargs: Any) -> tuple[GenerationEngine, ChatFormat]:
    """Build the engine (``backend``: ``auto`` | ``vllm`` | ``hf``; ``engine_kwargs`` such as ``dtype``,
    ``device``, ``num_threads``) for ``model_name`` (``tiny:``, ``gguf:``, an HF id or a directory) and its chat
    format with the agent settings' generation prefill. A vLLM engine gets ``max_model_len`` from the agent
    settings unless given."""
    from transformers import AutoTokenizer

    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.engines.factory import make_engine, resolve_backend
    from ragen_rllib.models.registry import resolve_model

    model = str(resolve_model(str(model_name)))
    if resolve_backend(backend) == "vllm":
        engine_kwargs.setdefault("max_model_len", agent_cfg.max_model_len)
    engine = make_engine(backend, model, **engine_kwargs)
    return engine, ChatFormat(AutoTokenizer.from_pretrained(model), prefill=generation_prefill(agent_cfg))
