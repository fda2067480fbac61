"""The demo's model is found in one place; a missing one is never replaced by an untrained model silently."""

import pytest

from ragen_rllib.core import precision
from ragen_rllib.recipes.demo_model import DEMO_EPOCHS, DEMO_NOISE, demo_model, demo_model_path


@pytest.mark.parametrize("bf16_units, tag", [(True, "bf16"), (False, "fp32")])
def test_the_path_names_the_settings_and_the_precision_auto_picks(monkeypatch, tmp_path, bf16_units, tag):
    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: bf16_units)
    path = demo_model_path(tmp_path)
    assert path == tmp_path / "demo" / f"small-frozenlake-{DEMO_EPOCHS}ep-noise{DEMO_NOISE:g}-{tag}"
    assert demo_model_path(tmp_path, 1, 0.3, autocast=None).name == "small-frozenlake-1ep-noise0.3-fp32"


def test_a_missing_model_raises_and_says_how_to_build_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing at .*small-frozenlake.*scripts/demo.sh"):
        demo_model(tmp_path, build=False)
