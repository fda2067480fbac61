"""Smoke test: the tool-env-server example runs as a user would run it."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_tool_env_server_example_plays_and_trains_through_the_server():
    """SearchQA served by `ragen-rllib serve-env`: the oracle's search calls come back as results, and an RL
    iteration runs through a remote env runner that reaches the env by URL only."""
    proc = subprocess.run([sys.executable, "examples/tool_env_server.py", "--train", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "tools: ['search']" in out and '> <tool_call>{"name": "search"' in out and "Doc 1 (" in out
    assert "reward=1.0 success=True" in out
    line = out.split("iter 1:")[1].splitlines()[0]
    assert "4 episodes through the server" in line and "runner errors 0" in line, line
