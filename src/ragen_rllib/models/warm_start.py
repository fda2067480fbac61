"""Supervised warm start of a model on oracle demonstrations, plus the acceptance rollout.

``ragen-rllib make-model --preset small --out DIR --warm-start FrozenLake`` (a tiny model built from scratch) and
``ragen-rllib make-model --model gguf:smollm2-135m-instruct --out DIR --warm-start SimpleSokoban`` (a pretrained
model) run :func:`warm_start`: demonstrations in the exact rollout transcript format
(:mod:`ragen_rllib.models.demonstrations`), SFT with the loss on assistant tokens only
(:func:`ragen_rllib.models.sft.sft_train`), the weights saved back to DIR, then an acceptance rollout with the
Hugging Face engine (FrozenLake-4x4 non-slippery for FrozenLake, else the first warm-start env) that reports parse
rate and success. Envs are given by id, short name (``FrozenLake``) or RAGEN tag (``SimpleSokoban``); a turn-based
multi-agent env is given by import path (``ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv``): its demonstrations
are noisy-oracle games against a fixed opponent (:mod:`ragen_rllib.models.multi_agent_demos`) and its acceptance
rollout is the model against that opponent (:func:`ragen_rllib.models.versus.play_against`, as ``x`` or the first
side).
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
TINY_MARKER = "ragen_tiny.json"  # written by ragen_rllib.models.tiny.build_model: a model built from scratch


@dataclass(frozen=True)
class WarmStartConfig:
    """Settings of a warm start.

    Attributes:
        envs: env ids, short names (``FrozenLake``), RAGEN tags (``SimpleSokoban``) or import paths of turn-based
            multi-agent envs (``ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv``) to demonstrate.
        env_configs: env_config per env id, short name or tag (default: each env's defaults, or the tag's).
        episodes_per_env: demonstration episodes per env (None: the default below).
        epochs: SFT epochs over the demonstrations (None: the default below).
        seed: seed of demonstrations, shuffling and the evaluation sampling.
        noise: probability a demonstrated action is random instead of the oracle's.
        lr: peak AdamW learning rate (cosine decay); None: ``LR_FROM_SCRATCH`` for a model built from scratch
            (``tiny:`` presets), ``LR_PRETRAINED`` for a pretrained one.
        batch_size: samples per optimizer step (None: ``BATCH_FROM_SCRATCH`` / ``BATCH_PRETRAINED``).
        autocast: ``"auto"`` | ``"bfloat16"`` | None/``"none"``: bfloat16 autocast of the SFT forward passes
            (fp32 master weights; saved weights stay fp32), resolved per machine by :mod:`ragen_rllib.core.precision`
            (``"auto"``: bf16 only on CUDA with bf16 or CPUs with AVX512-BF16/AMX, else fp32).
        eval_episodes: episodes of the acceptance rollout.
        eval_env: env id, short name or tag of the acceptance rollout (None: FrozenLake-4x4 non-slippery when
            FrozenLake is among the warm-start envs, else the first warm-start env with its config).
        eval_env_config: its env_config (None: ``EVAL_ENV_CONFIG`` for the default env, else the env's defaults).
        eval_temperature: sampling temperature of the acceptance rollout (RAGEN validation: 0.5).
        agent: the agent layer settings shared by demonstrations and the rollout.
        sides: multi-agent envs: the agents the model plays in each demonstration game, cycled (None: every
            agent, self-play); the acceptance rollout plays the first side's first agent.
        opponent: multi-agent envs: the fixed opponent (``env.opponent_action``) of the agents it does not play.
        agent_noise: multi-agent envs: noise per agent, overriding ``noise`` for the agents it names.
        warmup_steps: SFT steps of linear learning-rate warm-up before the cosine decay (0: none).
        batching: how SFT groups samples into steps: ``"length"`` (similar lengths, little padding) or
            ``"random"`` (uniform draws; where a sample's length goes with its target, as with a verdict that ends
            a game, length batches give steps whose targets are alike; see :func:`ragen_rllib.models.sft.plan_batches`).
    """

    envs: tuple[str, ...] = ("FrozenLake",)
    env_configs: dict[str, dict] = field(default_factory=dict)
    episodes_per_env: int | None = None
    epochs: int | None = None
    seed: int = 0
    noise: float = 0.15
    lr: float | None = None
    batch_size: int | None = None
    autocast: str | None = "auto"
    eval_episodes: int = 64
    eval_env: str | None = None
    eval_env_config: dict | None = None
    eval_temperature: float = 0.5
    agent: AgentConfig = field(default_factory=AgentConfig)
    sides: tuple[tuple[str, ...], ...] | None = None
    opponent: str = "random"
    agent_noise: dict[str, float] | None = None
    warmup_steps: int = 0
    batching: str = "length"

    DEFAULT_EPISODES = 640  # per env
    DEFAULT_EPOCHS = 2
    LR_FROM_SCRATCH = 2e-3  # the tiny presets (random weights) need a high rate to learn the format
    LR_PRETRAINED = 2e-5  # a pretrained model: 2e-3 destroys it (SmolLM2-135M learns the format at 2e-5)
    BATCH_FROM_SCRATCH = 8
    BATCH_PRETRAINED = 4

    def __post_init__(self) -> None:
        from ragen_rllib.core.precision import validate_autocast
        from ragen_rllib.models.sft import validate_batching

        validate_autocast(self.autocast, "WarmStartConfig.autocast")
        validate_batching(self.batching, "WarmStartConfig.batching")

    def resolved(self, pretrained: bool = False) -> WarmStartConfig:
        """Every None replaced by its default (``pretrained``: the model was not built from scratch)."""
        from dataclasses import replace

        lr = self.LR_PRETRAINED if pretrained else self.LR_FROM_SCRATCH
        batch = self.BATCH_PRETRAINED if pretrained else self.BATCH_FROM_SCRATCH
        return replace(self, episodes_per_env=self.episodes_per_env or self.DEFAULT_EPISODES,
                       epochs=self.epochs or self.DEFAULT_EPOCHS, lr=self.lr or lr,
                       batch_size=self.batch_size or batch)


@dataclass
class WarmStartReport:
    """What a warm start did (on which base model, with which data, steps, precision and CPU) and how the model
    does afterwards (the acceptance rollout)."""

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
    eval_env: str = ""
    eval_env_config: dict = field(default_factory=dict)
    precision: str = "float32"  # what the SFT forward passes ran in: "bfloat16" (autocast) or "float32"
    cpu: dict = field(default_factory=dict)  # ragen_rllib.core.precision.cpu_info() of the machine that trained
    base_model: str = ""  # what was warm-started: "from scratch" (tiny preset) or the model's name
    lr: float = 0.0
    batch_size: int = 0

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
               progress: bool = True, base_model: str | None = None) -> WarmStartReport:
    """Warm-start the model saved in ``model_dir`` in place and return the report (also saved as JSON there).
    ``base_model``: the name the report gives the model it started from (None: "from scratch" for a tiny build,
    else the directory's name)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_rllib.agent.chat_format import ChatFormat
    from ragen_rllib.agent.prompts import generation_prefill
    from ragen_rllib.core.precision import cpu_info, resolve_autocast
    from ragen_rllib.envs.loading import make_env
    from ragen_rllib.models.demonstrations import DemoPolicy, demonstrations
    from ragen_rllib.models.multi_agent_demos import MultiAgentDemoPolicy, demo_samples, multi_agent_demonstrations
    from ragen_rllib.models.sft import sft_train

    model_dir = Path(model_dir)
    from_scratch = (model_dir / TINY_MARKER).exists()
    cfg = cfg.resolved(pretrained=not from_scratch)
    env_ids, env_configs = resolve_envs(cfg)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    chat = ChatFormat(tokenizer, prefill=generation_prefill(cfg.agent))
    single = [e for e in env_ids if not _multi_agent(e)]
    episodes = list(demonstrations(single, chat, cfg.agent, DemoPolicy(noise=cfg.noise), cfg.episodes_per_env,
                                   cfg.seed, env_configs=env_configs))
    samples = [{"input_ids": s.input_ids, "loss_mask": s.loss_mask} for ep in episodes for s in ep.samples()]
    for env_id in (e for e in env_ids if _multi_agent(e)):
        games = list(multi_agent_demonstrations(
            lambda env_id=env_id: make_env(env_id, env_configs[env_id]), chat, cfg.agent,
            MultiAgentDemoPolicy(noise=cfg.noise, agent_noise=cfg.agent_noise, sides=cfg.sides,
                                 opponent=cfg.opponent), cfg.episodes_per_env,
            cfg.seed))
        episodes += games
        samples += demo_samples(games)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    amp = resolve_autocast(cfg.autocast, next(model.parameters()).device)
    precision = "bfloat16" if amp is not None else "float32"
    start = time.perf_counter()
    losses = sft_train(model, samples, pad_id=tokenizer.pad_token_id, lr=cfg.lr, epochs=cfg.epochs,
                       batch_size=cfg.batch_size, seed=cfg.seed, progress=progress, warmup_steps=cfg.warmup_steps,
                       batching=cfg.batching,
                       autocast="bfloat16" if amp is not None else None)
    report = WarmStartReport(
        envs=env_ids, demo_episodes=len(episodes), samples=len(samples),
        trained_tokens=sum(sum(s["loss_mask"]) for s in samples), steps=len(losses),
        first_loss=losses[0], last_loss=losses[-1], train_seconds=time.perf_counter() - start,
        precision=precision, cpu=cpu_info(), lr=cfg.lr, batch_size=cfg.batch_size,
        base_model=base_model or ("from scratch" if from_scratch else model_dir.name),
    )
    model.save_pretrained(model_dir, safe_serialization=True)
    report.eval_env, report.eval_env_config = eval_env(cfg)
    if evaluate:
        start = time.perf_counter()
        report.eval = evaluate_model(model, tokenizer, cfg)
        report.eval_seconds = time.perf_counter() - start
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
    if _multi_agent(env_id):
        from ragen_rllib.envs.loading import make_env
        from ragen_rllib.models.versus import play_against

        agent = cfg.sides[0][0] if cfg.sides else make_env(env_id, env_config).possible_agents[0]
        result = play_against(engine, env_config, cfg.opponent, cfg.eval_episodes, seed=EVAL_SEED, agent=agent,
                              temperature=cfg.eval_temperature, env=env_id, cfg=cfg.agent, chat=chat,
                              sampling_seed=cfg.seed)
        return {**{k: v for k, v in result.items() if isinstance(v, (int, float))}, "success": result["win_rate"]}
    envs = [gym.make(env_id, **env_config) for _ in range(cfg.eval_episodes)]
    seeds = [EVAL_SEED + i for i in range(cfg.eval_episodes)]
    sampling = SamplingConfig(temperature=cfg.eval_temperature, seed=cfg.seed)
    return summarize(rollout(engine, chat, envs, seeds, cfg.agent, sampling))


def resolve_env(name: str) -> tuple[str, dict]:
    """A RAGEN tag (``SimpleSokoban``: its env id and config), a gymnasium id or a short name (its defaults)."""
    from ragen_rllib.envs.loading import resolve_env_name

    return resolve_env_name(name)


def resolve_envs(cfg: WarmStartConfig) -> tuple[list[str], dict[str, dict]]:
    """The warm start's env ids and their env_configs (a tag's settings, updated by ``cfg.env_configs``)."""
    env_ids, configs = [], {}
    for name in cfg.envs:
        env_id, conf = resolve_env(name)
        extra = cfg.env_configs.get(name, cfg.env_configs.get(env_id, {}))
        conf = {**conf, **extra}
        if env_id in configs and configs[env_id] != conf:
            raise ValueError(f"warm-start envs {list(cfg.envs)} name {env_id} twice with different settings; "
                             "warm-start on one of them")
        if env_id not in configs:
            env_ids.append(env_id)
        configs[env_id] = conf
    return env_ids, configs


def eval_env(cfg: WarmStartConfig) -> tuple[str, dict]:
    """The acceptance rollout's env id and env_config (see ``WarmStartConfig.eval_env``)."""
    if cfg.eval_env is not None:
        env_id, conf = resolve_env(cfg.eval_env)
    else:
        env_ids, configs = resolve_envs(cfg)
        env_id, conf = (EVAL_ENV, EVAL_ENV_CONFIG) if EVAL_ENV in env_ids else (env_ids[0], configs[env_ids[0]])
    if env_id == EVAL_ENV and cfg.eval_env_config is None:
        conf = EVAL_ENV_CONFIG
    return env_id, dict(conf if cfg.eval_env_config is None else cfg.eval_env_config)


def _multi_agent(env: str) -> bool:
    """A turn-based multi-agent env given by import path (``pkg.module:Class``)."""
    if ":" not in env:
        return False
    from ragen_rllib.envs.loading import resolve_env as load
    from ragen_rllib.envs.multi_agent.turn_based import TurnBasedTextEnv

    target = load(env)
    return isinstance(target, type) and issubclass(target, TurnBasedTextEnv)


def _jsonable(cfg: WarmStartConfig) -> dict:
    out = asdict(cfg)
    out["envs"] = list(cfg.envs)
    return out
