"""Offline tiny models: a BPE tokenizer trained on environment text and small Qwen2 causal LMs.

No model hub is needed: ``build_model("nano", out_dir)`` writes a directory that loads with
``AutoTokenizer``/``AutoModelForCausalLM`` and with ``vllm.LLM``. Everywhere a model is taken, the name
``tiny:<preset>`` resolves (through :func:`ragen_rllib.models.registry.resolve_model`) to a cached build of that
preset.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ragen_rllib.models.corpus import FORMAT_TOKENS, training_corpus

#: Bump when the tokenizer corpus, templates or presets change (invalidates cached builds).
BUILD_VERSION = "2"
TINY_PREFIX = "tiny:"
#: Environment variable naming the cache directory for built models.
CACHE_ENV = "RAGEN_RLLIB_CACHE"

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 3072  # BPE target vocabulary (byte-level, so any text encodes without <unk>)


@dataclass(frozen=True)
class TinyPreset:
    """Shape of a tiny Qwen2 model. ``hidden_size / num_attention_heads`` must be a vLLM-CPU head size."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int = 4096


PRESETS: dict[str, TinyPreset] = {
    # ~0.3M parameters: unit tests.
    "nano": TinyPreset(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                       intermediate_size=128),
    # ~7M parameters: demos and benchmarks.
    "small": TinyPreset(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=1024),
}


def _check_preset(preset: str) -> TinyPreset:
    if preset not in PRESETS:
        raise ValueError(f"preset={preset!r} is unknown; use one of {sorted(PRESETS)}")
    return PRESETS[preset]


def build_tokenizer():
    """Train the byte-level BPE tokenizer on generated env/prompt text (deterministic, ~seconds)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.add_tokens(list(FORMAT_TOKENS))  # <think> </think> <answer> </answer> as single, non-special tokens
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 4096
    return fast


def build_model(preset: str, out_dir: str | os.PathLike, seed: int = 0) -> Path:
    """Build the tokenizer and a randomly initialised tiny Qwen2 model; ``save_pretrained`` both to out_dir."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = _check_preset(preset)
    out = Path(out_dir)
    tokenizer = build_tokenizer()
    vocab = -(-len(tokenizer) // 64) * 64
    config = Qwen2Config(
        vocab_size=vocab,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        rope_theta=10000.0,
        torch_dtype="float32",
        **asdict(shape),
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "ragen_tiny.json").write_text(json.dumps({"preset": preset, "seed": seed, "version": BUILD_VERSION}))
    return out


def cache_dir() -> Path:
    """Where built models are cached: ``$RAGEN_RLLIB_CACHE`` or ``~/.cache/ragen_rllib``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ragen_rllib")


def tiny_model_path(preset: str = "nano", seed: int = 0, root: str | os.PathLike | None = None) -> Path:
    """Path of a cached build of ``preset`` (built once, safely under concurrent callers)."""
    from filelock import FileLock

    _check_preset(preset)
    key = hashlib.sha256(f"{BUILD_VERSION}:{preset}:{seed}:{PRESETS[preset]}".encode()).hexdigest()[:12]
    base = Path(root) if root is not None else cache_dir()
    target = base / "models" / f"tiny-{preset}-{key}"
    if (target / "ragen_tiny.json").exists():
        return target
    base.mkdir(parents=True, exist_ok=True)
    with FileLock(str(base / f".tiny-{preset}-{key}.lock")):
        if not (target / "ragen_tiny.json").exists():
            tmp = Path(tempfile.mkdtemp(prefix=f"tiny-{preset}-", dir=base))
            try:
                build_model(preset, tmp, seed=seed)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return target
