"""Offline tiny models: deterministic tokenizer and weights, presets' sizes, loading, model resolution."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ragen_rllib.models import tiny


@pytest.fixture(scope="module")
def nano_dir():
    return tiny.tiny_model_path("nano")


def test_nano_loads_and_is_small(nano_dir):
    model = AutoModelForCausalLM.from_pretrained(nano_dir)
    n = sum(p.numel() for p in model.parameters())
    assert n < 1_000_000
    cfg = model.config
    assert cfg.hidden_size // cfg.num_attention_heads in (32, 64, 80, 96, 112, 128)  # vLLM CPU head sizes
    assert json.loads((nano_dir / "ragen_tiny.json").read_text())["preset"] == "nano"


def test_small_preset_size():
    cfg = tiny.PRESETS["small"]
    from dataclasses import asdict

    from transformers import Qwen2Config, Qwen2ForCausalLM

    with torch.device("meta"):
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=1280, tie_word_embeddings=True, **asdict(cfg)))
    n = sum(p.numel() for p in model.parameters())
    assert 5_000_000 <= n <= 20_000_000
    assert cfg.hidden_size // cfg.num_attention_heads == 64


def test_tokenizer_format_tokens_and_template(nano_dir):
    tok = AutoTokenizer.from_pretrained(nano_dir)
    for t in ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>"):
        ids = tok.encode(t, add_special_tokens=False)
        assert len(ids) == 1, t
    text = tok.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], tokenize=False,
        add_generation_prompt=True,
    )
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>"
    # byte-level: any text round-trips, no <unk>
    s = "Left || Up √ 🙂 \x01 place 3 at row 1 col 2"
    assert tok.decode(tok.encode(s, add_special_tokens=False)) == s
    # the corpus taught it env words: common words are single tokens
    assert len(tok.encode(" Right", add_special_tokens=False)) == 1


def test_build_is_deterministic(tmp_path, nano_dir):
    out = tiny.build_model("nano", tmp_path / "again")
    a = AutoModelForCausalLM.from_pretrained(nano_dir).state_dict()
    b = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ta, tb = AutoTokenizer.from_pretrained(nano_dir), AutoTokenizer.from_pretrained(out)
    assert ta.get_vocab() == tb.get_vocab()


def test_cache_reuses_build(nano_dir):
    assert tiny.tiny_model_path("nano") == nano_dir
    from ragen_rllib.models.registry import resolve_model

    assert resolve_model("tiny:nano") == str(nano_dir)
    assert resolve_model("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert resolve_model("/some/local/dir") == "/some/local/dir"


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="preset='huge'.*nano"):
        tiny.tiny_model_path("huge")
