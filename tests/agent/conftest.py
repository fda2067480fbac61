"""Tokenizers with four chat templates: the tiny model's ChatML, a Llama-3 style one, the real pretrained
SmolLM2-135M-Instruct's own (ChatML with a default system prompt, pad = eos, a BPE vocabulary of 49,152), and
Qwen2.5's, which renders tools (``data/qwen2_5_chat_template.jinja``: Qwen2.5-Instruct's template as TRL ships
it) on the tiny model's vocabulary."""

import copy
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from ragen_rllib.models.tiny import tiny_model_path

LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
    " + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


@pytest.fixture(scope="session")
def chatml_tokenizer():
    return AutoTokenizer.from_pretrained(tiny_model_path("nano"))


@pytest.fixture(scope="session")
def llama3_tokenizer(chatml_tokenizer):
    tok = copy.deepcopy(chatml_tokenizer)
    tok.add_special_tokens({
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>"],
    })
    tok.chat_template = LLAMA3_TEMPLATE
    return tok


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The shipped pretrained model's tokenizer, from its converted directory (converted once per cache)."""
    from ragen_rllib.models.registry import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model("gguf:smollm2-135m-instruct"))


@pytest.fixture(scope="session")
def qwen2_tokenizer(chatml_tokenizer):
    tok = copy.deepcopy(chatml_tokenizer)
    tok.chat_template = (Path(__file__).parent / "data" / "qwen2_5_chat_template.jinja").read_text()
    return tok


@pytest.fixture(params=["chatml", "llama3", "smollm2"])
def tokenizer(request):
    return request.getfixturevalue(f"{request.param}_tokenizer")
