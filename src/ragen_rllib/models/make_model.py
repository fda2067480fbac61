"""``ragen-rllib make-model``: write a model into a directory (a tiny preset built from scratch, a GGUF file
converted, or a copy of a named model) and optionally warm-start it by SFT on oracle demonstrations. Every input
is checked before anything is built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def make_model(out: str | Path, *, preset: str = "small", model: str | None = None, from_gguf: str | None = None,
               seed: int = 0, warm_start_envs: Sequence[str] = (), episodes: int | None = None,
               epochs: int | None = None, noise: float | None = None, eval_episodes: int = 64,
               eval_env: str | None = None, autocast: str | None = "auto", lr: float | None = None,
               batch_size: int | None = None, agent: Mapping[str, Any] | None = None, evaluate: bool = True,
               log=print) -> Path:
    """The model directory ``out``; ``warm_start_envs`` (env ids, short names or RAGEN tags) warm-start it
    (:class:`~ragen_rllib.models.warm_start.WarmStartConfig` holds every other setting's meaning and default)."""
    from ragen_rllib.agent.config import AgentConfig
    from ragen_rllib.models.warm_start import WarmStartConfig, resolve_env

    names = list(warm_start_envs)
    for name in names + ([eval_env] if eval_env else []):  # fail before building anything
        resolve_env(name)
    if noise is not None and not 0.0 <= noise <= 1.0:
        raise ValueError(f"--noise={noise} is not a probability; pass a value in [0, 1]")
    agent_cfg = AgentConfig.from_dict(dict(agent or {}))
    ws_cfg = None
    if names:
        given = {} if noise is None else {"noise": noise}  # None: WarmStartConfig's default
        ws_cfg = WarmStartConfig(envs=tuple(names), episodes_per_env=episodes, epochs=epochs, seed=seed,
                                 eval_episodes=eval_episodes, autocast=autocast, lr=lr, batch_size=batch_size,
                                 eval_env=eval_env, agent=agent_cfg, **given)
    path = base_model(out, preset=preset, model=model, from_gguf=from_gguf, seed=seed)
    if ws_cfg is not None:
        from ragen_rllib.models.warm_start import warm_start

        source = model or (from_gguf and Path(from_gguf).name) or None  # None: from scratch
        log(warm_start(path, ws_cfg, evaluate=evaluate, base_model=source).summary())
    log(f"model saved to {path}")
    return path


def base_model(out: str | Path, *, preset: str, model: str | None, from_gguf: str | None, seed: int) -> Path:
    """Write the model to warm-start into ``out``: a GGUF file converted, a copy of a named model (``gguf:...``, a
    Hugging Face id or directory), or else the tiny ``preset`` built from scratch."""
    if from_gguf:
        from ragen_rllib.models.gguf import convert_gguf, gguf_source

        return convert_gguf(gguf_source(from_gguf), out)
    if model:
        from ragen_rllib.models.registry import model_problem, resolve_model

        problem = model_problem(model)
        if problem:
            raise ValueError(f"--model {model}: {problem}")
        source = Path(resolve_model(model))
        if source.is_dir():
            import shutil

            shutil.copytree(source, out, dirs_exist_ok=True)
        else:  # a Hugging Face id: load and save
            from transformers import AutoModelForCausalLM, AutoTokenizer

            AutoModelForCausalLM.from_pretrained(str(source)).save_pretrained(out)
            AutoTokenizer.from_pretrained(str(source)).save_pretrained(out)
        return Path(out)
    from ragen_rllib.models.tiny import build_model

    return build_model(preset, out, seed=seed)
