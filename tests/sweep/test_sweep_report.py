"""``ragen-rllib report`` on a recorded sweep (the quick slip-rate study: slip x filter variant, one seed) and on
hand-made trial rows with seeds to pool."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_rllib.sweep.report import main_table, markdown

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "benchmarks" / "results" / "sweep_slip_rate_quick.json"


def test_report_renders_a_recorded_sweep_as_a_table_and_figure(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "report", str(RECORDED), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "report.md").read_text()
    trials = json.loads(RECORDED.read_text())["trials"]
    header = text.splitlines()[0].split(" | ")
    assert header == ["| variant \\ environment.env_config.success_rate", "0", "0.5", "0.8", "1 |"]
    for t in trials:  # every recorded trial is one cell (one seed each), its figures rendered, not retyped
        rate = f"{t['environment.env_config.success_rate']:g}"
        row = next(line for line in text.splitlines() if line.startswith(f"| {t['variant']} |"))
        cell = row.split(" | ")[[h.strip(" |") for h in header].index(rate)]
        lift = (t["validation_success"] - t["validation_success_before"]) * 100
        assert cell.startswith(f"{t['validation_success']:.1%} +- 0.0 (n=1), lift {lift:+.1f}"), cell
    assert (tmp_path / "report.png").stat().st_size > 1000


def test_cells_pool_seeds_into_mean_and_std_and_count_failures():
    trials = [{"variant": a, "environment.env": e, "debugging.seed": s, "validation_success_before": 0.1,
               "validation_success": v, "error": None}
              for (a, e, s, v) in [("grpo", "lake", 0, 0.5), ("grpo", "lake", 1, 0.3), ("grpo", "lake", 2, 0.4),
                                   ("ppo", "lake", 0, 0.2), ("ppo", "box", 0, None)]]
    rows, cols, cells = main_table(trials, "variant", "environment.env")
    assert rows == ["grpo", "ppo"] and cols == ["lake", "box"]
    assert cells[("grpo", "lake")].text() == "40.0% +- 10.0 (n=3), lift +30.0 +- 10.0"
    assert cells[("ppo", "box")].text() == "- (1 failed)"
    assert "| grpo | 40.0% +- 10.0 (n=3), lift +30.0 +- 10.0 | - |" in markdown(rows, cols, cells, "variant", "env")
    with pytest.raises(ValueError, match=r"--rows 'algo' is not a swept key.*\['variant'"):
        main_table(trials, "algo", "environment.env")


def test_the_main_table_in_the_readme_is_the_recorded_sweep_rendered_by_report(tmp_path):
    """benchmarks/main_table.py's record (5 algorithms x 3 envs x 3 seeds) re-rendered by `report` gives the saved
    table, and the README shows exactly that table: never typed by hand."""
    from ragen_rllib.sweep.report import report

    record = ROOT / "benchmarks" / "results" / "main_table_quick.json"
    trials = json.loads(record.read_text())["trials"]
    assert len(trials) == 45 and all(t["error"] is None for t in trials)
    cells = {(t["variant.algo"], t["variant.env"]) for t in trials}
    assert len(cells) == 15 and sorted(t["debugging.seed"] for t in trials) == sorted([0, 1, 2] * 15)
    text = report([record], rows="variant.algo", cols="variant.env", out=tmp_path, log=lambda *_: None).read_text()
    assert text == (ROOT / "benchmarks" / "results" / "main_table_quick.md").read_text()
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 5 and all(line in readme.splitlines() for line in rows)
