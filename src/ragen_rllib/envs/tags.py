"""RAGEN's env tags: a name for an env id and its settings (RAGEN's ``custom_envs``), usable by name in a run's
``environment.env_tags`` list. ``configs/envs/<tag>.yaml`` ship the same settings as single-env configs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TagSpec:
    """A built-in tag: gymnasium id and env_config."""

    env: str
    env_config: dict = field(default_factory=dict)


_SIMPLE_SOKOBAN = {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 100, "search_depth": 300}
_FROZENLAKE = {"size": 4, "p": 0.9, "success_rate": 0.8, "is_slippery": True}

#: tag name -> its env (RAGEN's names).
RAGEN_TAGS: dict[str, TagSpec] = {
    "SimpleSokoban": TagSpec("ragen/Sokoban-v0", _SIMPLE_SOKOBAN),
    "CoordSokoban": TagSpec("ragen/Sokoban-v0", {**_SIMPLE_SOKOBAN, "observation_format": "grid_coord"}),
    "LargerSokoban": TagSpec("ragen/Sokoban-v0", {**_SIMPLE_SOKOBAN, "dim_room": [8, 8], "num_boxes": 2}),
    "FrozenLake": TagSpec("ragen/FrozenLake-v0", _FROZENLAKE),
    "CoordFrozenLake": TagSpec("ragen/FrozenLake-v0", {**_FROZENLAKE, "observation_format": "grid_coord",
                                                       "success_rate": 1.0}),
    "Bandit": TagSpec("ragen/Bandit-v0", {"split": "train"}),
    "Countdown": TagSpec("ragen/Countdown-v0"),
    "MetaMathQA": TagSpec("ragen/MetaMathQA-v0"),
    "Sudoku": TagSpec("ragen/Sudoku-v0", {"size": 4, "difficulty": "easy"}),
    "2048": TagSpec("ragen/2048-v0", {"size": 4}),
    "RubiksCube2x2": TagSpec("ragen/RubiksCube2x2-v0", {"scramble_depth": [1, 5]}),
}
