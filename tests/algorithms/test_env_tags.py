"""Multi-env runs: tag parsing, the split of groups over runners, seeds, and the config keys around them."""

from pathlib import Path

import pytest
import yaml

from ragen_rllib import RagenConfig
from ragen_rllib.core.env_tags import EnvTag, flatten, parse_tags, split_groups, train_seed, val_seed
from ragen_rllib.envs.tags import RAGEN_TAGS

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _tags(**groups):
    return [EnvTag(tag=name, env="ragen/FrozenLake-v0", groups=n) for name, n in groups.items()]


def test_split_keeps_whole_groups_in_tag_order_and_a_tag_may_straddle_runners():
    blocks = split_groups(_tags(A=3, B=1), 2)
    assert [[(s.tag.tag, s.tag_index) for s in b] for b in blocks] == [[("A", 0), ("A", 1)], [("A", 2), ("B", 0)]]
    assert [s.index for b in blocks for s in b] == [0, 1, 2, 3]
    blocks = split_groups(_tags(A=2, B=4), 3)
    assert [[(s.tag.tag, s.tag_index) for s in b] for b in blocks] == \
        [[("A", 0), ("A", 1)], [("B", 0), ("B", 1)], [("B", 2), ("B", 3)]]
    assert split_groups(_tags(A=5), 1)[0] == flatten(_tags(A=5))


def test_split_refuses_an_uneven_total_and_names_a_fix():
    with pytest.raises(ValueError, match=r"5 env groups \(A: 3, B: 2\) do not split evenly over "
                                         r"num_env_runners=2.*use a total of 4 or 6 groups"):
        split_groups(_tags(A=3, B=2), 2)


def test_seeds_training_fresh_per_group_and_step_validation_fixed_per_tag():
    tags = [EnvTag("A", "x", groups=2), EnvTag("B", "x", groups=2, seed=500)]
    slots = flatten(tags)
    assert [train_seed(s, step=3, env_groups=4, base=10000) for s in slots] == [10012, 10013, 10014, 10015]
    assert [val_seed(s, default=123) for s in slots] == [123, 124, 500, 501]


def test_parse_fills_builtin_tags_and_keeps_overrides():
    a, b = parse_tags([{"tag": "SimpleSokoban", "groups": 2},
                       {"tag": "LargerSokoban", "groups": 1, "env_config": {"max_steps": 50}, "seed": 7}], "env_tags")
    assert (a.env, a.env_config, a.groups, a.seed) == ("ragen/Sokoban-v0", RAGEN_TAGS["SimpleSokoban"].env_config,
                                                       2, None)
    assert b.env_config == {**RAGEN_TAGS["LargerSokoban"].env_config, "max_steps": 50} and b.seed == 7


@pytest.mark.parametrize("entries, match", [
    ([], r"env_tags=\[\] is invalid: use a non-empty list"),
    ([{"tag": "Mystery", "groups": 1}], r"env_tags\[0\]: tag 'Mystery' is not built in.*needs 'env'"),
    ([{"tag": "SimpleSokobn", "groups": 1}], r"did you mean \['SimpleSokoban'"),
    ([{"tag": "FrozenLake", "group": 1}], r"env_tags\[0\]: unknown key\(s\) 'group' \(did you mean 'groups'\?\)"),
    ([{"tag": "FrozenLake", "groups": 0}], r"env_tags\[0\].groups=0 is invalid: use a positive integer"),
    ([{"tag": "a/b", "env": "ragen/FrozenLake-v0", "groups": 1}], r"tag='a/b' is invalid: .*without '/'"),
    ([{"tag": "FrozenLake", "groups": 1}, {"tag": "FrozenLake", "groups": 2}], r"\['FrozenLake'\] appear twice"),
])
def test_parse_rejects_bad_entries_by_key_path(entries, match):
    with pytest.raises(ValueError, match=match):
        parse_tags(entries, "env_tags")


@pytest.mark.parametrize("tag, file", [
    ("SimpleSokoban", "simple_sokoban"), ("CoordSokoban", "coord_sokoban"), ("LargerSokoban", "larger_sokoban"),
    ("FrozenLake", "frozenlake"), ("CoordFrozenLake", "coord_frozenlake"), ("Bandit", "bandit"),
    ("Countdown", "countdown"), ("MetaMathQA", "metamathqa"), ("Sudoku", "sudoku"), ("2048", "2048"),
    ("RubiksCube2x2", "rubiks_cube_2x2")])
def test_builtin_tags_equal_the_shipped_env_configs(tag, file):
    c = RagenConfig.from_yaml(CONFIGS / "envs" / f"{file}.yaml")
    assert (c.env, dict(c.env_config)) == (RAGEN_TAGS[tag].env, RAGEN_TAGS[tag].env_config)


def _multi(**kw):
    return (RagenConfig()
            .environment(env_tags=[{"tag": "SimpleSokoban", "groups": 2}, {"tag": "FrozenLake", "groups": 1}],
                         **kw)
            .rl_module(model_config={"model": "tiny:nano"})
            .training(group_size=2, minibatch_size=2))


def test_config_env_tags_set_env_groups_and_default_validation_tags():
    c = _multi()
    c.validate()
    assert c.env_groups == 3 and c.env == "ragen/Sokoban-v0"
    assert [(t.tag, t.groups, t.seed) for t in c.val_tags] == [("SimpleSokoban", 16, None), ("FrozenLake", 16, None)]
    c = _multi(val_env_tags=[{"tag": "LargerSokoban", "groups": 4, "seed": 9}])
    assert [(t.tag, t.groups, t.seed) for t in c.val_tags] == [("LargerSokoban", 4, 9)]


@pytest.mark.parametrize("change, match", [
    (lambda c: c.training(env_groups=4), r"env_groups=4 disagrees with the env_tags' groups \(2 \+ 1 = 3\)"),
    (lambda c: c.env_runners(num_env_runners=2), r"env_tags: 3 env groups .* num_env_runners=2"),
    (lambda c: c.environment(val_env_tags=[{"tag": "Nope", "env": "ragen/Nope-v0", "groups": 2}]),
     r"env='ragen/Nope-v0' is not a registered gymnasium id"),
    (lambda c: c.environment(env_modules=["no_such_module_xyz"]), r"env_modules: cannot import 'no_such_module_xyz'"),
])
def test_validate_rejects_bad_multi_env_settings(change, match):
    c = change(_multi())
    with pytest.raises(ValueError, match=match):
        c.validate()


def test_multi_env_yaml_round_trips(tmp_path):
    path = tmp_path / "multi.yaml"
    path.write_text(yaml.safe_dump({
        "environment": {"env_tags": [{"tag": "SimpleSokoban", "groups": 2}, {"tag": "FrozenLake", "groups": 2}],
                        "val_env_tags": [{"tag": "LargerSokoban", "groups": 2, "seed": 5}]},
        "rl_module": {"model_config": {"model": "tiny:nano"}},
        "training": {"group_size": 2, "minibatch_size": 2}}))
    c = RagenConfig.from_yaml(path)
    assert c.env_groups == 4 and [t.tag for t in c.val_tags] == ["LargerSokoban"]
    back = tmp_path / "back.yaml"
    c.to_yaml(back)
    assert RagenConfig.from_yaml(back).to_yaml() == c.to_yaml()
