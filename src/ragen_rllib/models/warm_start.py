"""Supervised warm start of a model on oracle demonstrations, plus the acceptance rollout.

``ragen-rllib make-model --preset small --out DIR --warm-start FrozenLake`` runs :func:`warm_start`:
demonstrations in the exact rollout transcript format (:mod:`ragen_rllib.models.demonstrations`), SFT with the
loss on assistant tokens only (:func:`ragen_rllib.models.sft.sft_train`), the weights saved back to DIR, then
a rollout with the Hugging Face engine on FrozenLake-4x4 (non-slippery) that reports parse rate and success.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ragen_rllib.agent.config import AgentConfig

#: Acceptance rollout defaults: env, its config and seeds (RAGEN validates on seed 123 onwards, temperature 0.5).
EVAL_ENV = "ragen/FrozenLake-v0"
EVAL_ENV_CONFIG = {"size": 4, "is_slippery": False}
EVAL_SEED = 123
REPORT_FILE = "warm_start.json"


@dataclass(frozen=True)
class WarmStartConfig:
    """Settings of a warm start.

    Attributes:
        envs: env ids or short names (``FrozenLake``) to demonstrate.
        env_configs: env_config per env id or short name (default: each env's defaults).
        episodes_per_env: demonstration episodes per env (None: the default below).
        epochs: SFT epochs over the demonstrations (None: the default below).
        seed: seed of demonstrations, shuffling and the evaluation sampling.
        noise: probability a demonstrated action is random instead of the oracle's.
        lr: peak AdamW learning rate (cosine decay).
        batch_size: samples per optimizer step.
        autocast: ``"auto"`` | ``"bfloat16"`` | None/``"none"``: bfloat16 autocast of the SFT forward passes
            (fp32 master weights; saved weights stay fp32), resolved per machine by :mod:`ragen_rllib.precision`
            (``"auto"``: bf16 only on CUDA with bf16 or CPUs with AVX512-BF16/AMX, else fp32).
        eval_episodes: episodes of the acceptance rollout.
        eval_env: env id or short name of the acceptance rollout (default FrozenLake-4x4, non-slippery).
        eval_env_config: its env_config (None: ``EVAL_ENV_CONFIG`` for the default env, else the env's defaults).
        eval_temperature: sampling temperature of the acceptance rollout (RAGEN validation: 0.5).
        agent: the agent layer settings shared by demonstrations and the rollout.
    """

    envs: tuple[str, ...] = ("FrozenLake",)
    env_configs: dict[str, dict] = field(default_factory=dict)
    episodes_per_env: int | None = None
    epochs: int | None = None
    seed: int = 0
    noise: float = 0.15
    lr: float = 2e-3
    batch_size: int = 8
    autocast: str | None = "auto"
    eval_episodes: int = 64
    eval_env: str = EVAL_ENV
    eval_env_config: dict | None = None
    eval_temperature: float = 0.5
    agent: AgentConfig = field(default_factory=AgentConfig)

    DEFAULT_EPISODES = 640  # per env (small preset: ~4 min of SFT on 2 CPU cores)
    DEFAULT_EPOCHS = 2

    def __post_init__(self) -> None:
        from ragen_rllib.precision import validate_autocast

        validate_autocast(self.autocast, "WarmStartConfig.autocast")

    def resolved(self) -> WarmStartConfig:
        from dataclasses import replace

        return replace(self, episodes_per_env=self.episodes_per_env or self.DEFAULT_EPISODES,
                       epochs=self.epochs or self.DEFAULT_EPOCHS)


@dataclass
class WarmStartReport:
    """What a warm start did and how the model does afterwards."""

    envs: list[str]
    demo_episodes: int
    samples: int
    trained_tokens: int
    steps: int
    first_loss: float
    last_loss: float
    train_seconds: float
    eval: dict[str, float] = field(default_factory=dict)
    eval_seconds: float = 0.0
    eval_env: str = EVAL_ENV
    eval_env_config: dict = field(default_factory=lambda: dict(EVAL_ENV_CONFIG))
    precision: str = "float32"  # what the SFT forward passes ran in: "bfloat16" (autocast) or "float32"
    cpu: dict = field(default_factory=dict)  # ragen_rllib.precision.cpu_info() of the machine that trained

    def summary(self) -> str:
        lines = [
            f"warm start on {', '.join(self.envs)}: {self.demo_episodes} demonstration episodes, {self.samples} "
            f"samples, {self.trained_tokens} trained tokens, {self.steps} steps in {self.train_seconds:.0f} s; "
            f"loss {self.first_loss:.3f} -> {self.last_loss:.3f} ({self.precision}"
            f"{' autocast' if self.precision == 'bfloat16' else ''} on {self.cpu.get('model') or 'this CPU'})",
        ]
        if self.eval:
            lines.append(
                f"acceptance rollout ({self.eval_env} {self.eval_env_config}, HF engine, {self.eval_seconds:.0f} s): "
                f"turns parsed {self.eval['format_ok']:.1%}, success {self.eval['success']:.1%}"
            )
        return "\n".join(lines)


def warm_start(model_dir: str | Path, cfg: WarmStartConfig, evaluate: bool = True,
               progress: bool = True) -> WarmStartReport:
    """Warm-start the model saved in ``model_dir`` in place and return the report (also saved as JSON there)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.envs.catalog import resolve_env_id
    from ragen_rllib.models.demonstrations import DemoPolicy, demonstrations
    from ragen_rllib.models.sft import sft_train
    from ragen_rllib.precision import cpu_info, resolve_autocast

    cfg = cfg.resolved()
    env_ids = [resolve_env_id(e) for e in cfg.envs]
    model_dir = Path(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    chat = ChatFormat(tokenizer, prefill=generation_prefill(cfg.agent))
    env_configs = {resolve_env_id(name): dict(conf) for name, conf in cfg.env_configs.items()}
    episodes = list(demonstrations(env_ids, chat, cfg.agent, DemoPolicy(noise=cfg.noise), cfg.episodes_per_env,
                                   cfg.seed, env_configs=env_configs))
    samples = [{"input_ids": s.input_ids, "loss_mask": s.loss_mask} for ep in episodes for s in ep.samples()]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    amp = resolve_autocast(cfg.autocast, next(model.parameters()).device)
    precision = "bfloat16" if amp is not None else "float32"
    start = time.perf_counter()
    losses = sft_train(model, samples, pad_id=tokenizer.pad_token_id, lr=cfg.lr, epochs=cfg.epochs,
                       batch_size=cfg.batch_size, seed=cfg.seed, progress=progress,
                       autocast="bfloat16" if amp is not None else None)
    report = WarmStartReport(
        envs=env_ids, demo_episodes=len(episodes), samples=len(samples),
        trained_tokens=sum(sum(s["loss_mask"]) for s in samples), steps=len(losses),
        first_loss=losses[0], last_loss=losses[-1], train_seconds=time.perf_counter() - start,
        precision=precision, cpu=cpu_info(),
    )
    model.save_pretrained(model_dir, safe_serialization=True)
    if evaluate:
        start = time.perf_counter()
        report.eval = evaluate_model(model, tokenizer, cfg)
        report.eval_seconds = time.perf_counter() - start
        report.eval_env, report.eval_env_config = eval_env(cfg)
    (model_dir / REPORT_FILE).write_text(json.dumps({"config": _jsonable(cfg), "report": asdict(report)}, indent=2))
    return report


def evaluate_model(model, tokenizer, cfg: WarmStartConfig) -> dict[str, float]:
    """Acceptance rollout with the Hugging Face engine: RAGEN's episode metrics averaged over episodes."""
    import gymnasium as gym

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.agent.rollout import rollout, summarize
    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.engines.hf_engine import HFEngine

    engine = HFEngine(model, tokenizer)
    chat = ChatFormat(tokenizer, prefill=generation_prefill(cfg.agent))
    env_id, env_config = eval_env(cfg)
    envs = [gym.make(env_id, **env_config) for _ in range(cfg.eval_episodes)]
    seeds = [EVAL_SEED + i for i in range(cfg.eval_episodes)]
    sampling = SamplingConfig(temperature=cfg.eval_temperature, seed=cfg.seed)
    return summarize(rollout(engine, chat, envs, seeds, cfg.agent, sampling))


def eval_env(cfg: WarmStartConfig) -> tuple[str, dict]:
    """The acceptance rollout's env id and env_config."""
    from ragen_rllib.envs.catalog import resolve_env_id

    env_id = resolve_env_id(cfg.eval_env)
    default = EVAL_ENV_CONFIG if env_id == EVAL_ENV else {}
    return env_id, dict(default if cfg.eval_env_config is None else cfg.eval_env_config)


def _jsonable(cfg: WarmStartConfig) -> dict:
    out = asdict(cfg)
    out["envs"] = list(cfg.envs)
    return out
