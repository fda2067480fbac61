"""Evaluate a policy on fixed seeds (``ragen-rllib eval``) and export a checkpoint as a Hugging Face model
(``ragen-rllib export``).

Evaluation runs the agent layer's rollout loop with a generation engine, outside Ray: ``episodes`` fixed seeds
per env (from ``val_seed``), ``samples`` trajectories per seed at the validation temperature. Per env it reports
success, return, valid-action rate and the unbiased pass@k (Chen et al. 2021) for every k <= samples, and it can
write one JSON line per trajectory that a person can read (or render with ``ragen-rllib view``).

On a multi-agent run (a turn-based multi-agent env) every LLM agent is played by its own module's policy (the run's
``policy_mapping_fn``; from a checkpoint, each module's own weights) and scripted agents by their fixed policies;
metrics come per ``<tag>/<agent>`` and every agent's side of a game is one JSON line (``agent`` and ``module``
named), so the viewer shows both sides.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: where an Algorithm checkpoint keeps the learner's RL modules, one directory each (Algorithm.save_to_path layout)
MODULES_IN_CHECKPOINT = ("learner_group", "learner", "rl_module")
#: the module of a one-module run
MODULE_IN_CHECKPOINT = (*MODULES_IN_CHECKPOINT, "default_policy")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one seed with ``n`` samples of which ``c`` succeeded: ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class EvalEnv:
    """One env to evaluate on: a tag (its name in reports), a gymnasium id (or class import path), its env_config
    and its first seed (None: ``evaluate``'s ``seed``)."""

    tag: str
    env_id: str
    env_config: dict
    seed: int | None = None


def eval_envs(config) -> list[EvalEnv]:
    """The envs a config validates on (its validation tags, else its training envs), each with its own seed."""
    return [EvalEnv(tag=t.tag, env_id=t.env, env_config=dict(t.env_config), seed=t.seed) for t in config.val_tags]


def is_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` is an Algorithm checkpoint (else: a model id or directory)."""
    return bool(checkpoint_modules(path))


def checkpoint_modules(checkpoint: str | Path) -> list[str]:
    """The RL modules an Algorithm checkpoint holds (``[]``: not a checkpoint)."""
    root = Path(checkpoint, *MODULES_IN_CHECKPOINT)
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def export_checkpoint(checkpoint: str | Path, out: str | Path, module_id: str | None = None) -> Path:
    """Write the checkpoint's policy (``module_id``; None: its only module) as a Hugging Face model directory
    (LoRA merged, with the tokenizer), loadable by ``AutoModelForCausalLM`` and by vLLM."""
    from ray.rllib.core.rl_module.rl_module import RLModule
    from transformers import AutoTokenizer

    from ragen_rllib.core.model_config import model_setting
    from ragen_rllib.models.registry import resolve_model

    modules = checkpoint_modules(checkpoint)
    if not modules:
        raise FileNotFoundError(f"{checkpoint} is not a Ragen checkpoint (no {'/'.join(MODULES_IN_CHECKPOINT)})")
    if module_id is None and len(modules) > 1:
        raise ValueError(f"{checkpoint} holds the modules {modules}: name the one to export (--module NAME)")
    module_id = modules[0] if module_id is None else module_id
    if module_id not in modules:
        raise ValueError(f"module={module_id!r}: {checkpoint} holds the modules {modules}")
    path = Path(checkpoint, *MODULES_IN_CHECKPOINT, module_id)
    module = RLModule.from_checkpoint(path.resolve())
    lm = module.lm.merge_and_unload() if getattr(module, "lora", None) else module.lm
    out = Path(out)
    lm.save_pretrained(out)
    AutoTokenizer.from_pretrained(resolve_model(model_setting(module.model_config, "model"))).save_pretrained(out)
    return out


def evaluate_run(model: str | Path, config_path: str | Path, overrides: Sequence[str] = (), *, episodes: int,
                 samples: int, engine: str = "auto", out_jsonl: str | Path | None = None) -> dict:
    """``ragen-rllib eval``: roll ``model`` (a checkpoint, exported to a temp dir first, or any model name) out on
    the validation envs of the config file, at its validation temperature and seeds; the report of
    :func:`evaluate`."""
    import tempfile

    from ragen_rllib.algorithms.ragen.ragen_config import RagenConfig
    from ragen_rllib.envs.loading import import_env_modules

    config = RagenConfig.from_yaml(config_path, list(overrides))
    if config.env is None and not config.env_tags:
        raise ValueError(f"--config {config_path} names no environment (environment.env or environment.env_tags)")
    import_env_modules(config.env_modules)
    envs = eval_envs(config)
    if _multi_agent(envs):
        return evaluate_multi_agent_run(model, config, envs, episodes=episodes, samples=samples, engine=engine,
                                        out_jsonl=out_jsonl)
    with tempfile.TemporaryDirectory(prefix="ragen-eval-") as tmp:
        source = str(export_checkpoint(model, tmp)) if is_checkpoint(model) else str(model)
        return evaluate(source, envs, episodes, samples, config.agent_config(), temperature=config.val_temperature,
                        seed=config.val_seed, engine=engine, out_jsonl=out_jsonl)


def _multi_agent(envs: Sequence[EvalEnv]) -> bool:
    from ragen_rllib.envs.loading import multi_agent_class

    return any(multi_agent_class(e.env_id) is not None for e in envs)


def _validation_defaults(temperature: float | None, seed: int | None) -> tuple[float, int]:
    """``temperature`` and ``seed``, each None replaced by its hyperparameter (``val_temperature``, ``val_seed``)."""
    from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS

    return (HYPERPARAMS["val_temperature"][0] if temperature is None else temperature,
            HYPERPARAMS["val_seed"][0] if seed is None else seed)


def evaluate(model: str | Path, envs: Sequence[EvalEnv], episodes: int, samples: int, agent_cfg, *,
             temperature: float | None = None, seed: int | None = None, engine: str = "auto",
             out_jsonl: str | Path | None = None) -> dict[str, dict[str, float]]:
    """Per env tag: success, return, valid-action rate, pass@k for k = 1..samples (+ an ``all`` row).
    ``temperature`` and ``seed`` (None): the hyperparameters ``val_temperature`` and ``val_seed``."""
    temperature, seed = _validation_defaults(temperature, seed)
    from ragen_rllib.agent.rollout import rollout
    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.envs.loading import make_env
    from ragen_rllib.models.serving import engine_and_chat

    gen, chat = engine_and_chat(str(model), agent_cfg, engine)
    report, lines = {}, []
    try:
        for spec in envs:
            first = seed if spec.seed is None else spec.seed
            seeds = [first + i for i in range(episodes) for _ in range(samples)]
            made = [make_env(spec.env_id, spec.env_config) for _ in seeds]
            done = rollout(gen, chat, made, seeds, agent_cfg, SamplingConfig(temperature=temperature, seed=seed))
            report[spec.tag] = summarize([ep.metrics() for ep in done], seeds, samples)
            lines += [record(spec.tag, ep) for ep in done]
    finally:
        gen.close()
    report["all"] = {key: sum(r[key] for r in report.values()) / len(report) for key in next(iter(report.values()))}
    if out_jsonl is not None:
        Path(out_jsonl).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return report


def summarize(metrics: Sequence[dict[str, float]], seeds: Sequence[int], samples: int) -> dict[str, float]:
    """Means over trajectories (each one's episode ``metrics``), pass@k over seeds."""
    from ragen_rllib.agent import episode as E

    n = len(metrics)
    out = {"success": sum(m[E.M_SUCCESS] for m in metrics) / n,
           "return": sum(m[E.M_RETURN] for m in metrics) / n,
           "valid_action_rate": sum(m[E.M_VALID] for m in metrics) / n}
    per_seed: dict[int, list[float]] = {}
    for s, m in zip(seeds, metrics):
        per_seed.setdefault(s, []).append(m[E.M_SUCCESS])
    for k in range(1, samples + 1):
        out[f"pass@{k}"] = sum(pass_at_k(len(v), int(sum(v)), k) for v in per_seed.values()) / len(per_seed)
    return out


def record(tag: str, ep) -> dict[str, Any]:
    """One trajectory as a JSON-ready dict: env, seed, the system prompt, every turn (prompt, response, parsed
    actions, the observation after each action (a tool's result in tool envs), validity, reward, token count),
    then the final success and return."""
    turns = [{"state": t.state, "prompt": t.user_text, "response": t.text, "think": t.parsed.think,
              "answer": t.parsed.answer, "actions": list(t.result.actions),
              "observations": list(t.result.observations), "format_ok": t.parsed.format_ok,
              "action_is_valid": t.result.action_is_valid, "reward": t.result.reward,
              "response_tokens": len(t.response_ids)} for t in ep.turns]
    return {"env": tag, "env_id": ep.env.spec.id if ep.env.spec else "", "seed": ep.seed, "system": ep.system,
            "turns": turns,
            "final_state": str(ep.state), "success": bool(ep.success), "return": ep.episodic_return,
            "error": ep.error}


# ---------------------------------------------------------------------- multi-agent runs
def evaluate_multi_agent_run(model: str | Path, config, envs: Sequence, *, episodes: int, samples: int,
                             engine: str = "auto", out_jsonl: str | Path | None = None) -> dict:
    """``model``: a checkpoint (each module's policy exported to a temp dir first) or a model name or directory
    (every module plays it). Returns ``{<tag>/<agent>: metrics, ..., "all": means}``."""
    import tempfile

    from ragen_rllib.core.modules import module_ids, module_of

    modules = module_ids(config)
    with tempfile.TemporaryDirectory(prefix="ragen-eval-") as tmp:
        held = checkpoint_modules(model)
        if held:
            missing = sorted(set(modules) - set(held))
            if missing:
                raise ValueError(f"{model} holds the modules {held}, the config plays {modules}: give the run's own "
                                 "config (--config) or a checkpoint of this run")
            sources = {m: str(export_checkpoint(model, Path(tmp) / m, m)) for m in modules}
        else:
            sources = {m: str(model) for m in modules}
        return evaluate_multi_agent(sources, envs, episodes, samples, config.agent_config(),
                                    module_of=lambda agent: module_of(config, agent),
                                    scripted=dict(config.scripted_agents), temperature=config.val_temperature,
                                    seed=config.val_seed, engine=engine, out_jsonl=out_jsonl)


def evaluate_multi_agent(models: dict[str, str], envs: Sequence, episodes: int, samples: int, agent_cfg, *,
                         module_of, scripted: dict[str, str], temperature: float | None = None,
                         seed: int | None = None, engine: str = "auto",
                         out_jsonl: str | Path | None = None) -> dict[str, dict[str, float]]:
    """Per ``<tag>/<agent>``: :func:`summarize`'s metrics of that agent's side (``temperature``, ``seed``: as in
    :func:`evaluate`)."""
    temperature, seed = _validation_defaults(temperature, seed)
    from ragen_rllib.agent.multi_agent import rollout_multi
    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.envs.loading import make_env
    from ragen_rllib.envs.multi_agent.turn_based import resolve_scripted
    from ragen_rllib.models.serving import engine_and_chat

    engines, chats = {}, {}
    report: dict[str, dict[str, float]] = {}
    lines: list[dict[str, Any]] = []
    try:
        for module, source in models.items():
            engines[module], chats[module] = engine_and_chat(source, agent_cfg, engine)
        for spec in envs:
            first = seed if spec.seed is None else spec.seed
            seeds = [first + i for i in range(episodes) for _ in range(samples)]
            made = [make_env(spec.env_id, spec.env_config) for _ in seeds]
            policies = {a: resolve_scripted(name, type(made[0]), f"scripted_agents[{a!r}]")
                        for a, name in scripted.items()}
            done = rollout_multi(engines, chats, made, seeds, agent_cfg,
                                 SamplingConfig(temperature=temperature, seed=seed), module_of=module_of,
                                 scripted=policies)
            for agent in done[0].llm_agents:
                report[f"{spec.tag}/{agent}"] = summarize([ep.metrics(agent) for ep in done], seeds, samples)
                lines += [agent_record(spec.tag, ep, agent, module_of(agent)) for ep in done]
    finally:
        for generation in engines.values():
            generation.close()
    report["all"] = {key: sum(r[key] for r in report.values()) / len(report) for key in next(iter(report.values()))}
    if out_jsonl is not None:
        Path(out_jsonl).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return report


def agent_record(tag: str, ep, agent: str, module: str) -> dict[str, Any]:
    """One agent's side of one game as a JSON-ready dict (the fields of
    :func:`record`, plus ``agent`` and ``module``)."""
    turns = [{"state": t.observation, "response": t.text, "think": t.parsed.think, "answer": t.parsed.answer,
              "actions": list(t.parsed.actions), "format_ok": t.parsed.format_ok, "action_is_valid": t.action_is_valid,
              "reward": t.reward, "response_tokens": len(t.response_ids)} for t in ep.turns[agent]]
    final = ep.env.observe(agent) if ep.env.agents else ""
    return {"env": f"{tag}/{agent}", "agent": agent, "module": module, "seed": ep.seed, "system": ep.systems[agent],
            "turns": turns, "final_state": final, "success": bool(ep.success[agent]), "return": ep.returns[agent],
            "error": ep.error}
