"""`ragen-rllib view`: the page's content, escaping of untrusted text, summary figures, bad input, and the page
in a real headless Chromium (no console errors; the filters work)."""

import json
import shutil
import subprocess

import pytest

from ragen_rllib.cli import main
from ragen_rllib.evaluation.viewer import read_rollouts, render, summary

EVIL = "<script>window.pwned=1</script><img src=x onerror=alert(1)>"


def turn(answer, valid, reward, think="go right"):
    return {"state": "P _ G", "prompt": "...", "response": f"<think>{think}</think><answer>{answer}</answer>",
            "think": think, "answer": answer, "actions": [answer] if valid else [], "format_ok": True,
            "action_is_valid": valid, "reward": reward, "response_tokens": 9}


ROWS = [
    {"env": "Lake", "env_id": "ragen/FrozenLake-v0", "seed": 1, "turns": [turn("Right", True, 0.0),
                                                                          turn("Right", True, 1.0)],
     "final_state": "_ _ P", "success": True, "return": 1.0, "error": None},
    {"env": "Lake", "env_id": "ragen/FrozenLake-v0", "seed": 2, "turns": [turn(EVIL, False, -0.1, think=EVIL)],
     "final_state": "P _ G", "success": False, "return": -0.1, "error": None},
    {"env": "SimpleSokoban", "env_id": "ragen/Sokoban-v0", "seed": 3, "turns": [turn("Up", True, -0.1)],
     "final_state": "#", "success": False, "return": -0.1, "error": None},
]


@pytest.fixture
def rollouts(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_summary_per_env_and_overall():
    rows = summary(ROWS)
    assert [r["env"] for r in rows] == ["Lake", "SimpleSokoban", "all"]
    lake, _, overall = rows
    assert (lake["trajectories"], lake["success"], lake["return"], lake["valid_turns"]) == (2, 0.5, 0.45, 2 / 3)
    assert overall["success"] == pytest.approx(1 / 3) and overall["valid_turns"] == 0.75


def test_page_shows_every_turn_and_escapes_model_output():
    page = render(ROWS, "t")
    assert page.count('class="traj ') == 3 and page.count('class="turn"') == 4 + 3  # turns + final states
    assert '<span class="answer">Right</span>' in page and "invalid" in page
    assert "<script>window.pwned" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from anywhere


def test_bad_rollout_files_are_named(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2 is not JSON"):
        read_rollouts(bad)
    with pytest.raises(SystemExit) as exit_info:
        main(["view", str(tmp_path / "missing.jsonl")])
    assert exit_info.value.code == 2 and "missing.jsonl does not exist" in capsys.readouterr().err


def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Chromium is not installed: run `bash scripts/setup_browser.sh` (Debian's chromium package)"
    return path


@pytest.mark.slow
def test_the_page_works_in_headless_chromium(rollouts, tmp_path, capsys):
    assert main(["view", str(rollouts), "--out", str(tmp_path / "view.html")]) == 0
    page = tmp_path / "view.html"
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert errors == []
    dom = proc.stdout
    assert dom.count('data-shown="1"') == 3 and '<span id="shown-count">3</span>' in dom  # the script ran
    assert "window.pwned" not in dom.replace("&lt;script&gt;window.pwned", "")

    # the filters, set from the URL fragment: Lake failures only
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           page.as_uri() + "#env=Lake&success=0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count('data-shown="1"') == 1 and '<span id="shown-count">1</span>' in proc.stdout
    shown = proc.stdout.split('data-shown="1"')[0].rsplit("<details", 1)[1]
    assert 'data-env="Lake"' in shown and 'data-success="0"' in shown
