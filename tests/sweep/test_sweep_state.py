"""A killed sweep's truncated Tune state is put back from the driver's staging copy before ``sweep --resume``."""

import json
import pickle

import pytest
from ray import tune
from ray.tune.search.basic_variant import BasicVariantGenerator

from ragen_rllib.sweep.state import mend_experiment_state

SESSION = "2026-12-06_09-00-00"


def staged_sweep(tmp_path):
    """An experiment directory and Ray's temp dir with a driver staging copy of the same two state files (a real
    BasicVariantGenerator's state and an experiment state), as Tune leaves them."""
    experiment = tmp_path / "shared" / "sweep_a"
    staging = tmp_path / "ray" / "session_1" / "artifacts" / "2026-12-06" / "sweep_a" / "driver_artifacts"
    for d in (experiment, staging):
        d.mkdir(parents=True)
        searcher = BasicVariantGenerator()
        searcher.add_configurations({"exp": {"run": "PPO", "config": {"a": tune.grid_search([1, 2])}}})
        searcher.save_to_dir(str(d), SESSION)
        (d / f"experiment_state-{SESSION}.json").write_text(json.dumps({"trial_data": [["t1", "t2"]]}))
    return experiment, tmp_path / "ray"


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return data


@pytest.mark.parametrize("name", [f"basic-variant-state-{SESSION}.json", f"experiment_state-{SESSION}.json"])
def test_a_truncated_state_file_is_put_back_from_the_staging_copy_and_kept(tmp_path, name):
    experiment, ray_temp = staged_sweep(tmp_path)
    whole = truncate(experiment / name)
    if name.startswith("basic"):
        with pytest.raises((EOFError, pickle.UnpicklingError)):  # what tune.Tuner.restore hits without the mend
            BasicVariantGenerator().restore_from_dir(str(experiment))
    lines = []
    assert mend_experiment_state(experiment, ray_temp, lines.append) == [experiment / name]
    assert (experiment / name).read_bytes() == next(ray_temp.rglob(name)).read_bytes()
    assert len((experiment / f"{name}.truncated").read_bytes()) == len(whole) // 2  # nothing is thrown away
    assert "truncated" in lines[0] and name in lines[0]
    BasicVariantGenerator().restore_from_dir(str(experiment))  # Tune reads it again
    json.loads((experiment / f"experiment_state-{SESSION}.json").read_text())


def test_readable_state_is_left_alone(tmp_path):
    experiment, ray_temp = staged_sweep(tmp_path)
    before = {p.name: p.read_bytes() for p in experiment.iterdir()}
    assert mend_experiment_state(experiment, ray_temp, print) == []
    assert {p.name: p.read_bytes() for p in experiment.iterdir()} == before


def test_a_truncated_state_without_a_readable_copy_is_refused_by_name(tmp_path):
    experiment, ray_temp = staged_sweep(tmp_path)
    name = f"basic-variant-state-{SESSION}.json"
    truncate(experiment / name)
    truncate(next(ray_temp.rglob(name)))  # the staging copy is broken too
    with pytest.raises(RuntimeError, match=f"{name} cannot be read.*cannot be resumed.*without --resume"):
        mend_experiment_state(experiment, ray_temp, print)
    assert not (experiment / f"{name}.truncated").exists()  # nothing moved
