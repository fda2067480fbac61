"""benchmarks/sokoban_filter.py: a run's entry from its Tune results (a resumed launch's iterations replace the
stopped one's), the record's merge of runs made in other processes, and the launch command's refusals."""

import json
import math
import os
import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from sokoban_filter import entry_of, merge, train_command  # noqa: E402

CONFIG = """environment:
  val_env_tags:
    - {tag: SimpleSokoban, groups: 128}
run:
  stop: {training_iteration: 4}
"""


def result(iteration, success, seconds=10.0, before=None, validation=None, entropy=0.5):
    r = {"training_iteration": iteration, "time_this_iter_s": seconds,
         "env_runners": {"success_rate": success, "action_valid_rate": 1.0, "in_group_reward_std_mean": 0.4,
                         "filter_kept_ratio": 0.5},
         "learners": {"__all_modules__": {"num_trainable_parameters": 3}, "default_policy": {"entropy": entropy}},
         "timers": {"ragen_sample_s": 4.0, "ragen_learn_s": 6.0}}
    if before is not None:
        r["evaluation_before_training"] = {"env_runners": {"success_rate": before, "action_valid_rate": 0.99}}
    if validation is not None:
        r["evaluation"] = {"env_runners": {"success_rate": validation, "action_valid_rate": 1.0}}
    return r


def make_run(tmp_path: Path, launches: list[list[dict]]) -> Path:
    run = tmp_path / "filter_seed0"
    run.mkdir()
    (run / "config.yaml").write_text(CONFIG)
    for i, rows in enumerate(launches):
        trial = run / "trials" / f"launch{i}"
        trial.mkdir(parents=True)
        path = trial / "result.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1000 + i, 1000 + i))  # later launches are newer
    return run


def test_entry_joins_launches_and_measures_the_lift_with_its_standard_error(tmp_path):
    first = [result(1, 0.1, before=0.0625), result(2, 0.2, validation=0.10), result(3, 0.9, seconds=99.0)]
    resumed = [result(3, 0.3, validation=0.125), result(4, 0.4, validation=0.25)]  # restarted from iteration 2
    entry = entry_of(make_run(tmp_path, [first, resumed]), "filter", 0)
    assert entry["before"] == 0.0625 and entry["after"] == 0.25 and entry["after_iteration"] == 4
    assert entry["lift_points"] == pytest.approx(18.75)
    se = math.hypot(100 * math.sqrt(0.0625 * 0.9375 / 128), 100 * math.sqrt(0.25 * 0.75 / 128))
    assert entry["lift_se_points"] == pytest.approx(se)
    assert entry["iterations"] == 4 and entry["complete"] and entry["rl_seconds"] == pytest.approx(40.0)
    assert entry["curves"]["success_rate"] == [0.1, 0.2, 0.3, 0.4]  # the resumed launch's iteration 3
    assert entry["curves"]["entropy"] == [0.5] * 4 and entry["curves"]["reasoning_mi"] == [None] * 4
    assert [v["iteration"] for v in entry["validation"]] == [2, 3, 4] and entry["validation_maps"] == 128


def test_an_unfinished_run_is_marked_incomplete_and_an_empty_one_has_no_entry(tmp_path):
    entry = entry_of(make_run(tmp_path, [[result(1, 0.1, before=0.05), result(2, 0.1)]]), "no_filter", 0)
    assert not entry["complete"] and entry["after"] is None and entry["lift_points"] is None
    empty = tmp_path / "empty"
    (empty / "trials").mkdir(parents=True)
    assert entry_of(empty, "filter", 1) is None


def test_merge_replaces_its_own_entry_keeps_the_others_and_summarizes_complete_runs(tmp_path):
    path = tmp_path / "record.json"
    cpu = {"model": "some CPU"}
    a = {"arm": "filter", "seed": 0, "lift_points": 12.0, "complete": True}
    b = {"arm": "no_filter", "seed": 0, "lift_points": -3.0, "complete": False}
    path.write_text(json.dumps(merge(path, dict(a), "cmd a", cpu)))
    path.write_text(json.dumps(merge(path, dict(b), "cmd b", cpu)))
    rec = merge(path, {**a, "lift_points": 8.0}, "cmd a --resume", cpu)
    assert [(e["arm"], e["seed"], e["lift_points"]) for e in rec["entries"]] == [("filter", 0, 8.0),
                                                                               ("no_filter", 0, -3.0)]
    assert rec["entries"][0]["commands"] == ["cmd a", "cmd a --resume"]
    assert rec["summary"]["filter"]["lifts"] == [8.0] and rec["summary"]["filter"]["seeds_meeting_target"] == 0
    assert rec["summary"]["no_filter"]["seeds_complete"] == []  # an unfinished run is not counted


def test_launch_refuses_to_resume_nothing_or_to_start_over_a_run(tmp_path):
    args = Namespace(overrides=[], iterations=None, resume=True, model="m", arm="filter", seed=0)
    with pytest.raises(SystemExit, match="holds no run"):
        train_command(args, tmp_path / "none")
    run = make_run(tmp_path, [[result(1, 0.1)]])
    assert train_command(args, run)[:3] == ["train", "--resume", str(run)]
    with pytest.raises(SystemExit, match="already holds a run"):
        train_command(Namespace(**{**vars(args), "resume": False}), run)
    fresh = train_command(Namespace(**{**vars(args), "resume": False, "arm": "no_filter", "iterations": 7}),
                          tmp_path / "new")
    assert "training.filter_strategy=null" in fresh and "debugging.seed=0" in fresh
    assert "run.stop.training_iteration=7" in fresh and "rl_module.model_config.model=m" in fresh
