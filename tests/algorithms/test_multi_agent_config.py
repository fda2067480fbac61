"""Multi-agent settings: RLlib's policies and mapping, Ragen's agent_to_module and scripted_agents, per-module
overrides -- each mistake named (key, value, fix) by validate(), before any actor starts."""

import pytest
from ray.rllib.core import DEFAULT_MODULE_ID

from ragen_rllib import RagenConfig
from ragen_rllib.core.modules import AgentToModule, is_trained, module_ids, module_of
from ragen_rllib.envs.multi_agent.tictactoe import TicTacToeEnv
from ragen_rllib.envs.multi_agent.turn_based import resolve_scripted

TTT = "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv"


def ttt():
    return (RagenConfig().environment(TTT).rl_module(model_config={"model": "tiny:nano"})
            .training(env_groups=2, group_size=2, minibatch_size=4, max_turns=5))


def test_agent_to_module_sets_rllibs_policies_and_mapping():
    c = ttt().multi_agent(agent_to_module={"x": "attacker", "o": "defender"})
    assert module_ids(c) == ["attacker", "defender"] and c.is_multi_agent
    assert isinstance(c.policy_mapping_fn, AgentToModule)
    assert (module_of(c, "x"), module_of(c, "o")) == ("attacker", "defender")
    c.validate()
    copy = c.copy(copy_frozen=False)  # the mapping survives RLlib's config copy (what every runner gets)
    assert module_of(copy, "o") == "defender"


def test_self_play_is_one_module_for_every_agent():
    c = ttt()
    assert module_ids(c) == [DEFAULT_MODULE_ID] and not c.is_multi_agent
    assert module_of(c, "x") == module_of(c, "o") == DEFAULT_MODULE_ID
    c.validate()
    both = ttt().multi_agent(agent_to_module={"x": "player", "o": "player"})
    assert module_ids(both) == ["player"]
    both.validate()


def test_rllibs_own_policy_mapping_fn_and_policies_to_train_are_honoured():
    c = ttt().multi_agent(policies=["p0", "p1"], policy_mapping_fn=lambda agent, episode, **kw: f"p{int(agent == 'o')}",
                          policies_to_train=["p1"])
    c.validate()
    assert (module_of(c, "x"), module_of(c, "o")) == ("p0", "p1")
    assert not is_trained(c, "p0") and is_trained(c, "p1")


def test_scripted_agents_resolve_to_the_envs_opponents_or_an_import_path():
    c = ttt().multi_agent(agent_to_module={"x": "x"}, scripted_agents={"o": "minimax"})
    c.validate()
    env = TicTacToeEnv()
    env.reset(seed=0)
    policy = resolve_scripted("minimax", TicTacToeEnv)
    assert policy(env, "x") == env.oracle_action("x") or policy(env, "x") in {str(i) for i in range(1, 10)}
    fn = resolve_scripted("ragen_rllib.envs.multi_agent.tictactoe:winner", TicTacToeEnv)
    assert fn(("X",) * 3 + (".",) * 6) == "X"


@pytest.mark.parametrize("change, match", [
    (lambda c: c.multi_agent(agent_to_module={"x": "x", "z": "z"}), r"agent_to_module=.*names \['z'\].*agents are"),
    (lambda c: c.multi_agent(policies=["a"], policy_mapping_fn=lambda agent, episode, **kw: "b"),
     r"maps agent 'x'.*to module 'b', which is not in policies=\['a'\]"),
    (lambda c: c.multi_agent(agent_to_module={"x": "x"}), r"policy_mapping_fn failed for agent 'o'"),
    (lambda c: c.multi_agent(scripted_agents={"o": "perfect"}),
     r"scripted_agents\['o'\]='perfect' is not one of TicTacToeEnv's opponents"),
    (lambda c: c.multi_agent(scripted_agents={"o": "no_such_module:f"}), r"scripted_agents\['o'\].*cannot import"),
    (lambda c: c.multi_agent(scripted_agents={"x": "random", "o": "random"}), "scripts every agent"),
    (lambda c: c.multi_agent(scripted_agents={"q": "random"}), r"scripted_agents\['q'\]: TicTacToeEnv has no agent"),
    (lambda c: c.multi_agent(agent_to_module={"x": "x", "o": "o"}).training(mi_interval=2),
     r"mi_interval=2: the reasoning-MI diagnostic scores with one engine"),
    (lambda c: c.multi_agent(agent_to_module={"x": "x", "o": "o"}).rl_module(
        algorithm_config_overrides_per_module={"o": {"max_turns": 3}}),
     r"overrides_per_module\['o'\]\['max_turns'\]=3: 'max_turns' is one per run"),
    (lambda c: c.multi_agent(agent_to_module={"x": "x", "o": "o"}).rl_module(
        algorithm_config_overrides_per_module={"o": {"clip_low": "big"}}),
     r"\['o'\]\['clip_low'\]='big' is invalid"),
    (lambda c: c.multi_agent(agent_to_module={"x": "x", "o": "o"}).rl_module(
        algorithm_config_overrides_per_module={"q": {"lr": 1e-3}}), r"no module 'q' in policies=\['o', 'x'\]"),
    (lambda c: c.multi_agent(agent_to_module={"x": "x", "o": "o"}).rl_module(
        algorithm_config_overrides_per_module={"o": {"adv_estimator": "gae"}}),
     r"\['adv_estimator'\]='gae': every module of a run has a value head or none"),
])
def test_multi_agent_mistakes_are_named_before_any_actor_starts(change, match):
    c = change(ttt().training(adv_estimator="grpo"))
    with pytest.raises(ValueError, match=match):
        c.validate()


def test_multi_agent_settings_on_a_single_agent_env_are_refused():
    c = (RagenConfig().environment("ragen/FrozenLake-v0").rl_module(model_config={"model": "tiny:nano"})
         .multi_agent(agent_to_module={"x": "x"}))
    with pytest.raises(ValueError, match="need a turn-based multi-agent env.*'ragen/FrozenLake-v0' is single-agent"):
        c.validate()


def test_per_module_overrides_reach_each_modules_config():
    c = ttt().training(adv_estimator="grpo", lr=1e-4).multi_agent(agent_to_module={"x": "x", "o": "o"}).rl_module(
        algorithm_config_overrides_per_module={"o": {"lr": 3e-4, "grpo_norm_by_std": False, "minibatch_size": 2}})
    c.validate()
    assert c.get_config_for_module("o").lr == 3e-4 and c.get_config_for_module("x").lr == 1e-4
    assert c.get_config_for_module("o").grpo_norm_by_std is False and c.get_config_for_module("x").grpo_norm_by_std
