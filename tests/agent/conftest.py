"""Tokenizers with two different chat templates: the tiny model's ChatML and a Llama-3 style one."""

import copy

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


@pytest.fixture(params=["chatml", "llama3"])
def tokenizer(request, chatml_tokenizer, llama3_tokenizer):
    return chatml_tokenizer if request.param == "chatml" else llama3_tokenizer
