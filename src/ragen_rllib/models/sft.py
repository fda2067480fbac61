"""Supervised fine-tuning on token transcripts, with the loss on assistant tokens only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ragen_rllib.rl.logprobs import masked_mean, model_token_logprobs

#: positions per chunk of vocabulary-sized logits (a real vocabulary: 49,152 x 4 bytes per position otherwise)
LOGPROB_CHUNK = 256


def pad_batch(samples: Sequence[dict], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad ``input_ids``/``loss_mask`` lists into ``[B, T]`` tensors (ids, attention mask, loss mask)."""
    width = max(len(s["input_ids"]) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(samples), width), dtype=torch.long)
    loss = torch.zeros((len(samples), width), dtype=torch.long)
    for i, s in enumerate(samples):
        n = len(s["input_ids"])
        ids[i, :n] = torch.as_tensor(s["input_ids"])
        attn[i, :n] = 1
        loss[i, :n] = torch.as_tensor(s["loss_mask"])
    return ids, attn, loss


def length_buckets(lengths: Sequence[int], batch_size: int, rng: np.random.Generator) -> list[list[int]]:
    """Batches of sample indices with similar lengths (little padding), in random order."""
    order = np.argsort(np.asarray(lengths) + rng.random(len(lengths)))  # random tie-break
    batches = [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def random_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[list[int]]:
    """Batches of sample indices drawn uniformly (a random permutation, cut into ``batch_size`` pieces)."""
    order = rng.permutation(n)
    return [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]


#: how sft_train groups samples into optimizer steps
BATCHING = ("length", "random")


def validate_batching(batching: str, key: str = "batching") -> None:
    """ValueError naming ``key``, the value and the choices unless ``batching`` is one of ``BATCHING``."""
    if batching not in BATCHING:
        raise ValueError(f"{key}={batching!r} is not one of {BATCHING}: 'length' groups samples of similar "
                         "length (less padding), 'random' draws each batch uniformly")


def plan_batches(lengths: Sequence[int], batch_size: int, epochs: int, batching: str,
                 rng: np.random.Generator) -> list[list[int]]:
    """Every epoch's batches of sample indices, in order. ``batching``: ``"length"`` (:func:`length_buckets`:
    little padding, but a batch holds samples of one length, so where length goes with the target (a game that
    ends at its first verdict always ends on ``accept``) a batch's targets are alike) or ``"random"``
    (:func:`random_batches`: each batch a uniform draw, more padding)."""
    validate_batching(batching)
    if batching == "length":
        return [b for _ in range(epochs) for b in length_buckets(lengths, batch_size, rng)]
    return [b for _ in range(epochs) for b in random_batches(len(lengths), batch_size, rng)]


def lr_factor(step: int, total: int, warmup_steps: int = 0) -> float:
    """The share of the peak learning rate at optimizer step ``step`` (0-based) of ``total``: linear warm-up over
    ``warmup_steps`` (step k gets (k + 1) / warmup_steps), then cosine decay from 1 towards 0 over the rest."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return 0.5 * (1 + float(np.cos(np.pi * (step - warmup_steps) / max(total - warmup_steps, 1))))


def sft_train(
    model: torch.nn.Module,
    samples: Sequence[dict],
    *,
    pad_id: int,
    lr: float = 3e-3,
    epochs: int = 1,
    batch_size: int = 16,
    weight_decay: float = 0.0,
    grad_clip: float = 1.0,
    seed: int = 0,
    progress: bool = True,
    autocast: str | None = "auto",
    warmup_steps: int = 0,
    batching: str = "length",
) -> list[float]:
    """Train ``model`` on the samples' masked tokens; returns the loss of every step.

    Each sample is ``{"input_ids": list[int], "loss_mask": list[int]}``; the loss is the mean negative
    log-likelihood of the tokens where ``loss_mask`` is 1 (assistant tokens). Cosine learning-rate decay after
    ``warmup_steps`` of linear warm-up (:func:`lr_factor`; 0: decay from the first step). ``batching``: how
    samples are grouped into steps (:func:`plan_batches`: ``"length"`` or ``"random"``).
    ``autocast`` (``"auto"`` | ``"bfloat16"`` | None/``"none"``) is resolved on the model's device by
    :func:`ragen_rllib.core.precision.resolve_autocast`: the forward pass runs under bfloat16 autocast only where bf16
    is fast (CUDA with bf16, CPUs with AVX512-BF16/AMX); weights and optimizer stay fp32.
    """
    from tqdm.auto import tqdm

    from ragen_rllib.core.precision import resolve_autocast

    device = next(model.parameters()).device
    amp = resolve_autocast(autocast, device)

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    plan = plan_batches([len(s["input_ids"]) for s in samples], batch_size, epochs, batching, rng)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, len(plan), warmup_steps))
    model.train()
    losses: list[float] = []
    bar = tqdm(plan, desc="warm start", unit="batch", disable=not progress)
    for batch in bar:
        ids, _, mask = pad_batch([samples[i] for i in batch], pad_id)
        with torch.autocast(device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            # Right padding + causal attention: real tokens never see the padding, so no mask is needed
            # (and without one SDPA takes its faster causal path).
            logp = token_logprobs(model, ids)
        loss = -masked_mean(logp, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return losses


def token_logprobs(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` log-probs of ``ids`` under ``model``, the vocabulary never whole for every position at once
    (:func:`ragen_rllib.rl.logprobs.model_token_logprobs`)."""
    return model_token_logprobs(model, ids, chunk=LOGPROB_CHUNK)
