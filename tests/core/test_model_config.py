"""The model settings have one typed home (core/model_config.py): every key's default, allowed values and meaning,
one validator, and every reader takes its default from there."""

from pathlib import Path

import pytest

from ragen_rllib.core.model_config import MODEL_SETTINGS, model_setting, validate_model_config

SRC = Path(__file__).resolve().parents[2] / "src" / "ragen_rllib"


def test_every_declared_default_passes_its_own_check():
    for key, setting in MODEL_SETTINGS.items():
        if setting.default is not None or key in ("lora", "value_head", "temperature"):
            setting.check(key, setting.default)
        assert setting.meaning and setting.expected, key


@pytest.mark.parametrize("config, message", [
    ({"dtyp": "float32"}, r"model_config\['dtyp'\] is not a model setting \(did you mean 'dtype'\?\)"),
    ({"dtype": "fp8"}, r"model_config\['dtype'\]='fp8' is invalid: use one of"),
    ({"autocast": "fp16"}, r"model_config\['autocast'\]='fp16' is invalid"),
    ({"gradient_checkpointing": 1}, r"model_config\['gradient_checkpointing'\]=1 is invalid"),
    ({"logprob_chunk": -4}, r"model_config\['logprob_chunk'\]=-4 is invalid: use 0, None or a positive integer"),
    ({"lora": "r=8"}, r"model_config\['lora'\]='r=8' is invalid: use None or a dict"),
    ({"share_prompt_prefix": "yes"}, r"model_config\['share_prompt_prefix'\]='yes' is invalid"),
    ({"model": ""}, r"model_config\['model'\]='' is invalid"),
])
def test_a_bad_key_or_value_is_named_with_its_fix(config, message):
    with pytest.raises(ValueError, match=message):
        validate_model_config(config)


def test_a_bad_setting_is_refused_by_the_config_before_any_actor_starts():
    from ragen_rllib import RagenConfig

    with pytest.raises(ValueError, match=r"model_config\['logprob_chunks'\] is not a model setting"):
        RagenConfig().rl_module(model_config={"model": "tiny:nano", "logprob_chunks": 64}).validate()


def test_the_reader_gives_the_value_or_the_declared_default():
    assert model_setting({"dtype": "bfloat16"}, "dtype") == "bfloat16"
    assert model_setting({}, "logprob_chunk") == MODEL_SETTINGS["logprob_chunk"].default
    assert model_setting(None, "gradient_checkpointing") == "auto"


def test_no_reader_spells_a_model_setting_default_itself():
    """``model_config.get("dtype", "auto")`` and friends: the defaults live only in MODEL_SETTINGS."""
    spellings = [f'{reader}{key}"' for key in MODEL_SETTINGS
                 for reader in ('mc.get("', 'cfg.get("', 'model_config or {}).get("', 'model_config["', 'mc["',
                                'cfg["')]
    found = sorted(f"{p.relative_to(SRC)}: {s}" for p in SRC.rglob("*.py") for s in spellings
                   if p.name != "model_config.py" and s in p.read_text())
    assert found == []
