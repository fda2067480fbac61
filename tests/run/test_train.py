"""`ragen-rllib train`'s pure parts: Tune-style stop keys, the progress line, bad input (exit code 2)."""

import subprocess
import sys

import pytest

from ragen_rllib.cli import _resumed_overrides, build_parser, main
from ragen_rllib.run.train import last_checkpoint, link_checkpoint, lookup, progress_line, should_stop

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


def test_checkpoint_links_survive_moving_the_run_directory(tmp_path):
    run = tmp_path / "run"
    inside = run / "trials" / "t" / "checkpoint_000001"
    outside = tmp_path / "storage" / "checkpoint_000001"
    for target in (inside, outside):
        target.mkdir(parents=True)
        (target / "rllib_checkpoint.json").write_text("{}")
    link_checkpoint(run / "checkpoints" / "iter_0001", inside)
    link_checkpoint(run / "checkpoints" / "iter_0002", outside)
    link_checkpoint(run / "checkpoints" / "iter_0002", outside)  # a rewritten link replaces the old one
    moved = run.rename(tmp_path / "moved")
    assert (moved / "checkpoints" / "iter_0001").resolve() == (moved / "trials" / "t" / "checkpoint_000001").resolve()
    assert (moved / "checkpoints" / "iter_0002").resolve() == outside.resolve()  # outside the run: absolute
    assert last_checkpoint(moved, print) == moved / "checkpoints" / "iter_0002"


@pytest.mark.parametrize("argv, message", [
    (["train", "no/such.yaml"], "config file no/such.yaml does not exist"),
    (["train", "configs/runs/frozenlake_grpo_cpu.yaml", "training.clip_hihg=0.3"], "did you mean 'clip_high'"),
    (["train", "--resume", "no/such/run"], "not a run directory"),
    (["train", "--resume", "runs/x", "configs/runs/frozenlake_grpo_cpu.yaml"], "is not read: drop it"),
    (["sweep", "--resume", "runs/x", "configs/sweeps/frozenlake_slip_rate.yaml"], "is not read: drop it"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_every_override_given_with_resume_is_kept(command):
    """argparse takes the first positional for CONFIG; with --resume it is the first override, not dropped."""
    args = build_parser().parse_args([command, "--resume", "runs/x", "training.lr=1e-6", "run.checkpoint_every=2"])
    assert _resumed_overrides(args) == ["training.lr=1e-6", "run.checkpoint_every=2"]
    args = build_parser().parse_args([command, "configs/x.yaml", "training.lr=1e-6"])
    assert _resumed_overrides(args) == ["training.lr=1e-6"]  # without --resume, CONFIG is the config


def test_train_help_works_from_the_console_script_module():
    out = subprocess.run([sys.executable, "-m", "ragen_rllib.cli", "train", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--resume RUN_DIR" in out.stdout and "section.key=value" in out.stdout


def test_a_resumed_run_gets_exactly_the_settings_it_started_with_and_logs_each_override(tmp_path):
    """The run directory's config.yaml (written as train writes it) gives the resumed run every setting of the
    started one, RLlib's included; an override on resume is applied and logged with the value it replaces."""
    import yaml
    from tests.algorithms.test_config_files import NON_DEFAULT
    from tests.algorithms.test_config_files import _settings as settings

    from ragen_rllib.run.train import CONFIG_FILE, load_run_config

    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({**NON_DEFAULT, "run": {"out_dir": str(tmp_path / "run"), "checkpoint_every": 1}}))
    started, run_dir = load_run_config(cfg, ["evaluation.evaluation_duration=4"], None, "train")
    assert run_dir == tmp_path / "run" and started.evaluation_duration == 4
    run_dir.mkdir()
    started.to_yaml(run_dir / CONFIG_FILE)  # what train writes before it starts Ray

    logged = []
    resumed, same_dir = load_run_config(None, [], run_dir, "train", logged.append)
    assert same_dir == run_dir and logged == []
    assert settings(resumed) == settings(started) and resumed.run_settings == started.run_settings

    changed, _ = load_run_config(None, ["training.lr=1e-6"], run_dir, "train", logged.append)
    assert changed.lr == 1e-6 and logged == ["resume: training.lr = 1e-06 (the run started with 3e-05)"]
    assert {k: v for k, v in settings(changed).items() if v != settings(started)[k]} == {"training.lr": 1e-6}


def test_a_sweep_resume_refuses_overrides_it_could_not_apply(tmp_path):
    from ragen_rllib.sweep.run import sweep

    with pytest.raises(ValueError, match=r"sweep --resume .* takes no overrides \(got \['training.lr=1e-6'\]\)"):
        sweep(None, ["training.lr=1e-6"], resume=tmp_path)
