"""``ragen-rllib report``: any sweeps' trial records (``sweep.json``) as one table in the shape of RAGEN's main
results, rows x columns (e.g. algorithm x environment), each cell the mean +- std of validation success over the
trials that share it (seeds, repeats), with the lift over the start where the trials measured it.

The table is rendered from the records, never copied by hand: ``report.md`` (Markdown) and ``report.png`` (grouped
bars with the std as error bars) next to the first sweep, or under ``--out``.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragen_rllib.sweep.run import OUTCOME_KEYS, RECORD


@dataclass(frozen=True)
class Cell:
    """The trials of one (row, column): validation success after training and before (None: not measured)."""

    after: tuple[float, ...]
    before: tuple[float, ...]
    failed: int

    @staticmethod
    def _mean_std(values: Sequence[float]) -> tuple[float, float]:
        return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0

    def text(self) -> str:
        if not self.after:
            return f"- ({self.failed} failed)" if self.failed else "-"
        mean, std = self._mean_std(self.after)
        out = f"{mean:.1%} +- {std * 100:.1f} (n={len(self.after)})"
        if len(self.before) == len(self.after):
            lift, lift_std = self._mean_std([a - b for a, b in zip(self.after, self.before)])
            out += f", lift {lift * 100:+.1f} +- {lift_std * 100:.1f}"
        return out + (f", {self.failed} failed" if self.failed else "")


def load_trials(sweep_dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every trial row of the sweeps' records (a directory or its ``sweep.json``)."""
    rows = []
    for item in sweep_dirs:
        path = Path(item)
        path = path / RECORD if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"{item}: no {RECORD} (run `ragen-rllib sweep` first, or name a sweep directory)")
        rows += json.loads(path.read_text())["trials"]
    return rows


def swept_keys(trials: Sequence[dict[str, Any]]) -> list[str]:
    """The swept key paths of the trials, in record order."""
    keys: list[str] = []
    for trial in trials:
        keys += [k for k in trial if k not in OUTCOME_KEYS and k not in keys]
    return keys


def _label(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def main_table(trials: Sequence[dict[str, Any]], rows: str, cols: str) -> tuple[list[str], list[str], dict]:
    """``(row labels, column labels, {(row, col): Cell})``; the trials' other swept keys are pooled in a cell."""
    keys = swept_keys(trials)
    for flag, key in (("--rows", rows), ("--cols", cols)):
        if key not in keys:
            raise ValueError(f"{flag} {key!r} is not a swept key of these sweeps: use one of {keys}")
    row_labels = list(dict.fromkeys(_label(t.get(rows)) for t in trials))
    col_labels = list(dict.fromkeys(_label(t.get(cols)) for t in trials))
    groups: dict[tuple[str, str], list[dict]] = {}
    for trial in trials:
        groups.setdefault((_label(trial.get(rows)), _label(trial.get(cols))), []).append(trial)

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and math.isfinite(value)

    cells = {}
    for key, members in groups.items():
        done = [t for t in members if number(t.get("validation_success"))]
        before = [t["validation_success_before"] for t in done if number(t.get("validation_success_before"))]
        cells[key] = Cell(tuple(t["validation_success"] for t in done), tuple(before), len(members) - len(done))
    return row_labels, col_labels, cells


def markdown(row_labels: list[str], col_labels: list[str], cells: dict, rows: str, cols: str) -> str:
    """The table: one line per row value, one column per column value."""
    lines = [f"| {rows} \\ {cols} | " + " | ".join(col_labels) + " |", "|" + "---|" * (len(col_labels) + 1)]
    for r in row_labels:
        lines.append(f"| {r} | " + " | ".join(cells[(r, c)].text() if (r, c) in cells else "-" for c in col_labels)
                     + " |")
    return "\n".join(lines) + "\n\nValidation success after training: mean +- std over the trials of a cell (n); " \
        "lift: after minus before training, where the trials measured both.\n"


def figure(row_labels: list[str], col_labels: list[str], cells: dict, path: Path, rows: str) -> Path | None:
    """Grouped bars: one group per column value, one bar per row value, std as error bars (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(len(row_labels), 1)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(col_labels) * max(1, len(row_labels)) / 2), 3.5))
    for i, r in enumerate(row_labels):
        stats = [Cell._mean_std(cells[(r, c)].after) if (r, c) in cells and cells[(r, c)].after else (0.0, 0.0)
                 for c in col_labels]
        ax.bar([j + i * width for j in range(len(col_labels))], [m for m, _ in stats], width,
               yerr=[s for _, s in stats], capsize=3, label=r)
    ax.set_xticks([j + width * (len(row_labels) - 1) / 2 for j in range(len(col_labels))], col_labels)
    ax.set_ylabel("validation success")
    ax.legend(title=rows.split(".")[-1], fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def report(sweep_dirs: Sequence[str | Path], rows: str | None = None, cols: str | None = None,
           out: str | Path | None = None, log=print) -> Path:
    """Write ``report.md`` and ``report.png`` for the sweeps; returns the Markdown file. ``rows`` / ``cols``
    default to the first two swept keys (``variant`` first when swept)."""
    trials = load_trials(sweep_dirs)
    keys = sorted(swept_keys(trials), key=lambda k: k != "variant")
    if rows is None or cols is None:
        rest = [k for k in keys if k not in (rows, cols)]
        rows, cols = rows or rest.pop(0), cols or (rest[0] if rest else None)
        if cols is None:
            raise ValueError(f"the sweeps swept only {keys}: a table needs two keys (--rows, --cols)")
    row_labels, col_labels, cells = main_table(trials, rows, cols)
    target = Path(out) if out else Path(sweep_dirs[0])
    target = target if target.is_dir() or not target.suffix else target.parent
    target.mkdir(parents=True, exist_ok=True)
    text = markdown(row_labels, col_labels, cells, rows, cols)
    (target / "report.md").write_text(text)
    figure(row_labels, col_labels, cells, target / "report.png", rows)
    log(text)
    log(f"report written to {target / 'report.md'} and report.png")
    return target / "report.md"
