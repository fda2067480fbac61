"""One config and seed train alike through every entry point: the Python API, ``ragen-rllib train``, a
``ragen-rllib sweep`` trial and ``examples/train_smollm2.py`` (``benchmarks/entry_points.py`` runs them and compares
their traces: sampled token ids, scores, advantages and losses of each iteration). The config is the shipped SmolLM2
FrozenLake run on slippery ice with a warm-started tiny model, for two iterations (the second samples from the
updated, synced engine)."""

import subprocess
import sys
from pathlib import Path

import pytest

from ragen_rllib.algorithms.ragen.driver.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from entry_points import ENTRY_POINTS, compare  # noqa: E402


def test_a_trace_differs_where_the_runs_differ():
    want = {"modules": {"m": {"group_ids": [1, 1], "scores": [0.0, 1.0], "token_ids": [[5, 6], [7]],
                              "advantages": [[-0.5, -0.5], [0.5]], "learner": {"policy_loss": 0.25}}}}
    assert compare(want, want) is None
    for key, value, message in (("token_ids", [[5, 6], [8]], "token_ids differ (rows [1] of 2)"),
                                ("scores", [0.0, 0.9], "scores differ"),
                                ("advantages", [[-0.5, -0.5], [0.6]], "advantages of row 1 differ"),
                                ("learner", {"policy_loss": 0.3}, "learner policy_loss 0.3 != 0.25")):
        got = {"modules": {"m": {**want["modules"]["m"], key: value}}}
        assert message in compare(got, want)


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory) -> Path:
    """A tiny model warm-started on FrozenLake in the run's agent settings (no thinking): valid actions often,
    not always, so groups differ in reward and the advantages are not all zero."""
    out = tmp_path_factory.mktemp("warm") / "model"
    subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "make-model", "--preset", "nano", "--out", str(out),
                    "--warm-start", "FrozenLake", "--episodes", "128", "--epochs", "4", "--lr", "5e-3",
                    "--noise", "0.4", "--eval-episodes", "4", "--agent", "enable_think=false",
                    "--agent", "max_response_tokens=48"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.slow(seconds=105)
def test_the_api_the_cli_a_sweep_trial_and_the_example_train_alike(warm_model, tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/entry_points.py", "--model", str(warm_model), "--iterations",
                           "2", "--work", str(tmp_path), "--jobs", "2"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.count(": equal") == 2 * (len(ENTRY_POINTS) - 1), proc.stdout
    first = read_trace(tmp_path / "api" / "trace" / "iter_0001.json")["modules"]["default_policy"]
    assert len(first["token_ids"]) == 12 and len(set(first["scores"])) > 1  # rewards differ: the advantages are not 0
    assert any(a != 0 for row in first["advantages"] for a in row)
