import math

import pytest

from ragen_rllib.rl.schedules import lr_multiplier


def test_constant_without_warmup_is_one():
    assert [lr_multiplier(s) for s in range(3)] == [1.0, 1.0, 1.0]


def test_linear_warmup_then_constant():
    assert [lr_multiplier(s, warmup_steps=4) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_linear_decay_reaches_the_floor_at_decay_steps_and_stays():
    got = [lr_multiplier(s, warmup_steps=2, decay="linear", decay_steps=6, min_ratio=0.2) for s in range(8)]
    assert got == pytest.approx([0.5, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2])


def test_cosine_decay_by_hand():
    got = [lr_multiplier(s, decay="cosine", decay_steps=4) for s in range(6)]
    half = 0.5 * (1 + math.cos(math.pi / 4))
    assert got == pytest.approx([1.0, half, 0.5, 1 - half, 0.0, 0.0])


@pytest.mark.parametrize("kwargs", [dict(decay="step"), dict(decay="linear"), dict(decay="cosine", decay_steps=2,
                                                                                       warmup_steps=2)])
def test_bad_settings_name_the_key(kwargs):
    with pytest.raises(ValueError, match="lr_decay"):
        lr_multiplier(5, **kwargs)
