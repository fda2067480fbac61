"""A model against a fixed opponent in a turn-based multi-agent env: wins, draws, losses and valid moves.

:func:`play_against` plays ``episodes`` games of one LLM agent (``agent``, e.g. tic-tac-toe's ``x``) against one
kind of the env's fixed opponent pool (``env.opponent_action(agent, kind)``: ``random``, ``minimax``, ``noisy``),
batched through :func:`~ragen_rllib.agent.multi_agent.rollout_multi` (one engine call per round). Held-out starts
are the env's business: give tic-tac-toe ``{"opening_moves": 2, "openings": "validation"}``. The result carries
the binomial standard error of the win rate, so a record can state its noise. :func:`against_the_pool` plays
every kind of the pool.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ragen_rllib.agent.config import AgentConfig

ENV = "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv"
#: The agent settings of a game of tic-tac-toe: a cell number per turn (RAGEN's no-think prompt: the answer is
#: pre-filled with ``<answer>``), at most 5 moves per side.
GAME_AGENT = AgentConfig(max_turns=5, max_response_tokens=8, max_model_len=1024, enable_think=False)


def binomial_se(p: float, n: int) -> float:
    """Standard error of a rate ``p`` measured on ``n`` independent games."""
    return math.sqrt(p * (1 - p) / n) if n > 0 else float("nan")


def outcomes(episodes: Sequence, agent: str) -> dict[str, float]:
    """Win/draw/loss rates of ``agent`` over finished multi-agent episodes, its valid-move rate over its turns
    and the standard error of the win rate. A draw: the game ended with no return either way; a loss: a negative
    return (a lost game or a forfeit)."""
    n = len(episodes)
    wins = sum(bool(ep.success[agent]) for ep in episodes)
    losses = sum(not ep.success[agent] and ep.returns[agent] <= -1.0 for ep in episodes)
    turns = [t for ep in episodes for t in ep.turns[agent]]
    win_rate = wins / n if n else float("nan")
    return {"episodes": n, "wins": wins, "draws": n - wins - losses, "losses": losses, "win_rate": win_rate,
            "win_rate_se": binomial_se(win_rate, n), "draw_rate": (n - wins - losses) / n if n else float("nan"),
            "loss_rate": losses / n if n else float("nan"),
            "valid_move_rate": sum(t.action_is_valid for t in turns) / len(turns) if turns else float("nan"),
            "format_ok": sum(t.parsed.format_ok for t in turns) / len(turns) if turns else float("nan"),
            "errors": sum(ep.error is not None for ep in episodes)}


def play_against(model: Any, env_config: Mapping[str, Any] | None = None, opponent: str = "random",
                 episodes: int = 64, seed: int = 100_000, agent: str = "x", engine: str = "hf",
                 temperature: float = 0.0, env: str = ENV, cfg: AgentConfig = GAME_AGENT,
                 chat: Any = None, sampling_seed: int = 0) -> dict[str, float]:
    """``agent`` played by ``model`` against the fixed opponent ``opponent`` for ``episodes`` games (env seeds
    ``seed + i``), sampled at ``temperature``; returns :func:`outcomes` plus the settings.

    ``model``: a model directory or name (``tiny:nano``; an ``engine`` backend ``hf`` | ``vllm`` | ``auto`` is
    built for it) or a ready :class:`~ragen_rllib.engines.base.GenerationEngine` (then give its ``chat`` format).
    """
    from ragen_rllib.agent.multi_agent import rollout_multi
    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.envs.loading import make_env
    from ragen_rllib.envs.multi_agent.turn_based import Opponent

    if episodes < 1:
        raise ValueError(f"episodes = {episodes!r} is invalid: play at least one game")
    generation, chat = _engine(model, chat, cfg, engine)
    envs = [make_env(env, dict(env_config or {})) for _ in range(episodes)]
    if agent not in envs[0].possible_agents:
        raise ValueError(f"agent = {agent!r} is invalid: {env} has agents {list(envs[0].possible_agents)}")
    kinds = getattr(envs[0], "opponents", None)
    if kinds is not None and opponent not in kinds:
        raise ValueError(f"opponent = {opponent!r} is invalid: {env}'s fixed opponents are {tuple(kinds)}")
    scripted = {a: Opponent(opponent) for a in envs[0].possible_agents if a != agent}
    eps = rollout_multi({"model": generation}, {"model": chat}, envs, [seed + i for i in range(episodes)], cfg,
                        SamplingConfig(temperature=temperature, seed=sampling_seed), module_of=lambda _: "model",
                        scripted=scripted)
    return {**outcomes(eps, agent), "opponent": opponent, "agent": agent, "temperature": temperature,
            "env_config": dict(env_config or {}), "seed": seed}


def against_the_pool(model: Any, episodes: int, env_config: Mapping[str, Any] | None = None,
                     kinds: Sequence[str] = ("minimax", "random", "noisy"), **kwargs: Any) -> dict[str, float]:
    """``agent``'s win rate against each fixed opponent in ``kinds`` (see :func:`play_against`; a model name or
    directory is loaded once)."""
    model, kwargs["chat"] = _engine(model, kwargs.get("chat"), kwargs.get("cfg", GAME_AGENT),
                                    kwargs.pop("engine", "hf"))
    return {kind: play_against(model, env_config, kind, episodes, **kwargs)["win_rate"] for kind in kinds}


def _engine(model: Any, chat: Any, cfg: AgentConfig, backend: str) -> tuple[Any, Any]:
    """(engine, chat format): ``model`` itself when it is an engine (it needs ``chat``), else built from it."""
    if isinstance(model, (str, os.PathLike)):
        from ragen_rllib.models.serving import engine_and_chat

        return engine_and_chat(str(model), cfg, backend)
    if chat is None:
        raise ValueError("play_against(engine, ...) needs the engine's chat format: pass chat=ChatFormat(...)")
    return model, chat
