"""`ragen-rllib train`'s pure parts: Tune-style stop keys, the progress line, bad input (exit code 2)."""

import subprocess
import sys

import pytest

from ragen_rllib.cli import main
from ragen_rllib.training_run import last_checkpoint, lookup, progress_line, should_stop

RESULT = {"training_iteration": 3, "num_env_steps_sampled_lifetime": 120,
          "env_runners": {"success_rate": 0.25, "episode_return_mean": 0.1, "action_valid_rate": 1.0,
                          "generated_tokens_per_s": 410.0, "num_env_steps_sampled_lifetime": 120},
          "timers": {"ragen_sample_s": 5.0, "ragen_learn_s": 7.5, "ragen_weight_sync_s": 0.12},
          "evaluation": {"env_runners": {"success_rate": 0.5}}}


def test_stop_keys_follow_tune():
    assert lookup(RESULT, "env_runners/success_rate") == 0.25 and lookup(RESULT, "nope/x") is None
    assert should_stop(RESULT, {"training_iteration": 4}) is None
    assert should_stop(RESULT, {"training_iteration": 3}) == "training_iteration=3 >= 3"
    assert should_stop(RESULT, {"env_runners/num_env_steps_sampled_lifetime": 100}).startswith("env_runners/")
    assert should_stop({**RESULT, "done": True}, {}) == "done (an early-stop rule fired)"


def test_progress_line_shows_success_speed_phases_and_validation():
    line = progress_line(RESULT)
    for part in ("iter    3", "success 25.0%", "return +0.100", "tokens/s 410", "sample 5.0 s", "learn 7.5 s",
                 "sync 0.12 s", "validation 50.0%"):
        assert part in line, (part, line)
    assert "success -" in progress_line({"training_iteration": 1, "env_runners": {}})  # filtered-out step


def test_resume_takes_the_newest_complete_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no complete checkpoint under"):
        last_checkpoint(tmp_path)
    links = tmp_path / "checkpoints"
    for step, complete in ((1, True), (2, True), (3, False)):  # iteration 3: a link to a checkpoint never finished
        target = tmp_path / "trials" / f"checkpoint_{step}"
        target.mkdir(parents=True)
        if complete:
            (target / "rllib_checkpoint.json").write_text("{}")
        links.mkdir(exist_ok=True)
        (links / f"iter_{step:04d}").symlink_to(target, target_is_directory=True)
    said = []
    assert last_checkpoint(tmp_path, said.append) == links / "iter_0002"
    assert said == [f"skipping {links / 'iter_0003'}: not a complete checkpoint (no rllib_checkpoint.json)"]


@pytest.mark.parametrize("argv, message", [
    (["train", "no/such.yaml"], "config file no/such.yaml does not exist"),
    (["train", "configs/runs/frozenlake_grpo_cpu.yaml", "training.clip_hihg=0.3"], "did you mean 'clip_high'"),
    (["train", "--resume", "no/such/run"], "not a run directory"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1


def test_train_help_works_from_the_console_script_module():
    out = subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "train", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--resume RUN_DIR" in out.stdout and "section.key=value" in out.stdout
