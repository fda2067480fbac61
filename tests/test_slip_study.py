"""benchmarks/slip_study.py: the slip study's record from a sweep's rows (means over seeds, the two checks)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from slip_study import record_of  # noqa: E402


def row(success_rate, seed, before, after, valid_after=1.0, error=None):
    return {"environment.env_config.success_rate": success_rate, "debugging.seed": seed,
            "validation_success_before": before, "validation_success": after,
            "validation_valid_actions_before": 0.99, "validation_valid_actions": valid_after, "wall_s": 60.0,
            "iterations": 4, "error": error}


def test_means_over_seeds_fall_with_slip_and_every_validation_keeps_the_format():
    rows = [row(1.0, 0, 0.2, 0.5), row(1.0, 1, 0.2, 0.3), row(0.8, 0, 0.2, 0.25), row(0.8, 1, 0.2, 0.35),
            row(0.0, 0, 0.0, 0.0), row(0.0, 1, 0.0, 0.0)]
    rec = record_of(rows, "cmd", {"model": "cpu"})
    assert [(t["slip"], t["seed"]) for t in rec["trials"]] == [(0.0, 0), (0.0, 1), (0.2, 0), (0.2, 1), (1.0, 0),
                                                                (1.0, 1)]
    assert rec["by_slip"]["0.0"]["after_mean"] == pytest.approx(0.4)
    assert rec["by_slip"]["0.0"]["after_std"] == pytest.approx(0.1414, abs=1e-4)
    assert rec["by_slip"]["0.2"]["after_mean"] == pytest.approx(0.3)
    assert rec["checks"] == {"success_falls_at_each_step": True, "min_valid": 0.99, "format_kept": True,
                             "trials_done": 6, "trials": 6}


def test_a_rise_a_lost_format_and_a_failed_trial_show_in_the_checks():
    rows = [row(1.0, 0, 0.2, 0.3), row(0.8, 0, 0.2, 0.4, valid_after=0.64), row(0.5, 0, 0.1, None, error="boom")]
    checks = record_of(rows, "cmd", {"model": "cpu"})["checks"]
    assert checks == {"success_falls_at_each_step": False, "min_valid": 0.64, "format_kept": False,
                      "trials_done": 2, "trials": 3}
