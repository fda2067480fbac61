"""The LLM policy as an RLlib RLModule: a Hugging Face causal LM (+ optional LoRA, + a value head).

``model_config`` keys (set through ``RagenConfig.rl_module(model_config=...)``):

- ``model``: Hugging Face id, local directory, or ``tiny:<preset>`` (the offline tiny model).
- ``dtype``: ``auto`` (default) | ``float32`` | ``bfloat16`` | ``float16`` — the module's weights (and optimizer
  state). ``auto`` is ``float32`` on every device: the learner keeps fp32 master weights, since bf16 weights
  would round away AdamW steps at small learning rates (a step of ~1e-6 relative vs bf16's ~4e-3 resolution);
  speed comes from ``autocast``. Engines resolve their own ``auto`` (:func:`ragen_rllib.core.precision.resolve_dtype`:
  bf16 on a CUDA device with bf16 support, else fp32) and cast the synced weights on load.
- ``lora``: ``None`` or a dict of ``peft.LoraConfig`` arguments (``r``, ``lora_alpha``, ``target_modules``...).
- ``value_head``: build a critic head (GAE); it never goes to env runners (``InferenceOnlyAPI``).
- ``temperature``: sampling temperature the log-probs are computed at (so they match the engine's).
- ``logprob_chunk``: ``0``/``None``: the model's full ``[B, T, V]`` logits; a positive number (default 256):
  token log-probs and entropies from the last hidden states without them
  (:func:`ragen_rllib.rl.logprobs.chunked_token_logprobs`; results equal the full pass): a linear LM head takes a
  fused step over vocabulary slices, any other head goes ``logprob_chunk`` positions at a time under activation
  checkpointing. Memory then scales with the hidden size, not the vocabulary. Models that post-process logits
  (``final_logit_softcapping``) always take the full pass.
- ``gradient_checkpointing``: ``"auto"`` (default) | ``True`` | ``False``. ``True`` recomputes each transformer
  block's activations in backward (Hugging Face's ``gradient_checkpointing_enable``): less memory for one more
  forward. ``"auto"``: the learner turns it on at build only when one row of ``max_model_len`` tokens would not
  fit ``learner_memory_gib`` without it (:func:`ragen_rllib.algorithms.ragen.memory.auto_checkpointing`), and
  logs one line saying so.
- ``share_prompt_prefix``: ``True`` (default): with ``logprob_chunk`` on and no gradient checkpointing, the
  prefix that every row of a forward pass shares (a group's prompt, the system text of all groups) is computed
  once when it is at least half the rows
  (:func:`~ragen_rllib.algorithms.ragen.torch.shared_prefix.shared_prefix_hidden`; equal to the plain
  pass up to rounding).
- ``autocast``: ``"auto"`` (default) | ``"bfloat16"`` | ``None``/``"none"``: run the learner's forward passes
  under bf16 autocast (weights and optimizer state stay in ``dtype``; ~1.5-2x faster on CPUs with
  AMX/AVX512-BF16 and on GPUs). ``auto`` (:func:`ragen_rllib.core.precision.resolve_autocast`) picks bf16 only where
  it is fast, else fp32; it is resolved lazily on the device of the input ids (cached per device type), since
  the module is built before RLlib moves it to the learner's device. An explicit ``"bfloat16"`` on a CPU
  without bf16 units (~70x slower matmuls) logs a warning once per process.

The module is never asked for actions: env runners sample with a generation engine and only receive the
weights. ``get_state`` keeps tensors in the model's dtype (RLlib's default converts to fp32 numpy), and
sends LoRA adapter weights only when LoRA is on.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override

from ragen_rllib.algorithms.ragen.torch.shared_prefix import shared_prefix_hidden
from ragen_rllib.core import keys as K
from ragen_rllib.rl.logprobs import chunked_token_logprobs, gather_token_logprobs, masked_token_logprobs
from ragen_rllib.rl.losses import entropy_from_logits

VALUE_HEAD = "value_head"  # attribute (and state-dict prefix) of the critic head
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: positions per chunk of vocabulary-sized logits in the learner's passes (model_config["logprob_chunk"])
DEFAULT_LOGPROB_CHUNK = 256


class RagenTorchRLModule(TorchRLModule, InferenceOnlyAPI):
    """Hugging Face causal LM policy with an optional value head (see the module docstring)."""

    framework = "torch"

    @override(TorchRLModule)
    def setup(self) -> None:
        from transformers import AutoModelForCausalLM

        from ragen_rllib.algorithms.ragen.memory import validate_checkpointing
        from ragen_rllib.core.precision import learner_weight_dtype, validate_autocast, validate_dtype
        from ragen_rllib.models.registry import resolve_model

        cfg = self.model_config or {}
        dtype_name, autocast = cfg.get("dtype", "auto"), cfg.get("autocast", "auto")
        validate_dtype(dtype_name, "model_config['dtype']")
        validate_autocast(autocast, "model_config['autocast']")
        #: The autocast setting; resolved per device type on the first forward pass there (see autocast_dtype).
        self.autocast = autocast
        self._autocast_dtypes: dict[str, torch.dtype | None] = {}
        # The device is not known here (RLlib's learner moves the module after building it): an explicit bf16 on a
        # CPU without bf16 units is warned about on the first forward pass there (autocast_dtype).
        dtype = DTYPES[learner_weight_dtype(dtype_name)]
        self.lm = AutoModelForCausalLM.from_pretrained(resolve_model(cfg["model"]), dtype=dtype)
        self.lora = cfg.get("lora")
        if self.lora:
            from peft import LoraConfig, get_peft_model

            self.lm = get_peft_model(self.lm, LoraConfig(task_type="CAUSAL_LM", **self.lora))
        self.temperature = float(cfg.get("temperature", 1.0))
        self.logprob_chunk = int(cfg.get("logprob_chunk", DEFAULT_LOGPROB_CHUNK) or 0)
        if self.logprob_chunk and getattr(self.lm.config.get_text_config(), "final_logit_softcapping", None):
            self.logprob_chunk = 0  # logits = lm_head(hidden) does not hold for it: the full pass
        #: the gradient_checkpointing setting ("auto" is resolved by the learner, see the module docstring)
        self.gradient_checkpointing = cfg.get("gradient_checkpointing", "auto")
        validate_checkpointing(self.gradient_checkpointing)
        self.share_prefix = bool(cfg.get("share_prompt_prefix", True))
        if self.gradient_checkpointing is True:
            self.enable_gradient_checkpointing()
        #: Whether the entropy output carries gradients; the learner turns it off when entropy_coeff is 0,
        #: so the entropy is then a metric computed without autograd (saves ~15% of a CPU update).
        self.entropy_requires_grad = True
        if cfg.get("value_head") and not self.inference_only:
            hidden = self.lm.config.get_text_config().hidden_size
            head = torch.nn.Linear(hidden, 1, dtype=dtype)
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)
            setattr(self, VALUE_HEAD, head)

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each transformer block's activations in backward (Hugging Face's checkpointing)."""
        self.lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if self.lora:
            self.lm.enable_input_require_grads()  # checkpointed blocks need an input that requires grad
        self.share_prefix = False  # a key/value cache does not go with activation checkpointing (HF turns it off)

    @property
    def has_value_head(self) -> bool:
        return hasattr(self, VALUE_HEAD)

    def autocast_dtype(self, device: torch.device | str) -> torch.dtype | None:
        """The autocast dtype of forward passes on ``device`` (None: fp32), resolved once per device type."""
        from ragen_rllib.core.precision import resolve_autocast, resolve_dtype

        kind = torch.device(device).type
        if kind not in self._autocast_dtypes:
            resolve_dtype((self.model_config or {}).get("dtype", "auto"), kind)  # the one slow-bf16 warning
            self._autocast_dtypes[kind] = resolve_autocast(self.autocast, kind)
        return self._autocast_dtypes[kind]

    # ------------------------------------------------------------------ forward
    @override(TorchRLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return self._forward_train(batch, **kwargs)

    @override(TorchRLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """Token log-probs (and values, entropy) of ``batch[INPUT_IDS]`` ``[B, T]``; all outputs ``[B, T]``.

        With ``batch[LOSS_MASK]`` (the learner's micro-batches and its no-grad pass always carry it) and
        ``logprob_chunk`` on, log-probs and entropies are computed at the masked tokens only and are 0 elsewhere
        (:func:`ragen_rllib.rl.logprobs.masked_token_logprobs`: the LM head skips the prompts); without it, at every
        position."""
        ids = batch[K.INPUT_IDS].long()
        amp = self.autocast_dtype(ids.device)
        entropy = kwargs.get("entropy", True)
        with torch.autocast(ids.device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            if self.logprob_chunk:  # logits a chunk of positions at a time (see chunked_token_logprobs)
                base = self.lm.get_base_model() if self.lora else self.lm
                if self.share_prefix:  # the rows' common prefix once (see shared_prefix.py)
                    hidden = shared_prefix_hidden(base.get_decoder(), ids)
                else:
                    hidden = base.get_decoder()(input_ids=ids).last_hidden_state
                head = base.get_output_embeddings()
                if K.LOSS_MASK in batch:  # the learner's passes: the head on the trained tokens only
                    logp, ent = masked_token_logprobs(hidden, head, ids, batch[K.LOSS_MASK], self.temperature,
                                                      chunk=self.logprob_chunk, entropy=entropy,
                                                      entropy_grad=self.entropy_requires_grad)
                else:
                    logp, ent = chunked_token_logprobs(hidden, head, ids, self.temperature, chunk=self.logprob_chunk,
                                                       entropy=entropy, entropy_grad=self.entropy_requires_grad)
                result = {K.LOGPROBS: logp}
                if entropy:
                    result[K.ENTROPY] = ent
            else:
                out = self.lm(input_ids=ids, output_hidden_states=self.has_value_head)
                hidden = out.hidden_states[-1] if self.has_value_head else None
                result = {K.LOGPROBS: gather_token_logprobs(out.logits, ids, self.temperature)}
                if entropy:
                    with torch.set_grad_enabled(torch.is_grad_enabled() and self.entropy_requires_grad):
                        result[K.ENTROPY] = _shifted_entropy(out.logits, self.temperature)
        if self.has_value_head:
            head = getattr(self, VALUE_HEAD)
            result[K.VALUES] = head(hidden.to(head.weight.dtype)).squeeze(-1).float()
        return result

    # ------------------------------------------------------------------ state
    @override(InferenceOnlyAPI)
    def get_non_inference_attributes(self) -> list[str]:
        return [VALUE_HEAD]

    @torch.no_grad()
    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The language model's weights with Hugging Face names (LoRA merged in), for generation engines.

        Without LoRA: the live tensors, detached (no copy). With LoRA: each adapted layer's ``W + delta`` as a
        new tensor, every other tensor live; the model itself is never modified (an in-place merge/unmerge
        per sync would copy every weight and drift the base weights by rounding).
        """
        if not self.lora:
            return {name: t.detach() for name, t in self.lm.state_dict().items()}
        from peft.tuners.lora import LoraLayer

        base = self.lm.get_base_model()
        merged = {}
        for prefix, layer in base.named_modules():
            if isinstance(layer, LoraLayer):
                weight = layer.get_base_layer().weight.detach()
                deltas = [layer.get_delta_weight(a) for a in layer.active_adapters if a in layer.lora_A]
                if deltas:  # one new tensor per layer: the first delta, with the weight and the others added
                    weight = deltas[0].to(weight.dtype).add_(weight)
                    for delta in deltas[1:]:
                        weight.add_(delta.to(weight.dtype))
                merged[f"{prefix}.weight"] = weight
        state = {}
        for name, tensor in base.state_dict().items():
            if "lora_" in name:
                continue
            name = name.replace(".base_layer", "")
            state[name] = merged.get(name, tensor.detach())
        return state

    @override(TorchRLModule)
    def get_state(self, components=None, *, not_components=None, inference_only: bool = False, **kwargs):
        """Tensors in the model's dtype (on CPU); LoRA adapters only when LoRA is on; no value head if
        inference_only."""
        state = {}
        if self.lora:
            from peft import get_peft_model_state_dict

            state.update({f"lm.{k}": v for k, v in get_peft_model_state_dict(self.lm).items()})
        else:
            state.update({f"lm.{k}": v for k, v in self.lm.state_dict().items()})
        if self.has_value_head and not inference_only:
            state.update({f"{VALUE_HEAD}.{k}": v for k, v in getattr(self, VALUE_HEAD).state_dict().items()})
        return {k: v.detach().cpu() for k, v in state.items()}

    @override(TorchRLModule)
    def set_state(self, state: dict[str, Any]) -> None:
        tensors = {k: torch.as_tensor(v) for k, v in state.items()}
        lm_state = {k[len("lm."):]: v for k, v in tensors.items() if k.startswith("lm.")}
        if self.lora:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.lm, lm_state)
        else:
            self.lm.load_state_dict(lm_state, strict=True)
        head = {k[len(VALUE_HEAD) + 1:]: v for k, v in tensors.items() if k.startswith(VALUE_HEAD + ".")}
        if head and self.has_value_head:
            getattr(self, VALUE_HEAD).load_state_dict(head)



def _shifted_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Entropy of the distribution that produced token t (``[B, T]``, 0 at t = 0), like the log-probs."""
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    return torch.nn.functional.pad(entropy_from_logits(logits[:, :-1]), (1, 0), value=0.0)
