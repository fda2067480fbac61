"""The real-model demo's warm starts: SmolLM2-135M-Instruct taught RAGEN's answer format on one env, found (and,
once, built) by one function shared by the example and the learning benchmark.

Zero-shot the model writes no valid action. A short SFT warm start on oracle demonstrations with a share of random
actions teaches the format and leaves good play to RL; the agent settings are those of the RL runs
(``configs/runs/<env>_smollm2_cpu.yaml``: RAGEN's no-think prompt, 48 tokens per turn).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BASE = "gguf:smollm2-135m-instruct"
#: agent settings of the demonstrations (and of the RL runs that start from them)
AGENT = {"enable_think": False, "max_response_tokens": 48}


@dataclass(frozen=True)
class WarmRecipe:
    """One env's warm start.

    Attributes:
        tag: RAGEN env tag of the demonstrations.
        env_config: settings over the tag's env_config (those of the RL runs).
        episodes: oracle demonstration episodes.
        epochs: SFT epochs over them.
        noise: share of the demonstrated actions that are random instead of the oracle's.
        agent: agent settings of the demonstrations and the RL runs (None: ``AGENT``).
        sides: turn-based multi-agent envs: the agents the model plays, cycled over the games (see
            :class:`~ragen_rllib.models.warm_start.WarmStartConfig`); None for single-agent envs.
        opponent: multi-agent envs: the fixed-pool opponent of the agents the model does not play.
        agent_noise: multi-agent envs: noise per agent, overriding ``noise`` for the agents it names.
        warmup_steps: SFT steps of linear learning-rate warm-up (0: none).
        batching: how SFT groups samples into steps (``WarmStartConfig.batching``: ``"length"`` or ``"random"``).
    """

    tag: str
    env_config: dict
    episodes: int
    epochs: int
    noise: float
    agent: dict | None = None
    sides: tuple[tuple[str, ...], ...] | None = None
    opponent: str = "random"
    agent_noise: dict[str, float] | None = None
    warmup_steps: int = 0
    batching: str = "length"

    def variant(self) -> str:
        """The part of a warm start's directory name that names the settings beyond episodes, epochs and noise
        (env options switched on, per-agent noise, warm-up, batching); empty with their defaults, so older directories
        keep their names."""
        switched_on = "".join(f"-{key.replace('_', '')}" for key, value in sorted(self.env_config.items())
                              if value is True)
        per_agent = "".join(f"-{agent}{noise:g}" for agent, noise in sorted((self.agent_noise or {}).items()))
        warmup = f"-wu{self.warmup_steps}" if self.warmup_steps else ""
        batching = "" if self.batching == "length" else f"-{self.batching}batch"
        return switched_on + per_agent + warmup + batching


#: env -> its warm start: one epoch, so the format is learnt and the play is not (room left for RL)
RECIPES = {
    "sokoban": WarmRecipe("SimpleSokoban", {}, episodes=480, epochs=1, noise=0.1),
    "frozenlake": WarmRecipe("FrozenLake", {"size": 4, "is_slippery": False}, episodes=160, epochs=1, noise=0.45),
    # tool calling: thinking on (tool envs need it), one search per turn (configs/runs/searchqa_smollm2_cpu.yaml)
    "searchqa": WarmRecipe("SearchQA", {"split": "train", "top_k": 3}, episodes=200, epochs=1, noise=0.3,
                           agent={"enable_think": True, "max_response_tokens": 64, "max_turns": 3,
                                  "max_actions_per_turn": 1, "max_actions_per_traj": 3, "max_model_len": 2048}),
    # a two-player game: x against the random opponent on the train split of the 2-move openings, half the moves
    # random (legal, weak play: room for RL); the agent settings of models.versus.GAME_AGENT (8 tokens per turn)
    "tictactoe": WarmRecipe("ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv",
                            {"opening_moves": 2, "openings": "train"},
                            episodes=256, epochs=1, noise=0.5, sides=(("x",),), opponent="random",
                            agent={"enable_think": False, "max_response_tokens": 8, "max_turns": 5,
                                   "max_model_len": 1024}),
    # a cooperative pair: the model plays both the Countdown solver and its verifier (two numbers of 1-9); half the
    # solver's proposals are random expressions of the numbers, the verifier always gives the oracle's verdict.
    # Random batches: a verifier transcript that ends at its first verdict always ends on accept, so length batches
    # held only accepts or mostly rejects, and SFT drove p(accept) to 0.99 for right and wrong proposals alike
    "solver_verifier": WarmRecipe("ragen_rllib.envs.multi_agent.solver_verifier:SolverVerifierEnv",
                                  {"num_numbers": 2, "max_number": 9, "max_target": 20, "max_rounds": 2},
                                  episodes=256, epochs=1, noise=0.5, sides=None, opponent="oracle",
                                  agent_noise={"verifier": 0.0}, batching="random",
                                  agent={"enable_think": False, "max_response_tokens": 16, "max_turns": 3,
                                         "max_model_len": 1024}),
    # a cooperative pair on FrozenLake 3x3 (non-slippery): the model plays the guide (sees the map, names a move)
    # and the walker (moves); as the FrozenLake recipe, 45% of each role's moves random (the walker's random move
    # ignores the advice). 3x3, 6 moves: a role's transcript repeats the prompt's state each turn (~640 tokens on
    # average here; 4x4 and 10 moves: ~1,000), which sets the CPU's SFT and learner time
    "guided_lake": WarmRecipe("ragen_rllib.envs.multi_agent.guided_lake:GuidedLakeEnv", {"size": 3, "max_steps": 6},
                              episodes=128, epochs=1, noise=0.45, sides=None, opponent="oracle", batching="random",
                              agent={"enable_think": False, "max_response_tokens": 16, "max_turns": 6,
                                     "max_model_len": 2048}),
}


def smollm2_model_path(root: str | Path, env: str) -> Path:
    """Where ``env``'s warm-started model lives under ``root`` (one directory per recipe and precision)."""
    from ragen_rllib.core.precision import resolve_autocast

    recipe = _recipe(env)
    precision = "bf16" if resolve_autocast("auto", "cpu") is not None else "fp32"
    name = f"smollm2-{env}-{recipe.episodes}x{recipe.epochs}ep-noise{recipe.noise:g}{recipe.variant()}-{precision}"
    return Path(root) / "demo" / name


def smollm2_model(root: str | Path, env: str, build: bool = True, log: Callable[[str], None] = print) -> Path:
    """SmolLM2-135M-Instruct warm-started on ``env`` (``RECIPES``), built when missing and ``build`` (minutes on
    a CPU; the GGUF conversion once more); with ``build=False`` a missing model raises a
    ``FileNotFoundError`` that says how to build it.

    The build runs in a child process (``python -m ragen_rllib.recipes.smollm2_demo ROOT ENV``): the SFT's memory
    then goes back to the system before the caller trains (built in the same process, it stays with the caller's RL
    run and can fill a 24 GiB machine)."""
    import subprocess
    import sys

    from ragen_rllib.models.warm_start import REPORT_FILE

    path = smollm2_model_path(root, env)
    if (path / REPORT_FILE).exists():
        return path
    if not build:
        raise FileNotFoundError(f"the warm-started SmolLM2 for {env} is missing at {path}: build it once with "
                                f"`bash scripts/demo.sh --model smollm2 --env {env}`")
    log(f"[demo] warm-starting {BASE} on {_recipe(env).tag} into {path} (once, 5-14 min)")
    done = subprocess.run([sys.executable, "-m", __name__, str(root), env], check=False)
    if done.returncode != 0 or not (path / REPORT_FILE).exists():
        raise RuntimeError(f"building the warm-started SmolLM2 for {env} failed (exit code {done.returncode}); "
                           "its output is above")
    return path


def build_smollm2_model(root: str | Path, env: str, log: Callable[[str], None] = print) -> Path:
    """Build ``env``'s warm start under ``root`` in this process (see :func:`smollm2_model`)."""
    import shutil

    from ragen_rllib.agent.config import AgentConfig
    from ragen_rllib.models.registry import resolve_model
    from ragen_rllib.models.warm_start import WarmStartConfig, warm_start

    path, recipe = smollm2_model_path(root, env), _recipe(env)
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(resolve_model(BASE), tmp)
    report = warm_start(tmp, WarmStartConfig(envs=(recipe.tag,), env_configs={recipe.tag: recipe.env_config},
                                             episodes_per_env=recipe.episodes,
                                             epochs=recipe.epochs, noise=recipe.noise,
                                             agent=AgentConfig.from_dict(recipe.agent or AGENT),
                                             sides=recipe.sides, opponent=recipe.opponent,
                                             agent_noise=recipe.agent_noise,
                                             warmup_steps=recipe.warmup_steps, batching=recipe.batching),
                        evaluate=False, base_model=BASE)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)  # complete or absent: an interrupted build is not mistaken for a model
    log(report.summary())
    return path


def _recipe(env: str) -> WarmRecipe:
    if env not in RECIPES:
        raise ValueError(f"env={env!r} has no SmolLM2 warm start; use one of {sorted(RECIPES)}")
    return RECIPES[env]


if __name__ == "__main__":
    import sys

    build_smollm2_model(sys.argv[1], sys.argv[2], log=lambda line: print(line, flush=True))
