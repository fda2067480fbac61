"""build_batch: padded columns and the advantages computed on the driver over whole groups."""

import numpy as np
import pytest

from ragen_rllib import RagenConfig
from ragen_rllib.agent.trajectory import Trajectory
from ragen_rllib.agent.transcript import Sample
from ragen_rllib.algorithms.ragen.driver.batch import build_batch
from ragen_rllib.core import keys as K


def est(**settings):
    """A config naming the estimator and its settings (the defaults live in RagenConfig only)."""
    return RagenConfig().training(**settings)


def traj(group: int, states: list[str], rewards: list[float]) -> Trajectory:
    """A ``full``-mode trajectory: prompt token 9, then per turn two sampled tokens and one env token."""
    ids, mask, ends = [9], [0], []
    for turn in range(len(states)):
        ids += [turn + 1, turn + 1, 9]
        mask += [1, 1, 0]
        ends.append(len(ids) - 2)
    sample = Sample(input_ids=ids, loss_mask=mask, logprobs=[-0.5 * m for m in mask], turn_ends=ends,
                    turn_rewards=list(rewards), turn_numbers=list(range(len(states))))
    return Trajectory(env_id="ragen/Bandit-v0", group_id=group, seed=group, samples=[sample], score=sum(rewards),
                      turn_states=states)


def test_gigpo_advantages_land_on_each_turns_tokens():
    trajectories = [traj(0, ["s0", "s1"], [0.0, 1.0]), traj(0, ["s0", "s2"], [0.0, 0.0])]
    batch = build_batch(trajectories, pad_id=0,
                        config=est(adv_estimator="gigpo", grpo_norm_by_std=False, gigpo_gamma=0.5))
    # episode level: +0.5 / -0.5; step level: state s0 returns 0.5 vs 0 -> +0.25 / -0.25, s1 and s2 alone -> 0.
    expected = np.array([[0, 0.75, 0.75, 0, 0.5, 0.5, 0], [0, -0.75, -0.75, 0, -0.5, -0.5, 0]], dtype=np.float32)
    np.testing.assert_allclose(batch[K.ADVANTAGES], expected, atol=1e-6)
    grpo = build_batch(trajectories, pad_id=0, config=est(adv_estimator="grpo", grpo_norm_by_std=False))
    np.testing.assert_allclose(grpo[K.ADVANTAGES], np.sign(expected) * 0.5, atol=1e-6)


def test_gigpo_refuses_untrained_turns():
    broken = traj(0, ["s0", "s1"], [0.0, 1.0])
    broken.turn_states.append("s9")  # a turn the samples never trained
    with pytest.raises(ValueError, match="every turn must be trained"):
        build_batch([broken, traj(0, ["s0"], [0.0])], pad_id=0, config=est(adv_estimator="gigpo"))


@pytest.mark.parametrize("estimator, expected", [
    ("dr_grpo", [0.5, -0.5, 0.0]),  # group 0 scores 1, 0 (mean .5); group 1 alone
    ("grpo", [0.5 / (0.5 ** 0.5 + 1e-6), -0.5 / (0.5 ** 0.5 + 1e-6), 0.0]),  # unbiased std of (1, 0) = sqrt(.5)
    ("rloo", [1.0, -1.0, 0.0]),  # score minus the mean of the others
])
def test_group_estimators_per_trajectory(estimator, expected):
    trajectories = [traj(0, ["a"], [1.0]), traj(0, ["b"], [0.0]), traj(1, ["c"], [3.0])]
    batch = build_batch(trajectories, pad_id=0, config=est(adv_estimator=estimator))
    np.testing.assert_allclose(batch[K.ADVANTAGES][:, 1], expected, rtol=1e-5)
    assert np.all(batch[K.ADVANTAGES][batch[K.LOSS_MASK] == 0] == 0)


def test_reinforce_plus_plus_whitens_discounted_returns_over_the_batch():
    trajectories = [traj(0, ["a", "b"], [0.0, 1.0]), traj(1, ["c"], [0.0])]
    batch = build_batch(trajectories, pad_id=0, config=est(adv_estimator="reinforce_plus_plus", gamma=0.5))
    # trained tokens (row 0: 4 tokens, row 1: 2): returns-to-go with gamma .5 per token from the reward 1
    # on row 0's last trained token: .125 .25 .5 1 and 0 0; then whitened over those six tokens
    raw = np.array([0.125, 0.25, 0.5, 1.0, 0.0, 0.0])
    white = (raw - raw.mean()) / np.sqrt(raw.var(ddof=1) + 1e-8)
    got = np.concatenate([batch[K.ADVANTAGES][0][batch[K.LOSS_MASK][0] > 0],
                          batch[K.ADVANTAGES][1][batch[K.LOSS_MASK][1] > 0]])
    np.testing.assert_allclose(got, white, rtol=1e-5)
    base = build_batch(trajectories + [traj(1, ["d"], [1.0])], pad_id=0,
                       config=est(adv_estimator="reinforce_plus_plus_baseline"))
    # minus the group mean: row 0 -> 0 (alone in group 0), rows 1, 2 -> -.5, +.5; whitened over all tokens
    assert base[K.ADVANTAGES][1, 1] < 0 < base[K.ADVANTAGES][2, 1]
    assert abs(base[K.ADVANTAGES][base[K.LOSS_MASK] > 0].mean()) < 1e-6


def test_group_statistics_count_each_episode_once_in_per_turn_modes():
    """limited_multi_turn / single_turn: one sample per turn, each training only its own turn."""
    two_turns = traj(0, ["a", "b"], [0.0, 1.0])
    full = two_turns.samples[0]
    per_turn = []
    for k, end in enumerate(full.turn_ends):
        mask = [1 if end - 1 <= j <= end else 0 for j in range(len(full.input_ids))]
        per_turn.append(Sample(input_ids=full.input_ids, loss_mask=mask, logprobs=[-0.5 * m for m in mask],
                               turn_ends=[end], turn_rewards=[full.turn_rewards[k]], turn_numbers=[k]))
    two_turns.samples = per_turn
    batch = build_batch([two_turns, traj(0, ["c"], [0.0])], pad_id=0, config=est(adv_estimator="dr_grpo"))
    assert batch[K.EPISODE_IDS].tolist() == [0, 0, 1]
    # episodes score 1 and 0 -> +-0.5 (counting the two-sample episode twice would give mean 2/3)
    assert [batch[K.ADVANTAGES][r][batch[K.LOSS_MASK][r] > 0][0] for r in range(3)] == [0.5, 0.5, -0.5]
    gigpo = build_batch([two_turns, traj(0, ["a"], [0.0])], pad_id=0,
                        config=est(adv_estimator="gigpo", grpo_norm_by_std=False, gigpo_gamma=1.0))
    # episode +-0.5; anchor "a": returns 1 and 0 -> +-0.5; turn "b" alone -> 0
    assert [gigpo[K.ADVANTAGES][r][gigpo[K.LOSS_MASK][r] > 0][0] for r in range(3)] == [1.0, 0.5, -1.0]


def test_engine_logprobs_that_the_engine_never_returned_fail_loudly():
    """old_logprobs='engine' would otherwise train on zeros as the old policy (ratio e^logp)."""
    from ragen_rllib.agent.transcript import Sample as S

    blind = S()
    blind.extend([9], trained=False)
    blind.extend([1, 2], trained=True, logprobs=None)  # an engine without log-probs
    lost = Trajectory(env_id="ragen/Bandit-v0", group_id=0, seed=0, samples=[blind], score=1.0, turn_states=["s"])
    others = [traj(0, ["s"], [0.0])]
    build_batch([lost, *others], pad_id=0, config=est(adv_estimator="grpo"))  # fine when the learner recomputes them
    with pytest.raises(ValueError, match="old_logprobs='engine'.*returned none.*old_logprobs='learner'"):
        build_batch([lost, *others], pad_id=0, config=est(adv_estimator="grpo", old_logprobs="engine"))


def test_the_driver_writes_every_column_the_learner_needs():
    batch = build_batch([traj(0, ["s"], [1.0]), traj(0, ["s"], [0.0])], pad_id=0, config=est(adv_estimator="gae"))
    assert set(K.LEARNER_INPUTS) <= set(batch)
    assert batch[K.ADVANTAGES].shape == batch[K.LOSS_MASK].shape and not batch[K.ADVANTAGES].any()  # learner's job
    assert batch[K.LOSS_SCALE].tolist() == [1.0, 1.0] and batch[K.MICRO_WEIGHT].tolist() == [1.0, 1.0]
    for key, column in K.COLUMNS.items():
        if column.writer == "build_batch":
            assert key in batch, key
