"""RAGEN's early-stop rules: each fires after its patience, resets on a good step, and can be turned off."""

from ragen_rllib.algorithms.ragen.driver.early_stop import EarlyStopper


def test_reward_std_collapse_against_the_early_baseline():
    s = EarlyStopper(std_ratio=0.1, std_patience=3, std_baseline_steps=2)
    for std in (0.4, 0.6):  # baseline 0.5 -> threshold 0.05
        s.on_step(std, empty=False)
    for std in (0.01, 0.02, 0.3, 0.01, 0.04):  # a good step (0.3) resets the streak
        s.on_step(std, empty=False)
    assert s.triggered is None and s.streaks["reward_std_collapse"] == 2
    s.on_step(0.0, empty=False)
    assert s.triggered == "reward_std_collapse"
    assert s.metrics() == {"early_stopped/reward_std_collapse": 1.0, "early_stopped/empty_batches": 0.0,
                           "early_stopped/validation_floor": 0.0}


def test_empty_batches_and_validation_floor():
    s = EarlyStopper(empty_patience=2, val_patience=2, val_floor=0.01)
    s.on_step(None, empty=True)
    s.on_validation(0.0)
    s.on_validation(0.5)
    s.on_validation(0.0)
    assert s.triggered is None
    s.on_step(None, empty=True)
    assert s.triggered == "empty_batches"
    s.on_validation(0.0)
    assert s.triggered == "empty_batches"  # the first rule that fired is the one reported


def test_rules_can_be_turned_off_and_state_round_trips():
    s = EarlyStopper(std_patience=None, empty_patience=None, val_patience=None, std_baseline_steps=1)
    for _ in range(20):
        s.on_step(1.0 if not s.baseline else 0.0, empty=True)
        s.on_validation(0.0)
    assert s.triggered is None
    t = EarlyStopper(std_patience=2, std_baseline_steps=1)
    t.on_step(1.0, empty=False)
    t.on_step(0.0, empty=False)
    u = EarlyStopper(std_patience=2, std_baseline_steps=1)
    u.set_state(t.get_state())
    u.on_step(0.0, empty=False)
    assert u.triggered == "reward_std_collapse"
