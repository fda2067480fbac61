"""Text rendering of grid states in RAGEN's three observation formats (grid | coord | grid_coord)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragen_rllib.envs.base import require

OBSERVATION_FORMATS = ("grid", "coord", "grid_coord")


def check_observation_format(value: str) -> str:
    require(value in OBSERVATION_FORMATS, "observation_format", value, f"use one of {OBSERVATION_FORMATS}")
    return value


def legend_text(legend: Mapping[str, str]) -> str:
    """``{"P": "player", ...}`` -> ``"The meaning of each symbol: P: player, ..."``."""
    return "The meaning of each symbol in the state is:\n" + ", ".join(f"{s}: {m}" for s, m in legend.items())


def render_grid(symbols: Sequence[Sequence[str]]) -> str:
    """Rows of one-character symbols -> lines of text."""
    return "\n".join("".join(row) for row in symbols)


def render_coord(objects: Mapping[str, Sequence[tuple[int, int]]]) -> str:
    """``{"Player": [(0, 1)], "Holes": [...]}`` -> ``"Player at (0, 1). Holes at ...."`` (row, column)."""
    parts = []
    for name, cells in objects.items():
        where = ", ".join(f"({r}, {c})" for r, c in cells) if cells else "none"
        parts.append(f"{name} at {where}.")
    return "Coordinates are (row, column), starting from (0, 0) at the top left.\n" + "\n".join(parts)


def render(fmt: str, symbols: Sequence[Sequence[str]], objects: Mapping[str, Sequence[tuple[int, int]]]) -> str:
    """Render a state in the chosen observation format."""
    if fmt == "grid":
        return render_grid(symbols)
    if fmt == "coord":
        return render_coord(objects)
    return render_grid(symbols) + "\n" + render_coord(objects)
