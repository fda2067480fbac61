"""Hugging Face ``generate`` as a generation engine (the fallback when vLLM is absent)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ragen_rllib.engines.base import FINISH_LENGTH, FINISH_STOP, Generation, SamplingConfig, set_cpu_threads


class HFEngine:
    """Batched sampling with ``model.generate`` over prompts given as token ids (left-padded).

    Args:
        model: a loaded causal LM or a Hugging Face id / local path.
        tokenizer: its tokenizer (loaded from ``model`` when it is a path).
        device: torch device of the model.
        dtype: dtype when loading from a path; ``"auto"`` is resolved on ``device`` by
            :func:`ragen_rllib.core.precision.resolve_dtype` (CPU: float32; the learner keeps fp32 weights
            and synced weights are cast on load).
        max_batch_size: prompts per ``generate`` call (bigger batches are chunked).
        num_threads: torch CPU threads of this process (None: unchanged).

    Log-probs are ``log_softmax(logits / temperature)`` of the sampled id over the full vocabulary
    (temperature 0 = greedy, log-probs at temperature 1), i.e. before top-p/top-k filtering.
    """

    def __init__(self, model, tokenizer=None, device: str | None = None, dtype: torch.dtype | str = "auto",
                 max_batch_size: int = 64, num_threads: int | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from ragen_rllib.core.device import device_type

        device = device or device_type()
        if device == "cpu":
            set_cpu_threads(num_threads)
        if isinstance(model, str):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            if isinstance(dtype, str):
                from ragen_rllib.core.precision import resolve_dtype

                dtype = getattr(torch, resolve_dtype(dtype, device))
            model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        if tokenizer is None:
            raise ValueError("HFEngine needs tokenizer= when model is an already loaded model")
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.max_batch_size = max_batch_size
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos])

    @torch.no_grad()
    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[list[float]]:
        """Log-probs of given continuations (one forward pass per sequence)."""
        from ragen_rllib.rl.logprobs import gather_token_logprobs

        scores = []
        for prompt, cont in zip(prompts, continuations, strict=True):
            ids = torch.as_tensor([list(prompt) + list(cont)], dtype=torch.long, device=self.device)
            logp = gather_token_logprobs(self.model(input_ids=ids).logits.float(), ids)[0]
            scores.append(logp[len(prompt):].tolist())
        return scores

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> list[Generation]:
        out: list[Generation] = []
        for start in range(0, len(prompts), self.max_batch_size):
            chunk = prompts[start:start + self.max_batch_size]
            seed = None if sampling.seed is None else sampling.seed + start
            out += self._generate(chunk, sampling, seed)
        return out

    def _generate(self, prompts, sampling: SamplingConfig, seed: int | None) -> list[Generation]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
            attn[i, width - len(p):] = 1
        greedy = sampling.temperature == 0
        kwargs = dict(do_sample=not greedy, max_new_tokens=sampling.max_tokens, pad_token_id=self.pad_id,
                      eos_token_id=sorted(self.eos_ids), return_dict_in_generate=True, output_logits=True)
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p,
                          top_k=sampling.top_k if sampling.top_k > 0 else None)
        if sampling.ignore_eos:
            kwargs["min_new_tokens"] = sampling.max_tokens
        if seed is not None:
            torch.manual_seed(seed)
        res = self.model.generate(input_ids=ids.to(self.device), attention_mask=attn.to(self.device), **kwargs)
        new = res.sequences[:, width:].cpu()
        temp = 1.0 if greedy else sampling.temperature
        logits = torch.stack(res.logits, dim=1).float().cpu() / temp  # [B, N, V]
        logps = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        gens = []
        for row, lp in zip(new.tolist(), logps.tolist()):
            n, reason = len(row), FINISH_LENGTH
            for j, t in enumerate(row):
                if t in self.eos_ids and not sampling.ignore_eos:
                    n, reason = j + 1, FINISH_STOP
                    break
            row, lp = row[:n], lp[:n]
            if sampling.stop:
                row, lp, stopped = self._cut_at_stop(row, lp, sampling.stop)
                reason = FINISH_STOP if stopped else reason
            gens.append(Generation(token_ids=row, logprobs=lp if sampling.logprobs else None, finish_reason=reason,
                                   text=self.tokenizer.decode(row, skip_special_tokens=True)))
        return gens

    def _cut_at_stop(self, row, lp, stops):
        """Cut after the first token at which the decoded text contains a stop string (kept)."""
        for j in range(1, len(row) + 1):
            text = self.tokenizer.decode(row[:j], skip_special_tokens=True)
            if any(s in text for s in stops):
                return row[:j], lp[:j], True
        return row, lp, False

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        self.model.load_state_dict(dict(state_dict), strict=True)

    def close(self) -> None:
        self.model = None
