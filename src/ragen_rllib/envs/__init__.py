"""Text environments. Importing this package registers them as gymnasium ids (``ragen/<Name>-v0``).

>>> import gymnasium as gym, ragen_rllib.envs
>>> env = gym.make("ragen/FrozenLake-v0", size=4, success_rate=0.8)
"""

from __future__ import annotations

import gymnasium as gym

from ragen_rllib.envs.base import ACTION_IS_EFFECTIVE, ACTION_IS_VALID, SUCCESS, StepOutcome, TextEnv

#: gymnasium id -> entry point of every built-in environment.
BUILTIN_ENVS: dict[str, str] = {
    "ragen/FrozenLake-v0": "ragen_rllib.envs.games.frozen_lake:FrozenLakeEnv",
    "ragen/Sokoban-v0": "ragen_rllib.envs.games.sokoban:SokobanEnv",
    "ragen/Bandit-v0": "ragen_rllib.envs.games.bandit:BanditEnv",
    "ragen/Countdown-v0": "ragen_rllib.envs.games.countdown:CountdownEnv",
    "ragen/MetaMathQA-v0": "ragen_rllib.envs.games.metamathqa:MetaMathQAEnv",
    "ragen/Sudoku-v0": "ragen_rllib.envs.games.sudoku:SudokuEnv",
    "ragen/2048-v0": "ragen_rllib.envs.games.game_2048:Game2048Env",
    "ragen/RubiksCube2x2-v0": "ragen_rllib.envs.games.rubiks_cube:RubiksCube2x2Env",
    "ragen/SearchQA-v0": "ragen_rllib.envs.tools.search_qa:SearchQAEnv",
    "ragen/BFCLMultiTurn-v0": "ragen_rllib.envs.tools.bfcl:BFCLMultiTurnEnv",
}


def register_builtin_envs() -> None:
    """Register every built-in env with gymnasium (idempotent)."""
    for env_id, entry_point in BUILTIN_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True)


register_builtin_envs()

__all__ = [
    "ACTION_IS_EFFECTIVE",
    "ACTION_IS_VALID",
    "BUILTIN_ENVS",
    "SUCCESS",
    "StepOutcome",
    "TextEnv",
    "register_builtin_envs",
]
