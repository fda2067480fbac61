"""benchmarks/multi_agent_records.py: a learning record grows by seeds run in other processes (``--resume``,
``--merge-from``) only when their settings, CPU and warm-start evaluation are the record's own."""

import json
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from multi_agent_records import merge_records, resumed  # noqa: E402


def record(seeds, lifts, **args):
    return {"command": f"python benchmarks/learning_pair.py --seeds {' '.join(map(str, seeds))}",
            "cpu": {"model": "AMD EPYC"}, "seconds": 100.0,
            "args": {"pair": "guided_lake", "iterations": 10, "seeds": list(seeds), "name": "a", **args},
            "before": {"joint_success": 0.18, "seconds": 259.0},
            "runs": [{"seed": s, "lift_points": x, "lift_se_points": 5.0} for s, x in zip(seeds, lifts)]}


def write(path: Path, rec: dict) -> Path:
    path.write_text(json.dumps(rec))
    return path


def test_merge_adds_the_other_records_seeds_and_recomputes_the_spread(tmp_path):
    main = write(tmp_path / "a.json", record([0], [11.7]))
    other = write(tmp_path / "b.json", {**record([1], [4.0], name="b", resume=False, merge_from=None),
                                        "before": {"joint_success": 0.18, "seconds": 250.0}})
    plotted = []
    merged = merge_records(main, other, lambda rec, path: plotted.append(path))
    assert [r["seed"] for r in merged["runs"]] == [0, 1] and merged["args"]["seeds"] == [0, 1]
    assert merged["mean_lift_points"] == pytest.approx(7.85)
    assert merged["std_lift_points"] == pytest.approx(statistics.stdev([11.7, 4.0]))
    assert merged["merged_from"] == [{"record": "b.json", "command": other_command(other), "seeds": [1]}]
    assert json.loads(main.read_text()) == merged and plotted == [main.with_suffix(".png")]


def other_command(path: Path) -> str:
    return json.loads(path.read_text())["command"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r["args"].update(iterations=12), "iterations=10, this command has iterations=12"),
    (lambda r: r["before"].update(joint_success=0.2), "differ in 'before'"),
    (lambda r: r.update(cpu={"model": "Intel Xeon"}), "differ in 'cpu'"),
    (lambda r: r["runs"][0].update(seed=0), r"seeds \[0\] are in both"),
])
def test_merge_refuses_a_record_of_other_settings_or_the_same_seed(tmp_path, change, message):
    main = write(tmp_path / "a.json", record([0], [11.7]))
    other = record([1], [4.0], name="b")
    change(other)
    with pytest.raises(ValueError, match=message):
        merge_records(main, write(tmp_path / "b.json", other), lambda rec, path: None)
    assert json.loads(main.read_text()) == record([0], [11.7])  # nothing written


def test_resume_needs_an_existing_record(tmp_path):
    with pytest.raises(FileNotFoundError, match="run without --resume first"):
        resumed(tmp_path / "missing.json", {})
