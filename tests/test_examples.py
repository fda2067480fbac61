"""Smoke tests: example scripts and the console command run as a user would run them."""

import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import WORKER

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


BACKGROUND = {}  # test name -> the arguments (to python) of its example run, given the run's temp dir


def background(args_of):
    """Decorator: the test's example run (``python *args_of(tmp_path)``) starts in the background with the
    module's other such runs that the session selected, two at a time in file order (one run alone leaves about
    half of CI's two cores idle: Ray, vLLM and import start-ups; one at a time under pytest-xdist, whose other
    worker keeps that core busy); the test gets ``(stdout, tmp_path)`` from the
    ``ran`` fixture (``out, tmp_path = ran()``), which fails the test as :func:`run` would."""
    def register(test):
        BACKGROUND[test.__name__] = args_of
        return test
    return register


@pytest.fixture(scope="module")
def background_runs(request, tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    selected = [item.function.__name__ for item in request.session.items
                if item.module.__name__ == __name__ and item.function.__name__ in BACKGROUND]
    pool = ThreadPoolExecutor(max_workers=1 if WORKER else 2)  # under pytest-xdist the other worker fills the core
    runs = {}
    for name in dict.fromkeys(selected):
        tmp = tmp_path_factory.mktemp(name.removeprefix("test_")[:30])
        runs[name] = (pool.submit(subprocess.run, [sys.executable, *BACKGROUND[name](tmp)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=600), tmp)
    yield runs
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def ran(request, background_runs):
    def wait():
        future, tmp = background_runs[request.node.function.__name__]
        proc = future.result()
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout, tmp
    return wait


def test_custom_env_example_solves_its_game():
    out = run("examples/custom_env.py")
    assert "is correct!" in out and "success=True" in out


def test_cli_envs_lists_every_builtin_env():
    from ragen_rllib.envs import BUILTIN_ENVS

    out = run("-m", "ragen_rllib.cli", "envs")
    for env_id in BUILTIN_ENVS:
        assert env_id in out
    assert "success_rate=0.8" in out and "num_boxes=3" in out


def test_cli_env_demo_oracles_beat_random():
    out = run("-m", "ragen_rllib.cli", "play-envs", "--episodes", "5")
    rows = {tuple(line.split()[:2]): float(line.split()[2]) for line in out.splitlines() if line.startswith("ragen/")}
    assert rows[("ragen/Sokoban-v0", "oracle")] == 1.0
    assert rows[("ragen/Sokoban-v0", "oracle")] > rows[("ragen/Sokoban-v0", "random")]
    assert rows[("ragen/Countdown-v0", "oracle")] == 1.0


@pytest.mark.parametrize("flags, expected", [
    (["--warm-start", "FrozenLake,Chess"], ["'Chess' is not known", "'SimpleSokoban'"]),
    (["--warm-start", "FrozenLake", "--noise", "1.5"], ["--noise=1.5", "[0, 1]"]),
    (["--warm-start", "FrozenLake", "--autocast", "fp16"], ["--autocast", "'fp16'"]),
])
def test_cli_make_model_rejects_bad_input_before_building(tmp_path, flags, expected):
    proc = subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "make-model", "--preset", "nano", "--out",
                           str(tmp_path / "m"), *flags], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and all(text in proc.stderr for text in expected), proc.stderr
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
@background(lambda tmp_path: ["-m", "ragen_rllib.cli", "make-model", "--preset", "nano", "--out", str(tmp_path / "m"),
                              "--warm-start", "FrozenLake", "--episodes", "96", "--epochs", "2", "--eval-episodes",
                              "4", "--noise", "0.4"])
def test_cli_make_model_warm_start_runs_end_to_end(ran):
    """The real console command on a tiny budget: builds, warm-starts, evaluates with the HF engine, saves."""
    import json

    from transformers import AutoModelForCausalLM

    out, tmp_path = ran()
    assert "acceptance rollout" in out and "turns parsed" in out
    record = json.loads((tmp_path / "m" / "warm_start.json").read_text())
    report = record["report"]
    assert record["config"]["noise"] == 0.4  # the flag reaches the demonstrations' policy
    assert report["last_loss"] < 0.7 * report["first_loss"]  # 24 SGD steps: it learned something
    assert 0.0 <= report["eval"]["format_ok"] <= 1.0
    AutoModelForCausalLM.from_pretrained(tmp_path / "m")  # the warm-started weights load


def test_frozenlake_demo_rejects_a_decay_shorter_than_its_warmup():
    proc = subprocess.run([sys.executable, "examples/train_frozenlake.py", "--iterations", "2", "--lr-warmup-steps",
                           "2"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--iterations=2" in proc.stderr and "--lr-decay constant" in proc.stderr


def demo_seeds_run(tmp_path):
    """The demo seed study's run (the longest here): ``(the finished process, tmp_path)``."""
    return subprocess.run([
        sys.executable, "benchmarks/demo_seeds.py", "--seeds", "0", "3", "--out", str(tmp_path / "runs"), "--results",
        str(tmp_path), "--", "--model", "tiny:nano", "--iterations", "2", "--lr-warmup-steps", "1", "--env-groups",
        "2", "--group-size", "2", "--val-groups", "2", "--max-response-tokens", "24"], cwd=ROOT, capture_output=True,
        text=True, timeout=300), tmp_path


@pytest.mark.slow(seconds=40)
# (``early_run``: it starts beside tests/run/test_cluster.py, whose client processes keep about one core busy, or else
# with this module, beside the two-at-a-time runs)
@pytest.mark.early_run(demo_seeds_run, start_with=["tests/run/test_cluster.py", "tests/test_examples.py"])
def test_demo_seed_study_runs_each_seed_and_summarises(early_result):
    """benchmarks/demo_seeds.py on a tiny budget: the README's main command (examples/train_frozenlake.py, nano
    model, two iterations) once per seed, each with its record, checkpoint and curve; one summary with the CPU."""
    import json

    proc, tmp_path = early_result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stdout
    assert "[demo] iter   2" in log and "[demo] validation success" in log  # the demo's own output
    record = json.loads((tmp_path / "demo_seeds.json").read_text())
    assert [r["seed"] for r in record["runs"]] == [0, 3] and "lift median" in log
    for r in record["runs"]:
        assert r["iterations"] == 2 and r["lift_points"] == pytest.approx(100 * (r["after"] - r["before"]))
        assert [p["iteration"] for p in r["curve"]["validation"]] == [0, 2]
        out = tmp_path / "runs" / f"seed{r['seed']}"  # the demo's own outputs
        demo = json.loads((out / "result.json").read_text())
        assert demo["iterations"] == 2 and len(demo["history"]["train_success"]) == 2
        assert [e["iteration"] for e in demo["history"]["eval"]] == [0, 2]  # before and after training
        assert demo["seed"] == r["seed"] and set(demo["cpu"]) == {"model", "bf16_units", "capability"}
        assert demo["train_seconds"] > 0 and demo["validation_seconds"] > 0
        assert demo["args"]["old_logprobs"] == "engine" and demo["args"]["val_groups"] == 2
        assert (out / "learning_curve.png").stat().st_size > 0 and any((out / "checkpoint").iterdir())
    lifts = [r["lift_points"] for r in record["runs"]]
    assert record["summary"]["min_lift"] == min(lifts) and record["summary"]["max_lift"] == max(lifts)
    assert set(record["cpu"]) == {"model", "bf16_units", "capability"}
    assert (tmp_path / "demo_seeds.png").stat().st_size > 0


SMOLLM2_TINY = ["--set", "training.env_groups=2", "--set", "training.group_size=2", "--set",
                "training.minibatch_size=2", "--set", "training.val_env_groups=2", "--set", "training.max_turns=2",
                "--set", "training.lr_warmup_steps=0"]


@pytest.mark.slow(seconds=30)
@background(lambda tmp_path: [
    "benchmarks/learning.py", "--model", "smollm2", "--envs", "frozenlake", "--seeds", "1", "--iterations", "1",
    "--no-zero-shot", "--results", str(tmp_path), "--runs", str(tmp_path / "runs"), "--name", "t", *SMOLLM2_TINY,
    "--", "--model", "tiny:nano"])
def test_smollm2_learning_benchmark_runs_the_example_per_seed(ran):
    """benchmarks/learning.py --model smollm2 on a tiny budget: examples/train_smollm2.py for one seed (here on the
    nano model through the pass-through flags), one record with the run, the per-env summary and a plot."""
    import json

    log, tmp_path = ran()
    record = json.loads((tmp_path / "t.json").read_text())
    assert record["complete"] and [r["seed"] for r in record["runs"]] == [1]  # (many seeds: the demo study)
    for r in record["runs"]:
        assert r["iterations"] == 1 and len(r["history"]) == 1 and r["validation_maps"] == 2
        assert r["lift_points"] == pytest.approx(100 * (r["after_rl"]["success_rate"] -
                                                        r["warm_start"]["success_rate"]))
        assert r["config_file"] == "configs/runs/frozenlake_smollm2_cpu.yaml"
        assert "training.group_size=2" in r["overrides"]
        assert "--seed " + str(r["seed"]) in r["command"] and "zero_shot" not in r
        assert (tmp_path / "runs" / f"frozenlake_seed{r['seed']}" / "learning_curve.png").stat().st_size > 0
    cell, = record["cells"]
    assert cell["env"] == "frozenlake" and cell["target_points"] == 20 and cell["lifts"] == [
        r["lift_points"] for r in record["runs"]]
    assert set(record["cpu"]) == {"model", "bf16_units", "capability"}
    assert f"{cell['seeds_meeting_target']}/1 at >= +20" in log
    assert (tmp_path / "t.png").stat().st_size > 0


@pytest.mark.slow
@background(lambda tmp_path: ["examples/custom_env.py", "--train", "1"])
def test_custom_env_example_trains_through_a_remote_runner(ran):
    """The runner imports the user's module shipped by Ray's runtime env (py_modules), not from the driver."""
    out, _ = ran()
    assert "iter 1:" in out and "4 episodes of GuessNumber" in out


@pytest.mark.slow(seconds=27)
@background(lambda tmp_path: ["examples/multi_env.py", "--model", "tiny:nano", "--iterations", "1", "--groups", "1",
                              "--group-size", "2", "--val-groups", "1", "--max-response-tokens", "16"])
def test_multi_env_example_reports_every_tag(ran):
    out, _ = ran()
    assert "iter 1: success" in out and "SimpleSokoban" in out.split("iter 1:")[1].splitlines()[0]
    for tag in ("SimpleSokoban", "LargerSokoban", "FrozenLake"):
        assert f"validation {tag}: success" in out


@pytest.mark.slow
@background(lambda tmp_path: [
    "examples/train_sokoban.py", "--model", "tiny:nano", "--iterations", "1", "--out", str(tmp_path / "r"),
    "training.env_groups=1", "training.group_size=2", "training.minibatch_size=2", "training.max_response_tokens=16",
    "training.max_turns=2", "training.val_env_groups=1", "learners.num_learners=0",
    "training.engine_kwargs.max_model_len=1024"])
def test_train_sokoban_example_runs_the_shipped_config(ran):
    out, tmp_path = ran()
    assert "iter    1" in out and "stopped: training_iteration=1 >= 1" in out
    assert (tmp_path / "r" / "checkpoints" / "iter_0001").is_dir()


@pytest.mark.slow
@background(lambda tmp_path: ["examples/eval_and_view.py", "--model", "tiny:nano", "--episodes", "2", "--k", "2",
                              "--max-response-tokens", "16", "--out", str(tmp_path)])
def test_eval_and_view_example_writes_rollouts_and_a_page(ran):
    import json

    out, tmp_path = ran()
    lines = (tmp_path / "rollouts.jsonl").read_text().splitlines()
    assert len(lines) == 2 * 2 and all(json.loads(line)["turns"] for line in lines)
    page = (tmp_path / "rollouts.html").read_text()
    assert page.count('class="traj ') == 4 and "pass@2" in out


@pytest.mark.slow(seconds=60)
@background(lambda tmp_path: ["examples/slip_rate_sweep.py", "--model", "tiny:nano", "--slips", "0.5", "--iterations",
                              "1", "--val-groups", "2", "--max-response-tokens", "16", "--out", str(tmp_path)])
def test_slip_rate_sweep_example_runs_filter_on_and_off(ran):
    out, _ = ran()
    rows = [line for line in out.splitlines() if "->" in line and "%" in line]
    assert len(rows) == 2, out[-2000:]
    assert {tuple(r.split()[:2]) for r in rows} == {("50%", "filter"), ("50%", "nofilter")}


def test_gpu_check_runs_its_dry_run_on_cpu(tmp_path):
    """benchmarks/gpu_check.py (for a CUDA machine without Ray or vLLM) runs its whole path on CPU."""
    import json
    import os

    env = {**os.environ, "OUT": str(tmp_path)}
    proc = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "gpu_check_dry_run.json").read_text())
    full, lora = record["runs"]
    assert not full["lora"] and lora["lora"] and lora["trainable"] < full["trainable"] == full["parameters"]
    assert all(r["trained_tokens_per_s"] > 0 for r in record["runs"]) and "full: 2 x 64" in proc.stdout



@pytest.mark.slow
@background(lambda tmp_path: ["examples/tool_env_server.py", "--train", "1"])
def test_tool_env_server_example_plays_and_trains_through_the_server(ran):
    """SearchQA served by `ragen-rllib serve-env`: the oracle's search calls come back as results, and an RL
    iteration runs through a remote env runner that reaches the env by URL only."""
    out, _ = ran()
    assert "tools: ['search']" in out and '> <tool_call>{"name": "search"' in out and "Doc 1 (" in out
    assert "reward=1.0 success=True" in out
    line = out.split("iter 1:")[1].splitlines()[0]
    assert "4 episodes through the server" in line and "runner errors 0" in line, line


@pytest.mark.slow
@background(lambda tmp_path: ["examples/self_play_tictactoe.py", "--iterations", "1", "--eval-episodes", "2"])
def test_self_play_example_trains_both_sides_and_plays_the_pool(ran):
    """Tic-tac-toe self-play through RLlib: one module for both agents, per-agent metrics, then x against the
    fixed opponent pool from held-out openings."""
    out, _ = ran()
    line = out.split("iter 1:")[1].splitlines()[0]
    assert "x success" in line and "o success" in line and "valid moves x" in line, line
    pool = out.split("x against the fixed pool (held-out openings): ")[1].splitlines()[0]
    assert [part.split()[0] for part in pool.split(", ")] == ["minimax", "random", "noisy"]
