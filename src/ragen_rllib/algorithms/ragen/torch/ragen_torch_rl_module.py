"""The LLM policy as an RLlib RLModule: a Hugging Face causal LM (+ optional LoRA, + a value head).

``model_config`` keys (set through ``RagenConfig.rl_module(model_config=...)``): declared, with defaults, allowed
values and meanings, in :data:`ragen_rllib.core.model_config.MODEL_SETTINGS` (listed in docs/reference.md). The
learner keeps fp32 master weights under ``dtype="auto"``; bf16 compute comes from ``autocast``, resolved lazily on
the device of the input ids (cached per device type), since the module is built before RLlib moves it to the
learner's device.

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


class RagenTorchRLModule(TorchRLModule, InferenceOnlyAPI):
    """Hugging Face causal LM policy with an optional value head (see the module docstring)."""

    framework = "torch"

    @override(TorchRLModule)
    def setup(self) -> None:
        from transformers import AutoModelForCausalLM

        from ragen_rllib.core.model_config import model_setting, validate_model_config
        from ragen_rllib.core.precision import learner_weight_dtype
        from ragen_rllib.models.registry import resolve_model

        cfg = self.model_config or {}
        validate_model_config(cfg)
        dtype_name, autocast = model_setting(cfg, "dtype"), model_setting(cfg, "autocast")
        #: The autocast setting; resolved per device type on the first forward pass there (see autocast_dtype).
        self.autocast = autocast
        self._autocast_dtypes: dict[str, torch.dtype | None] = {}
        # The device is not known here (RLlib's learner moves the module after building it): an explicit bf16 on a
        # CPU without bf16 units is warned about on the first forward pass there (autocast_dtype).
        dtype = DTYPES[learner_weight_dtype(dtype_name)]
        self.lm = AutoModelForCausalLM.from_pretrained(resolve_model(model_setting(cfg, "model")), dtype=dtype)
        self.lora = model_setting(cfg, "lora")
        if self.lora:
            from peft import LoraConfig, get_peft_model

            self.lm = get_peft_model(self.lm, LoraConfig(task_type="CAUSAL_LM", **self.lora))
        self.temperature = float(model_setting(cfg, "temperature") or 1.0)
        self.logprob_chunk = int(model_setting(cfg, "logprob_chunk") or 0)
        if self.logprob_chunk and getattr(self.lm.config.get_text_config(), "final_logit_softcapping", None):
            self.logprob_chunk = 0  # logits = lm_head(hidden) does not hold for it: the full pass
        #: the gradient_checkpointing setting ("auto" is resolved by the learner, see the module docstring)
        self.gradient_checkpointing = model_setting(cfg, "gradient_checkpointing")
        self.share_prefix = model_setting(cfg, "share_prompt_prefix")
        if self.gradient_checkpointing is True:
            self.enable_gradient_checkpointing()
        #: Whether the entropy output carries gradients; the learner turns it off when entropy_coeff is 0,
        #: so the entropy is then a metric computed without autograd (a cheaper update).
        self.entropy_requires_grad = True
        if model_setting(cfg, "value_head") and not self.inference_only:
            hidden = self.lm.config.get_text_config().hidden_size
            head = torch.nn.Linear(hidden, 1, dtype=dtype)
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)
            setattr(self, VALUE_HEAD, head)
        #: whether the value head's input is detached (its loss then never reaches the backbone)
        self.detach_value_head = bool(model_setting(cfg, "detach_value_head"))

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
        from ragen_rllib.core.model_config import model_setting
        from ragen_rllib.core.precision import resolve_autocast, resolve_dtype

        kind = torch.device(device).type
        if kind not in self._autocast_dtypes:
            resolve_dtype(model_setting(self.model_config, "dtype"), kind)  # the one slow-bf16 warning
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
            if self.detach_value_head:
                hidden = hidden.detach()
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
