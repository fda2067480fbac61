"""A multi-env run on the real stack: two tags in training on two runners, three in validation, per-tag metrics."""

import pytest

from ragen_rllib.core import keys as K

pytestmark = pytest.mark.slow


def test_two_tags_train_three_validate_with_per_tag_metrics(ray_session, tiny_config):
    lake = {"tag": "Lake", "env": "ragen/FrozenLake-v0", "env_config": {"size": 4, "success_rate": 1.0}}
    config = (tiny_config(num_env_runners=2, adv_estimator="grpo", group_size=2, minibatch_size=4)
              .environment(env_tags=[{**lake, "groups": 1}, {"tag": "SimpleSokoban", "groups": 1}],
                           val_env_tags=[{"tag": "SimpleSokoban", "groups": 1}, {"tag": "LargerSokoban", "groups": 1},
                                         {**lake, "groups": 2, "seed": 7}])
              .evaluation(evaluation_interval=1))
    algo = config.build_algo()
    try:
        held = algo.env_runner_group.foreach_env_runner(
            lambda r: ([s.tag.tag for s in r.train_slots], [s.tag.tag for s in r.val_slots],
                       r.group_seeds(0, validation=True), [type(e.unwrapped).__name__ for e in r.envs]),
            local_env_runner=False)
        assert sorted(held) == [(["Lake"], ["SimpleSokoban", "LargerSokoban"], [123, 123],  # each tag from val_seed
                                 ["FrozenLakeEnv", "FrozenLakeEnv"]),
                                (["SimpleSokoban"], ["Lake", "Lake"], [7, 8], ["SokobanEnv", "SokobanEnv"])]
        result = algo.train()
        runners, val = result["env_runners"], result["evaluation"]["env_runners"]
        for tag in ("Lake", "SimpleSokoban"):
            assert 0.0 <= runners[f"{tag}/{K.SUCCESS_RATE}"] <= 1.0 and f"{tag}/{K.PASS_AT_K}" in runners
        for tag in ("Lake", "SimpleSokoban", "LargerSokoban"):
            assert 0.0 <= val[f"{tag}/{K.SUCCESS_RATE}"] <= 1.0
        overall = sum(runners[f"{t}/{K.SUCCESS_RATE}"] for t in ("Lake", "SimpleSokoban")) / 2  # equal counts per tag
        assert runners[K.SUCCESS_RATE] == pytest.approx(overall)
        assert result["env_runners"]["num_episodes"] == 4
    finally:
        algo.stop()
