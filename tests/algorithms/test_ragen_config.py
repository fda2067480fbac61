"""RagenConfig: RAGEN's defaults in one place, and impossible settings rejected before any actor starts."""

import pytest

from ragen_rllib import Ragen, RagenConfig
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.algorithms.ragen.config.hyperparams import HYPERPARAMS


def tiny():
    return (RagenConfig().environment("ragen/FrozenLake-v0", env_config={"size": 4})
            .rl_module(model_config={"model": "tiny:nano"}))


def test_defaults_follow_ragen():
    c = RagenConfig()
    assert (c.env_groups, c.group_size, c.adv_estimator) == (8, 16, "gae")
    assert (c.clip_low, c.clip_high, c.dual_clip, c.entropy_coeff) == (0.2, 0.28, 3.0, 0.001)
    assert (c.lr, c.critic_lr, c.grad_clip, c.num_epochs, c.minibatch_size) == (1e-6, 1e-5, 1.0, 1, 32)
    assert (c.train_temperature, c.val_temperature, c.max_turns, c.max_actions_per_turn) == (1.0, 0.5, 5, 2)
    assert c.max_response_tokens == AgentConfig().max_response_tokens == 400
    assert c.algo_class is Ragen and Ragen.get_default_config().env_groups == 8
    assert all(meaning for _, meaning in HYPERPARAMS.values())
    assert "clip_high" in RagenConfig.training.__doc__


def test_training_sets_ragen_and_rllib_keys():
    c = tiny().training(adv_estimator="grpo", group_size=4, env_groups=2, lr=1e-5, minibatch_size=8)
    assert (c.adv_estimator, c.group_size, c.lr, c.minibatch_size) == ("grpo", 4, 1e-5, 8)
    assert c.agent_config().max_turns == 5
    c.validate()


def test_unknown_training_key_is_named_with_the_nearest_names():
    with pytest.raises(ValueError, match="'clip_hihg' \\(did you mean 'clip_high'"):
        tiny().training(clip_hihg=0.3)
    with pytest.raises(ValueError, match="'minibatch_sise' \\(did you mean 'minibatch_size'"):  # an RLlib key
        tiny().training(minibatch_sise=8)


def test_every_hyperparameter_is_typed_with_a_default_and_a_meaning():
    from dataclasses import fields

    from ragen_rllib.algorithms.ragen.config.hyperparams import TYPES, RagenHyperparams

    names = [f.name for f in fields(RagenHyperparams)]
    assert names == list(HYPERPARAMS) == list(TYPES)
    c = RagenConfig()
    for name in names:  # the instance holds the declared default, of the declared type
        default, meaning = HYPERPARAMS[name]
        assert getattr(c, name) == default and meaning
    assert issubclass(RagenConfig, RagenHyperparams)  # the typed attributes an IDE / type checker sees
    assert RagenConfig().engine_kwargs is not RagenConfig().engine_kwargs  # mutable defaults are not shared


@pytest.mark.parametrize("change, match", [
    (lambda c: c.env_runners(num_env_runners=3).training(env_groups=8),
     "env_groups=8.*num_env_runners=3.*use a total of 6 or 9 groups"),
    (lambda c: c.training(adv_estimator="grpo", group_size=1), "group_size=1.*adv_estimator='grpo' compares"),
    (lambda c: c.training(adv_estimator="gigpo", group_size=1), "group_size=1.*adv_estimator='gigpo' compares"),
    (lambda c: c.training(adv_estimator="rloo", group_size=1), "group_size=1.*rloo"),
    (lambda c: c.training(adv_estimator="bi_level_gae", use_turn_scores=True), "use_turn_scores=True.*bi_level_gae"),
    (lambda c: c.rl_module(model_config={"model": "tiny:nano", "value_head": False}).training(adv_estimator="gae"),
     r"value_head'\]=False disagrees with adv_estimator='gae', which needs a critic"),
    (lambda c: c.rl_module(model_config={"model": "tiny:nano", "value_head": True}).training(adv_estimator="grpo"),
     r"value_head'\]=True disagrees with adv_estimator='grpo', which has no critic"),
    (lambda c: c.training(adv_estimator="gigpo", gigpo_gamma=1.5), "gigpo_gamma=1.5"),
    (lambda c: c.training(adv_estimator="ppo2"), "adv_estimator='ppo2'"),
    (lambda c: c.training(minibatch_size=1000, env_groups=2, group_size=4), "minibatch_size=1000.*8 trajectories"),
    (lambda c: c.training(engine="tgi"), "engine='tgi'"),
    (lambda c: c.training(train_temperature=0.0), "train_temperature=0.0"),
    (lambda c: c.training(context_mode="everything"), "context_mode='everything'"),
    (lambda c: c.training(max_response_tokens=5000), "max_response_tokens=5000.*max_model_len"),
    (lambda c: c.training(dual_clip=0.5), "dual_clip=0.5"),
    (lambda c: c.training(old_logprobs="vllm"), "old_logprobs='vllm'.*learner"),
    (lambda c: c.training(rollout_mode="async"), "rollout_mode='async'.*'sync', 'one_step_off'"),
    (lambda c: c.training(rollout_mode="one_step_off", old_logprobs="learner"),
     "old_logprobs='learner' is invalid: rollout_mode='one_step_off'.*behaviour log-probs.*old_logprobs='engine'"),
    (lambda c: c.training(adv_estimator="grpo", use_kl_in_reward=True), "use_kl_in_reward=True.*use_kl_loss"),
    (lambda c: c.training(filter_strategy="top_q"), "filter_strategy='top_q'.*top_p"),
    (lambda c: c.training(early_stop_val_patience=0), "early_stop_val_patience=0.*None"),
    (lambda c: c.training(filter_strategy="top_p", filter_value=1.5), "filter_value=1.5.*fraction"),
    (lambda c: c.training(filter_min_std=-0.1), "filter_min_std=-0.1.*>= 0"),
    (lambda c: c.training(filter_strategy="top_k_abs", filter_value=99, env_groups=2), "top_k_abs=99.*env_groups=2"),
    (lambda c: c.training(lr_decay="exponential"), "lr_decay='exponential'.*cosine"),
    (lambda c: c.training(lr_decay="cosine"), "lr_decay_steps=None.*integer > lr_warmup_steps=0"),
    (lambda c: c.training(lr_decay="linear", lr_warmup_steps=5, lr_decay_steps=5), "lr_decay_steps=5"),
    (lambda c: c.training(lr_warmup_steps=-1), "lr_warmup_steps=-1"),
    (lambda c: c.training(lr_min_ratio=2.0), "lr_min_ratio=2.0"),
    (lambda c: c.training(lr=-1.0), "lr=-1.0 is invalid: use a positive number"),
    (lambda c: c.training(lr=[[0, 1e-5], [100, 1e-6]]), r"lr=\[\[0, 1e-05\].*lr_warmup_steps"),
    (lambda c: c.environment("ragen/FrozenLak-v0"),
     r"env='ragen/FrozenLak-v0' is not a registered gymnasium id \(did you mean 'ragen/FrozenLake-v0'"
     r".*ragen/Sokoban-v0"),
    (lambda c: c.env_runners(num_env_runners=0), "num_env_runners=0 is invalid.*use num_env_runners >= 1"),
    (lambda c: c.rl_module(model_config={"model": "/no/such/model"}),
     r"model_config\['model'\]='/no/such/model' cannot be loaded: the directory '/no/such/model' does not exist"),
    (lambda c: c.rl_module(model_config={"model": "tiny:huge"}), r"'tiny:huge' cannot be loaded: tiny preset 'huge'"),
    (lambda c: c.environment("ragen/FrozenLake-v0", env_config={"size": 4, "slip": 0.2}),
     r"env_config key 'slip' is not a parameter of 'ragen/FrozenLake-v0'.*'success_rate'.*drop or rename"),
    (lambda c: c.environment(env_tags=[{"tag": "lake", "env": "ragen/FrozenLake-v0", "env_config": {"sise": 3},
                                        "groups": 8}]),
     r"env_config key 'sise'.*did you mean 'size'"),
    (lambda c: c.training(loss_agg_mode="nonsense"), "loss_agg_mode='nonsense'.*'token-mean'"),
    (lambda c: c.training(kl_type="k9"), "kl_type='k9'.*'k1', 'k2', 'k3', 'abs'"),
    (lambda c: c.training(filter_keep="middle"), "filter_keep='middle'.*largest"),
    (lambda c: c.training(filter_metric="variance"), "filter_metric='variance'.*reward_std"),
    (lambda c: c.training(filter_top_p_mode="cubic"), "filter_top_p_mode='cubic'"),
    (lambda c: c.training(reward_norm="zscore"), "reward_norm='zscore'"),
    (lambda c: c.training(reward_norm_scope="world"), "reward_norm_scope='world'"),
    (lambda c: c.training(env_groups="8"), "env_groups='8'.*type int, not str"),
    (lambda c: c.training(use_kl_loss="yes"), "use_kl_loss='yes'.*type bool"),
    (lambda c: c.training(clip_high=None), "clip_high=None.*not None"),
    (lambda c: c.rl_module(model_config={"model": "tiny:nano", "dtype": "fp8"}),
     r"model_config\['dtype'\]='fp8' is invalid.*'auto', 'float32', 'bfloat16', 'float16'"),
    (lambda c: c.rl_module(model_config={"model": "tiny:nano", "autocast": "fp16"}),
     r"model_config\['autocast'\]='fp16' is invalid.*'auto', 'bfloat16', 'none'"),
    (lambda c: c.training(max_tokens_per_micro_batch=0), "max_tokens_per_micro_batch=0 is invalid.*None"),
    (lambda c: c.training(learner_memory_gib="8"), "learner_memory_gib='8'.*type float"),
    (lambda c: c.training(learner_memory_gib=0.0), "learner_memory_gib=0.0 is invalid"),
    # the learner memory estimate, before any actor starts: tiny:small's weights and state fit in 0.5 GiB,
    # the runtime around them does not
    (lambda c: c.rl_module(model_config={"model": "tiny:small"}).training(learner_memory_gib=0.5),
     r"max_model_len=3600: one row of 3600 tokens needs an estimated .* GiB.*over learner_memory_gib=0.5 GiB.*"
     r"raise learner_memory_gib to"),
    (lambda c: c.training(learner_memory_gib=2.0, max_tokens_per_micro_batch=10**7),
     r"max_tokens_per_micro_batch=10000000: a micro-batch of 10000000 tokens.*lower max_tokens_per_micro_batch "
     r"to \d+"),
])
def test_validate_names_key_value_and_fix(change, match):
    with pytest.raises(ValueError, match=match):
        change(tiny()).validate()


@pytest.mark.parametrize("dtype", ["auto", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("autocast", ["auto", "bfloat16", "none", None])
def test_every_precision_setting_validates(dtype, autocast):
    tiny().rl_module(model_config={"model": "tiny:nano", "dtype": dtype, "autocast": autocast}).validate()


def test_the_learner_memory_check_resolves_a_budget_that_grows_with_the_memory():
    from ragen_rllib.algorithms.ragen.memory import check_config

    budgets = [check_config(tiny().training(learner_memory_gib=gib)) for gib in (2.0, 3.0, 4.0)]
    assert budgets == sorted(budgets) and budgets[0] < budgets[-1] and budgets[0] >= 3600
    assert check_config(tiny().training(learner_memory_gib=2.0, max_tokens_per_micro_batch=4096)) == 4096
    tiny().training(learner_memory_gib=2.0, max_tokens_per_micro_batch=4096).validate()


def test_model_config_defaults_follow_the_estimator():
    gae = tiny().training(adv_estimator="gae")
    grpo = tiny().training(adv_estimator="grpo")
    assert gae.model_config["value_head"] is True and grpo.model_config["value_head"] is False
    assert gae.model_config["model"] == "tiny:nano"


def test_config_round_trips_through_a_dict():
    c = tiny().training(adv_estimator="grpo", group_size=4, clip_high=0.3)
    back = RagenConfig.from_dict(c.to_dict())
    assert (back.adv_estimator, back.group_size, back.clip_high) == ("grpo", 4, 0.3)


def test_model_dir_without_config_json_and_offline_hub_id_are_rejected(tmp_path, monkeypatch):
    import huggingface_hub.constants

    with pytest.raises(ValueError, match="has no config.json"):
        tiny().rl_module(model_config={"model": str(tmp_path)}).validate()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))  # an empty cache
    with pytest.raises(ValueError, match="'Qwen/Qwen2.5-0.5B-Instruct' is neither a local directory nor in the "
                                         "Hugging Face cache.*HF_HUB_OFFLINE=1"):
        tiny().rl_module(model_config={"model": "Qwen/Qwen2.5-0.5B-Instruct"}).validate()
