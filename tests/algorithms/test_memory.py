"""The learner memory estimate: hand-computed static bytes, the budget that fits, and the errors that name the fix."""

import pytest

from ragen_rllib.algorithms.ragen import memory as M

#: SmolLM2-135M's config.json (the fields the estimate reads)
SMOLLM2 = {"num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9,
           "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152, "tie_word_embeddings": True,
           "model_type": "llama", "attention_bias": False}
GIB = 1024**3


def smollm2(**kw) -> M.LearnerMemory:
    shape = M.ModelShape.from_config(SMOLLM2)
    return M.LearnerMemory(shape=shape, params=shape.params, trainable=shape.params, **kw)


def test_parameter_count_and_static_bytes_by_hand():
    shape = M.ModelShape.from_config(SMOLLM2)
    # embeddings 49152 x 576; per block q, o 576 x 576, k, v 576 x 192, MLP 3 x 576 x 1536, two norms; final norm
    per_block = 2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536 + 2 * 576
    assert per_block == 3_540_096
    assert shape.params == 49152 * 576 + 30 * per_block + 576 == 134_515_008
    # fp32 AdamW without LoRA: weights 4 + gradients 4 + two moments 8 = 16 bytes per parameter
    assert smollm2(autocast=False).static_bytes() == 16 * 134_515_008
    assert smollm2(autocast=True).static_bytes() == 18 * 134_515_008  # + the bf16 weight copies of autocast
    assert smollm2(autocast=False, reference_copy=True).static_bytes() == 20 * 134_515_008


def test_lora_trains_the_adapters_only():
    shape = M.ModelShape.from_config(SMOLLM2)
    lora = shape.lora_params({"r": 8, "target_modules": ["q_proj", "v_proj"]})
    assert lora == 30 * (8 * (576 + 576) + 8 * (576 + 192)) == 460_800
    est = M.LearnerMemory(shape=shape, params=shape.params + lora, trainable=lora, autocast=False)
    assert est.static_bytes() == 4 * (shape.params + lora) + 12 * lora


def test_qwen2_biases_and_untied_heads_count():
    cfg = {**SMOLLM2, "model_type": "qwen2", "tie_word_embeddings": False}
    del cfg["attention_bias"]
    shape = M.ModelShape.from_config(cfg)
    base = M.ModelShape.from_config(SMOLLM2).params
    assert shape.params == base + 49152 * 576 + 30 * (9 + 2 * 3) * 64


def test_checkpointing_and_the_chunked_head_need_less_per_token():
    assert smollm2(gradient_checkpointing=True).token_bytes() < smollm2().token_bytes()
    assert smollm2(logprob_chunk=0).token_bytes() > smollm2().token_bytes()
    est = smollm2()
    assert est.peak_bytes(2048) - est.peak_bytes(1024) == pytest.approx(1024 * est.token_bytes())


def test_the_automatic_budget_is_monotone_fits_and_is_a_multiple_of_256():
    est = smollm2()
    budgets = [M.resolve_token_budget(est, gib * GIB, 1000, None) for gib in (6, 7, 8, 10, 16, 24)]
    assert budgets == sorted(budgets) and budgets[0] < budgets[-1]
    for gib, budget in zip((6, 7, 8, 10, 16, 24), budgets):
        assert budget % 256 == 0 and budget >= 1000
        assert est.peak_bytes(budget) <= gib * GIB < est.peak_bytes(budget + 256)


def test_a_row_that_cannot_fit_names_max_model_len_and_the_fixes():
    est = smollm2()
    with pytest.raises(ValueError, match=r"max_model_len=3600.*over learner_memory_gib=7.0 GiB.*"
                                         r"gradient_checkpointing'\]=True.*raise learner_memory_gib to"):
        M.resolve_token_budget(est, 7 * GIB, 3600, None)
    # with checkpointing the same row fits
    assert M.resolve_token_budget(smollm2(gradient_checkpointing=True), 7 * GIB, 3600, None) >= 3600
    with pytest.raises(ValueError, match=r"over learner_memory_gib=3.0 GiB: raise learner_memory_gib to"):
        M.resolve_token_budget(est, 3 * GIB, 3600, None)  # not even the weights and state fit: one fix


def test_an_explicit_budget_that_cannot_fit_names_the_setting_and_a_budget_that_does():
    est = smollm2()
    fit = M.resolve_token_budget(est, 8 * GIB, 1000, None)
    assert M.resolve_token_budget(est, 8 * GIB, 1000, fit) == fit
    with pytest.raises(ValueError, match=rf"max_tokens_per_micro_batch=100000: .*lower max_tokens_per_micro_batch "
                                         rf"to {fit} or set model_config"):
        M.resolve_token_budget(est, 8 * GIB, 1000, 100_000)


def test_tiny_models_are_read_from_their_presets_without_a_build():
    shape = M.model_shape("tiny:small")
    assert (shape.layers, shape.hidden, shape.intermediate, shape.vocab) == (6, 256, 1024, 3072)
    assert 6e6 < shape.params < 8e6  # "~7M parameters"


def test_the_default_share_is_40_percent_of_ram_split_over_cpu_learners():
    import os

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert M.default_memory_bytes("cpu", 1) == int(0.4 * total)
    assert M.default_memory_bytes("cpu", 2) == int(0.2 * total)


def test_auto_checkpointing_turns_on_only_where_one_row_needs_it():
    fp32 = smollm2(autocast=False)
    # SmolLM2 in fp32 on 40% of 24 GiB: a 3600-token row fits only with checkpointing, a 2048-token row without
    on = M.auto_checkpointing(fp32, "auto", 9.4 * GIB, 3600)
    assert on.gradient_checkpointing and on.max_tokens(9.4 * GIB) >= 3600 > fp32.max_tokens(9.4 * GIB)
    assert M.auto_checkpointing(fp32, "auto", 9.4 * GIB, 2048) is fp32
    assert M.auto_checkpointing(fp32, False, 9.4 * GIB, 3600) is fp32  # the user's False is kept: the error follows
    with pytest.raises(ValueError, match=r"max_model_len=3600.*gradient_checkpointing'\]=True"):
        M.resolve_token_budget(M.auto_checkpointing(fp32, False, 9.4 * GIB, 3600), 9.4 * GIB, 3600, None)
    assert M.auto_checkpointing(fp32, "auto", 4 * GIB, 3600) is fp32  # nothing fits: the fixes are named instead
    note = M.auto_checkpointing_note(on, 9.4 * GIB, 3600, "learner_memory_gib (None: 40% of RAM)")
    assert note.startswith("model_config['gradient_checkpointing']='auto': on, since one row of max_model_len=3600")
    assert "within learner_memory_gib=9.4 GiB" in note


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_bad_checkpointing_value_is_named(value):
    from ragen_rllib.core.model_config import validate_model_config

    with pytest.raises(ValueError, match=r"checkpointing'\]=.* is invalid: use one of \(True, False, 'auto'\)"):
        validate_model_config({"gradient_checkpointing": value})


def test_the_learner_switches_auto_checkpointing_on_in_its_module(caplog):
    from test_ragen_rl_module import build

    from ragen_rllib import RagenConfig

    module = build(model="tiny:small", autocast=None)  # 6 blocks: checkpointing saves memory (not with nano's 2)
    config = RagenConfig().rl_module(model_config={"model": "tiny:small"}).training(max_model_len=1024)
    est = M.module_estimate(module, "cpu", reference_copy=False)
    between = (M.replace(est, gradient_checkpointing=True).peak_bytes(1024) + est.peak_bytes(1024)) / 2
    config.training(learner_memory_gib=between / GIB)
    with caplog.at_level("INFO", logger="ragen_rllib.memory"):
        budget, _ = M.learner_token_budget(module, config, "cpu", reference_copy=False)
    assert module.lm.is_gradient_checkpointing and not module.share_prefix and budget >= 1024
    assert "'auto': on, since one row of max_model_len=1024" in caplog.text
    roomy = build(model="tiny:small", autocast=None)
    M.learner_token_budget(roomy, config.training(learner_memory_gib=2 * est.peak_bytes(1024) / GIB), "cpu", False)
    assert not roomy.lm.is_gradient_checkpointing and roomy.share_prefix
