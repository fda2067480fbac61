"""A learner's peak memory, estimated from the model's shape before anything is loaded, and the token budget of a
micro-batch that keeps it within ``learner_memory_gib``, so that no setting lets a learner take the machine down.

The estimate (bytes) of one gradient step on a micro-batch of ``tokens`` padded cells::

    peak = RUNTIME_OVERHEAD_BYTES + static + tokens * per_token
    static    = weights (P x w) + gradients, AdamW moments (3 x trainable x w) [fp32: 16 bytes/param without LoRA]
                + bf16 copies of the weights under autocast (2 x P) + a frozen reference copy (KL without LoRA, P x w)
    per_token = scale * structural + head
    structural (no checkpointing) = L * (a_h * H + a_i * I) + EMBED_HIDDEN_BYTES * H
    structural (checkpointing)    = L * CHECKPOINT_HIDDEN_BYTES * H + (a_h * H + a_i * I) + EMBED_HIDDEN_BYTES * H
    head      = min(V, VOCAB_SLICE) * HEAD_SLICE_BYTES  (the fused log-prob head holds one vocabulary slice of logits
                for every position; logprob_chunk=0: V * FULL_LOGITS_BYTES, the whole logits)

``(a_h, a_i)`` are the bytes each transformer block keeps per token for backward (bf16 autocast: the fp32
residual stream and norms, bf16 copies of the matmul inputs, q/k/v, attention output, four MLP tensors of size I).
``scale`` is fitted on measured peaks, never below a measured point (``benchmarks/learner_memory.py``; the
calibration table and the fit are in docs/memory.md).

The no-grad pass before the updates (old log-probs, values, reference log-probs) runs on micro-batches of the same
budget with ``NOGRAD_TOKEN_BYTES`` per token and the same static memory: always below the training peak.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragen_rllib.core.model_config import MODEL_SETTINGS, model_setting

logger = logging.getLogger("ragen_rllib.memory")

GIB = 1024**3
#: process memory besides the model: Python, torch, transformers, Ray and RLlib, the batch, allocator slack
RUNTIME_OVERHEAD_BYTES = int(1.5 * GIB)
#: bytes one transformer block keeps per token for backward: (x hidden, x intermediate) by autocast on/off
LAYER_BYTES = {True: (40.0, 8.0), False: (44.0, 16.0)}
CHECKPOINT_HIDDEN_BYTES = 4.0  # gradient checkpointing keeps only each block's fp32 input
EMBED_HIDDEN_BYTES = 16.0  # embeddings, final norm and the gradient of the last hidden states (x hidden)
HEAD_SLICE_BYTES = 22.0  # fused log-prob head: bytes per (position, vocabulary row of one slice) in backward
FULL_LOGITS_BYTES = 30.0  # logprob_chunk=0: bytes per (position, vocabulary entry) of the full logits pass
VOCAB_SLICE = 16384  # = ragen_rllib.rl.logprobs.VOCAB_SLICE (not imported: that module imports torch)
#: fitted multiples of the structural per-token bytes (benchmarks/learner_memory.py), by gradient checkpointing
SCALE = {False: 1.2, True: 4.3}
NOGRAD_TOKEN_BYTES = (24.0, 8.0, 17.0)  # no-grad pass per token: x hidden, x intermediate, x vocabulary slice
#: learner_memory_gib=None: this share of the machine's RAM (split over its CPU learners) / of a GPU's memory
CPU_MEMORY_SHARE = 0.4
GPU_MEMORY_SHARE = 0.9
BUDGET_STEP = 256  # automatic budgets are rounded down to a multiple of this
#: peft's default LoRA targets of Llama / Qwen2 models, and every linear layer of a block ("all-linear")
LORA_DEFAULT_TARGETS = ("q_proj", "v_proj")
LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a decoder-only transformer (a Hugging Face ``config.json``)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True  # tie_word_embeddings: the LM head is the embedding matrix
    qkv_bias: bool = False  # q/k/v projections with biases (Qwen2)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> ModelShape:
        """From a ``config.json`` dict (a multimodal config's ``text_config`` if present)."""
        cfg = cfg.get("text_config") or cfg
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        return cls(layers=int(cfg["num_hidden_layers"]), hidden=hidden, intermediate=int(cfg["intermediate_size"]),
                   heads=heads, kv_heads=int(cfg.get("num_key_value_heads") or heads),
                   head_dim=int(cfg.get("head_dim") or hidden // heads), vocab=int(cfg["vocab_size"]),
                   tied=bool(cfg.get("tie_word_embeddings", True)),
                   qkv_bias=bool(cfg.get("attention_bias", cfg.get("model_type") == "qwen2")))

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> ModelShape:
        """From a model directory's ``config.json``."""
        return cls.from_config(json.loads((Path(path) / "config.json").read_text()))

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one block."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h), "gate_proj": (h, i),
                "up_proj": (h, i), "down_proj": (i, h)}

    @property
    def params(self) -> int:
        """Parameter count: embeddings (+ an untied head), per block the linear layers, q/k/v biases and two
        norms, and the final norm."""
        per_block = sum(a * b for a, b in self.linear_shapes().values()) + 2 * self.hidden
        if self.qkv_bias:
            per_block += (self.heads + 2 * self.kv_heads) * self.head_dim
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return embed + self.layers * per_block + self.hidden

    def lora_params(self, lora: dict[str, Any]) -> int:
        """Adapter parameters of a ``peft.LoraConfig`` dict (``r``, ``target_modules``): r x (in + out) per
        adapted linear layer of every block."""
        targets = lora.get("target_modules") or LORA_DEFAULT_TARGETS
        targets = LINEAR_NAMES if targets == "all-linear" else (targets,) if isinstance(targets, str) else targets
        r = int(lora.get("r", 8))
        shapes = self.linear_shapes()
        return self.layers * sum(r * sum(shapes[name]) for name in shapes if name in set(targets))


@dataclass(frozen=True)
class LearnerMemory:
    """The settings the estimate depends on, and the estimate (see the module docstring; bytes throughout)."""

    shape: ModelShape
    params: int  # every parameter of the module
    trainable: int  # parameters with gradients and AdamW moments (LoRA: the adapters)
    weight_bytes: int = 4  # bytes per parameter of model_config['dtype'] (auto: fp32 master weights)
    autocast: bool = True  # forward passes under bf16 autocast
    gradient_checkpointing: bool = False
    logprob_chunk: int = MODEL_SETTINGS["logprob_chunk"].default  # model_config['logprob_chunk'] (0: full logits)
    reference_copy: bool = False  # a frozen copy of the model for the KL reference (KL without LoRA)

    def static_bytes(self) -> int:
        """Weights + gradients + AdamW moments (+ autocast weight copies, + the reference copy)."""
        total = self.params * self.weight_bytes + 3 * self.trainable * self.weight_bytes
        if self.autocast and self.weight_bytes > 2:
            total += 2 * self.params
        if self.reference_copy:
            total += self.params * self.weight_bytes
        return total

    def structural_token_bytes(self) -> float:
        """Activation bytes per token before the fitted scale (transformer blocks, embeddings)."""
        s = self.shape
        a_h, a_i = LAYER_BYTES[self.autocast]
        block = a_h * s.hidden + a_i * s.intermediate
        kept = s.layers * CHECKPOINT_HIDDEN_BYTES * s.hidden + block if self.gradient_checkpointing \
            else s.layers * block
        return kept + EMBED_HIDDEN_BYTES * s.hidden

    def head_token_bytes(self) -> float:
        """Log-prob head bytes per token: one vocabulary slice (fused head) or the whole logits."""
        v = self.shape.vocab
        return min(v, VOCAB_SLICE) * HEAD_SLICE_BYTES if self.logprob_chunk else v * FULL_LOGITS_BYTES

    def token_bytes(self) -> float:
        """Bytes per padded token of a training micro-batch."""
        return SCALE[self.gradient_checkpointing] * self.structural_token_bytes() + self.head_token_bytes()

    def nograd_token_bytes(self) -> float:
        """Bytes per padded token of the no-grad pass."""
        s, (h, i, v) = self.shape, NOGRAD_TOKEN_BYTES
        vocab = min(s.vocab, VOCAB_SLICE) if self.logprob_chunk else s.vocab * 2
        return h * s.hidden + i * s.intermediate + v * vocab

    def peak_bytes(self, tokens: int) -> float:
        """Estimated peak memory of a learner whose micro-batches hold ``tokens`` padded cells."""
        per_token = max(self.token_bytes(), self.nograd_token_bytes())
        return RUNTIME_OVERHEAD_BYTES + self.static_bytes() + tokens * per_token

    def max_tokens(self, memory_bytes: float) -> int:
        """The largest micro-batch (padded tokens) whose :meth:`peak_bytes` fits ``memory_bytes`` (0: none)."""
        free = memory_bytes - self.peak_bytes(0)
        return max(int(free // max(self.token_bytes(), self.nograd_token_bytes())), 0)

    def describe(self, tokens: int) -> str:
        """The estimate of ``tokens`` in GiB with its parts, for messages."""
        return (f"{self.peak_bytes(tokens) / GIB:.1f} GiB = {self.static_bytes() / GIB:.2f} GiB weights, gradients "
                f"and AdamW state + {RUNTIME_OVERHEAD_BYTES / GIB:.2f} GiB runtime + {tokens} tokens x "
                f"{self.token_bytes() / 1024**2:.2f} MiB")


def default_memory_bytes(device_type: str = "cpu", cpu_learners: int = 1, device_index: int = 0) -> int:
    """``learner_memory_gib=None``: CPU_MEMORY_SHARE of this machine's RAM split over ``cpu_learners``, or on
    CUDA GPU_MEMORY_SHARE of the device's memory."""
    if device_type == "cuda":
        import torch

        return int(GPU_MEMORY_SHARE * torch.cuda.get_device_properties(device_index).total_memory)
    return int(CPU_MEMORY_SHARE * machine_memory_bytes() / max(cpu_learners, 1))


def machine_memory_bytes() -> int:
    """This machine's RAM (the one reading of it; tests set it to a machine size)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def resolve_token_budget(est: LearnerMemory, memory_bytes: float, longest_row: int, requested: int | None,
                         memory_text: str = "learner_memory_gib") -> int:
    """The micro-batch token budget: ``requested`` (max_tokens_per_micro_batch) if it fits, else for None the
    largest budget that fits ``memory_bytes`` (a multiple of BUDGET_STEP, at least ``longest_row``).

    Raises:
        ValueError: not even one row of ``longest_row`` tokens fits, or ``requested`` does not fit; the message
            names the setting, its value, the estimate and the fix.
    """
    fit = est.max_tokens(memory_bytes)
    fit = max(fit // BUDGET_STEP * BUDGET_STEP, longest_row) if fit >= longest_row else fit
    name, _, how = memory_text.partition(" ")
    over = f"over {name}={memory_bytes / GIB:.1f} GiB" + (f" {how}" if how else "")
    if requested is None:
        if fit < longest_row:
            raise ValueError(f"max_model_len={longest_row}: one row of {longest_row} tokens needs an estimated "
                             f"{est.describe(longest_row)}, {over}: {_fixes(est, memory_bytes, longest_row)}")
        return fit
    need = max(requested, longest_row)  # a longer row goes alone
    if est.peak_bytes(need) > memory_bytes:
        lower = f"lower max_tokens_per_micro_batch to {fit} or " if fit >= longest_row else ""
        raise ValueError(f"max_tokens_per_micro_batch={requested}: a micro-batch of {need} tokens needs an estimated "
                         f"{est.describe(need)}, {over}: {lower}{_fixes(est, memory_bytes, longest_row, need)}")
    return requested


def auto_checkpointing(est: LearnerMemory, setting: object, memory_bytes: float, longest_row: int) -> LearnerMemory:
    """The estimate with ``model_config['gradient_checkpointing']`` resolved: ``"auto"`` turns checkpointing on
    when one row of ``longest_row`` tokens does not fit ``memory_bytes`` without it and does with it (else the
    estimate stays as it is, and :func:`resolve_token_budget` names the fixes); True/False are kept as given."""
    if setting != "auto" or est.gradient_checkpointing or est.max_tokens(memory_bytes) >= longest_row:
        return est
    on = replace(est, gradient_checkpointing=True)
    return on if on.max_tokens(memory_bytes) >= longest_row else est


def auto_checkpointing_note(est: LearnerMemory, memory_bytes: float, longest_row: int, memory_text: str) -> str:
    """The one line that says ``"auto"`` turned gradient checkpointing on, and why."""
    off = replace(est, gradient_checkpointing=False).peak_bytes(longest_row) / GIB
    return (f"model_config['gradient_checkpointing']='auto': on, since one row of max_model_len={longest_row} tokens "
            f"needs an estimated {off:.1f} GiB without it and {est.peak_bytes(longest_row) / GIB:.1f} GiB with it, "
            f"within {memory_text.split(' ')[0]}={memory_bytes / GIB:.1f} GiB (set it to False, or lower "
            "max_model_len to the run's longest transcript, to train without recomputation)")


def _fixes(est: LearnerMemory, memory_bytes: float, longest_row: int, tokens: int | None = None) -> str:
    parts = []
    gc = replace(est, gradient_checkpointing=True).max_tokens(memory_bytes)
    if not est.gradient_checkpointing and gc >= longest_row:
        parts.append(f"set model_config['gradient_checkpointing']=True (then {gc} tokens fit)")
    rows = est.max_tokens(memory_bytes)
    if 0 < rows < longest_row:
        parts.append(f"lower max_model_len to {rows}")
    parts.append(f"raise learner_memory_gib to {est.peak_bytes(tokens or longest_row) / GIB + 0.05:.1f} or more")
    return " or ".join(parts)


def model_shape(name: str) -> ModelShape | None:
    """The shape of ``model_config['model']`` without loading weights: ``tiny:`` presets from their table (no
    build), anything else from ``config.json`` of the resolved directory or the Hugging Face cache (None: not
    readable here, e.g. an id not downloaded yet)."""
    from ragen_rllib.models.tiny import PRESETS, TINY_PREFIX, VOCAB_SIZE

    if name.startswith(TINY_PREFIX) and name[len(TINY_PREFIX):] in PRESETS:
        p = PRESETS[name[len(TINY_PREFIX):]]
        return ModelShape(layers=p.num_hidden_layers, hidden=p.hidden_size, intermediate=p.intermediate_size,
                          heads=p.num_attention_heads, kv_heads=p.num_key_value_heads,
                          head_dim=p.hidden_size // p.num_attention_heads, vocab=-(-VOCAB_SIZE // 64) * 64,
                          qkv_bias=True)
    from ragen_rllib.models.registry import resolve_model

    try:
        path = Path(resolve_model(name)).expanduser()
        if not path.is_dir():
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(name, "config.json")).parent
        return ModelShape.from_dir(path)
    except (OSError, ValueError, KeyError) as err:
        logger.warning("learner memory: no config.json for %r (%s); the check runs in the learner", name, err)
        return None


def config_estimate(config, shape: ModelShape) -> LearnerMemory:
    """The estimate's settings from a RagenConfig (model_config keys, KL reference), for ``shape``."""
    from ragen_rllib.core.device import planned_device_type
    from ragen_rllib.core.model_config import model_setting
    from ragen_rllib.core.precision import learner_weight_dtype, resolve_autocast

    mc = config.model_config or {}
    device = planned_device_type(config.num_gpus_per_learner)
    weight_bytes = {"float32": 4, "bfloat16": 2, "float16": 2}[learner_weight_dtype(model_setting(mc, "dtype"))]
    lora = model_setting(mc, "lora")
    params = shape.params
    trainable = shape.lora_params(lora) if lora else params
    return LearnerMemory(shape=shape, params=params + (trainable if lora else 0), trainable=trainable,
                         weight_bytes=weight_bytes,
                         autocast=resolve_autocast(model_setting(mc, "autocast"), device) is not None,
                         gradient_checkpointing=model_setting(mc, "gradient_checkpointing") is True,
                         logprob_chunk=int(model_setting(mc, "logprob_chunk") or 0),
                         reference_copy=bool(config.use_kl_loss or config.use_kl_in_reward) and not lora)


def learner_memory_bytes(config, device_type: str, device_index: int = 0) -> tuple[int, str]:
    """``learner_memory_gib`` in bytes (None: :func:`default_memory_bytes`) and how to name it in messages."""
    if config.learner_memory_gib is not None:
        return int(config.learner_memory_gib * GIB), "learner_memory_gib"
    cpu_learners = max(config.num_learners, 1) if device_type == "cpu" else 1
    share = f"{GPU_MEMORY_SHARE:.0%} of the GPU" if device_type == "cuda" else \
        f"{CPU_MEMORY_SHARE:.0%} of this machine's RAM / {cpu_learners} learner(s)"
    return default_memory_bytes(device_type, cpu_learners, device_index), f"learner_memory_gib (None: {share})"


def check_config(config) -> int | None:
    """The driver's check in ``RagenConfig.validate()``: the budget the learners will use, or ValueError if
    the configured model cannot train within ``learner_memory_gib``. None when the driver cannot tell (GPU
    learners seen from a driver without CUDA, an unreadable model config)."""
    from ragen_rllib.core.device import device_type, planned_device_type

    device = planned_device_type(config.num_gpus_per_learner)
    if device != device_type(config.num_gpus_per_learner):
        return None
    shape = model_shape(config.model_name)
    if shape is None:
        return None
    memory, text = learner_memory_bytes(config, device)
    setting = model_setting(config.model_config, "gradient_checkpointing")
    est = auto_checkpointing(config_estimate(config, shape), setting, memory, config.max_model_len)
    budget = resolve_token_budget(est, memory, config.max_model_len, config.max_tokens_per_micro_batch, text)
    if est.gradient_checkpointing and setting == "auto":
        logger.info("%s", auto_checkpointing_note(est, memory, config.max_model_len, text))
    return budget


def module_estimate(module, device, reference_copy: bool) -> LearnerMemory:
    """The estimate's settings from a built :class:`RagenTorchRLModule` on ``device`` (exact parameter counts)."""
    params = list(module.parameters())
    lm_config = module.lm.config.get_text_config() if module.lora is None else module.lm.get_base_model().config
    return LearnerMemory(shape=ModelShape.from_config(lm_config.to_dict()), params=sum(p.numel() for p in params),
                         trainable=sum(p.numel() for p in params if p.requires_grad),
                         weight_bytes=params[0].element_size() if params else 4,
                         autocast=module.autocast_dtype(device) is not None,
                         gradient_checkpointing=bool(getattr(module.lm, "is_gradient_checkpointing", False)),
                         logprob_chunk=module.logprob_chunk, reference_copy=reference_copy)


def learner_token_budget(module, config, device, reference_copy: bool) -> tuple[int, str]:
    """The learner's budget at build (:func:`resolve_token_budget` for its module on its device) and a line that
    says how it was chosen. ``gradient_checkpointing='auto'`` is resolved here (:func:`auto_checkpointing`) and
    switched on in ``module`` when it is needed."""
    import torch

    device = torch.device(device)
    est = module_estimate(module, device, reference_copy)
    memory, text = learner_memory_bytes(config, device.type, device.index or 0)
    resolved = auto_checkpointing(est, module.gradient_checkpointing, memory, config.max_model_len)
    if resolved is not est:
        module.enable_gradient_checkpointing()
        logger.info("%s", auto_checkpointing_note(resolved, memory, config.max_model_len, text))
    budget = resolve_token_budget(resolved, memory, config.max_model_len, config.max_tokens_per_micro_batch, text)
    how = "max_tokens_per_micro_batch" if config.max_tokens_per_micro_batch is not None else "automatic"
    return budget, f"{how}; {text}={memory / GIB:.1f} GiB, estimate {resolved.describe(budget)}"
