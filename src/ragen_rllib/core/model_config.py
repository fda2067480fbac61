"""The model settings (``RagenConfig.rl_module(model_config=...)``): every key with its default, its allowed values
and its meaning in one declaration (:data:`MODEL_SETTINGS`), one validator (:func:`validate_model_config`) and one
reader (:func:`model_setting`). The learner's module, the memory estimate, the env runners' engines and
``docs/reference.md`` all read them from here."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragen_rllib.core.precision import AUTOCAST_VALUES, DTYPE_VALUES, validate_autocast, validate_dtype

#: ``model`` when none is given: the offline tiny model.
DEFAULT_MODEL = "tiny:small"
#: ``gradient_checkpointing`` values; ``"auto"`` turns it on only where one row needs it.
CHECKPOINTING_VALUES = (True, False, "auto")


def validate_checkpointing(value: object, key: str = "model_config['gradient_checkpointing']") -> None:
    """Raise ValueError naming ``key``, the value and the allowed values unless ``value`` is one of them."""
    if not (isinstance(value, bool) or value == "auto"):
        raise ValueError(f"{key}={value!r} is invalid: use one of {CHECKPOINTING_VALUES} ('auto': on only where one "
                         "row of max_model_len tokens does not fit learner_memory_gib without it)")


def _positive_or_off(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class ModelSetting:
    """One ``model_config`` key: its default, its meaning, and what it accepts: a ``validator`` (raises
    ValueError naming the key) or an ``accepts`` test with the ``expected`` text for the error."""

    default: Any
    meaning: str
    validator: Callable[[Any, str], None] | None = None
    accepts: Callable[[Any], bool] | None = None
    expected: str = ""  # the values it takes, in words (the reference page and ``accepts``' error)

    def check(self, key: str, value: Any) -> None:
        """ValueError naming ``model_config[key]``, the value and what to use, unless the value is accepted."""
        if self.validator is not None:
            self.validator(value, f"model_config[{key!r}]")
        elif self.accepts is not None and not self.accepts(value):
            raise ValueError(f"model_config[{key!r}]={value!r} is invalid: use {self.expected}")


MODEL_SETTINGS: dict[str, ModelSetting] = {
    "model": ModelSetting(
        DEFAULT_MODEL, "Hugging Face id, local directory, `gguf:<name>` or `tiny:<preset>` (the offline tiny model)",
        accepts=lambda v: isinstance(v, str) and bool(v), expected="a model name or directory (a non-empty string)"),
    "dtype": ModelSetting(
        "auto", "the module's weights and optimizer state. `auto` is float32 on every device: the learner keeps "
        "fp32 master weights, since bf16 weights round away small AdamW steps; speed comes from `autocast`. "
        "Engines resolve their own `auto` (bf16 where the learner computes in bf16) and cast the synced weights "
        "on load", validator=validate_dtype, expected=f"one of {DTYPE_VALUES}"),
    "autocast": ModelSetting(
        "auto", "run the learner's forward passes under bf16 autocast (weights stay in `dtype`). `auto` picks "
        "bf16 only where it is fast (a CUDA GPU with bf16, a CPU with AVX512-BF16/AMX), else fp32; resolved on "
        "the device of the first forward pass. An explicit `bfloat16` on a CPU without bf16 units warns once",
        validator=validate_autocast, expected=f"one of {AUTOCAST_VALUES}"),
    "lora": ModelSetting(
        None, "None, or a dict of `peft.LoraConfig` arguments (`r`, `lora_alpha`, `target_modules`...)",
        accepts=lambda v: v is None or isinstance(v, Mapping), expected="None or a dict of peft.LoraConfig arguments"),
    "value_head": ModelSetting(
        None, "build a critic head (GAE); it never goes to env runners. None: the estimator's need for a critic",
        accepts=lambda v: v is None or isinstance(v, bool), expected="True, False or None"),
    "detach_value_head": ModelSetting(
        False, "True: the value head reads the backbone's hidden states detached, so the value loss trains the head "
        "only and never moves the policy's weights (as RAGEN's separate critic model cannot). False: the value "
        "loss's gradient also flows into the shared backbone", accepts=lambda v: isinstance(v, bool),
        expected="True or False"),
    "temperature": ModelSetting(
        None, "the sampling temperature the log-probs are computed at, so they match the engine's. None: "
        "`train_temperature`", accepts=lambda v: v is None or _number(v), expected="a positive number or None"),
    "logprob_chunk": ModelSetting(
        256, "0/None: the model's full [B, T, V] logits; a positive number: token log-probs and entropies from the "
        "last hidden states, the vocabulary (or the positions, for a non-linear head) a slice at a time; results "
        "equal the full pass and memory scales with the hidden size, not the vocabulary. Models that post-process "
        "logits (`final_logit_softcapping`) always take the full pass",
        accepts=_positive_or_off, expected="0, None or a positive integer"),
    "gradient_checkpointing": ModelSetting(
        "auto", "recompute each transformer block's activations in backward: less memory for one more forward. "
        "`auto`: on at build only when one row of `max_model_len` tokens would not fit `learner_memory_gib` "
        "without it, with one line saying so", validator=validate_checkpointing,
        expected=f"one of {CHECKPOINTING_VALUES}"),
    "share_prompt_prefix": ModelSetting(
        True, "with `logprob_chunk` on and no gradient checkpointing, the prefix every row of a forward pass shares "
        "is computed once when it is at least half the rows (equal to the plain pass up to rounding)",
        accepts=lambda v: isinstance(v, bool), expected="True or False"),
}


def model_setting(model_config: Mapping[str, Any] | None, key: str) -> Any:
    """``model_config[key]``, else the key's declared default."""
    return (model_config or {}).get(key, MODEL_SETTINGS[key].default)


def validate_model_config(model_config: Mapping[str, Any] | None) -> None:
    """ValueError for the first unknown key (with the nearest known one) or bad value, naming key, value and fix."""
    for key, value in (model_config or {}).items():
        if key not in MODEL_SETTINGS:
            close = difflib.get_close_matches(str(key), list(MODEL_SETTINGS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"model_config[{key!r}] is not a model setting{hint}: use the keys "
                             f"{sorted(MODEL_SETTINGS)} (docs/reference.md)")
        MODEL_SETTINGS[key].check(key, value)
