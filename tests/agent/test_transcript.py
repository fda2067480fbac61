"""Token-in/token-out transcripts: the loss mask covers exactly the sampled ids, under two chat templates."""

import random

import pytest

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.transcript import Transcript

SYSTEM = "You're a helpful assistant. Solve the puzzle."


def random_response(tok, rng, n, with_eos=True):
    """Ids as an engine might sample them, including ids whose text does not re-encode to themselves."""
    ids = [rng.randrange(len(tok)) for _ in range(n)]
    return ids + [tok.eos_token_id] if with_eos else ids


def contains(seq, sub):
    return any(seq[i: i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def users(n):
    return [f"Turn {i + 1}:\nState:\nP__G\nYou have {10 - i} actions left." for i in range(n)]


def test_full_mode_mask_is_exactly_the_sampled_ids(tokenizer):
    rng = random.Random(0)
    chat = ChatFormat(tokenizer, prefill="<think>")
    tr = Transcript(chat, AgentConfig(), SYSTEM)
    prompts, responses = [], []
    for i, user in enumerate(users(4)):
        prompt = tr.next_prompt(user)
        prompts.append(prompt)
        resp = random_response(tokenizer, rng, 5 + i, with_eos=i != 2)  # turn 3 is truncated (no EOS)
        lps = [-0.5 - j for j in range(len(resp))]
        tr.add_response(resp, lps)
        tr.set_reward(float(i))
        responses.append((resp, lps))
    [sample] = tr.samples()
    ids, mask = sample.input_ids, sample.loss_mask
    assert len(ids) == len(mask) == len(sample.logprobs)
    # every prompt is exactly a prefix of the sample, and the response follows it
    for prompt, (resp, _) in zip(prompts, responses):
        assert ids[: len(prompt)] == prompt
        assert ids[len(prompt): len(prompt) + len(resp)] == resp
        assert mask[len(prompt): len(prompt) + len(resp)] == [1] * len(resp)
    trained = [t for t, m in zip(ids, mask) if m]
    assert trained == [t for resp, _ in responses for t in resp]
    assert sum(mask) == sum(len(r) for r, _ in responses)
    assert [lp for lp, m in zip(sample.logprobs, mask) if m] == [x for _, lps in responses for x in lps]
    assert sample.turn_ends == [len(p) + len(r) - 1 for p, (r, _) in zip(prompts, responses)]
    assert sample.turn_rewards == [0.0, 1.0, 2.0, 3.0] and sample.turn_numbers == [0, 1, 2, 3]
    assert sample.has_logprobs


def test_prompts_follow_the_chat_template(tokenizer):
    chat = ChatFormat(tokenizer, prefill="<think>")
    text = tokenizer.decode(Transcript(chat, AgentConfig(), SYSTEM).next_prompt("Turn 1: hi"))
    rendered = tokenizer.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Turn 1: hi"}],
        tokenize=False, add_generation_prompt=True)
    assert text == rendered + "<think>"


def test_incremental_prompt_equals_rebuilt_prompt(tokenizer):
    """A turn appended to the open transcript equals the whole conversation rendered with the ids spliced in."""
    rng = random.Random(1)
    chat = ChatFormat(tokenizer, prefill="<think>")
    u1, u2 = users(2)
    r1 = random_response(tokenizer, rng, 7)
    first = chat.prompt(SYSTEM, [], u1)[0]
    rebuilt, spans = chat.prompt(SYSTEM, [(u1, r1)], u2)
    assert first + r1 + chat.continuation(SYSTEM, u1, r1, u2) == rebuilt
    assert spans == [(len(first), len(first) + len(r1))]
    # the EOS the engine sampled closes the turn: the template's end marker is not added twice
    eos = tokenizer.eos_token
    assert tokenizer.decode(rebuilt).count(eos) == tokenizer.decode(first).count(eos) + 2  # sampled + user 2


def test_truncated_response_gets_the_end_marker_as_prompt_tokens(chatml_tokenizer):
    chat = ChatFormat(chatml_tokenizer, prefill="<think>")
    cont = chat.continuation(SYSTEM, "u1", chat.encode(" half a thou"), "u2")
    assert chatml_tokenizer.decode(cont).startswith("<|im_end|>\n<|im_start|>user\nu2")


@pytest.mark.parametrize("mode", ["limited_multi_turn", "single_turn"])
def test_per_turn_modes_train_only_the_last_turn(tokenizer, mode):
    rng = random.Random(2)
    chat = ChatFormat(tokenizer, prefill="<think>")
    tr = Transcript(chat, AgentConfig(context_mode=mode, context_window=2), SYSTEM)
    responses = []
    for user in users(3):
        prompt = tr.next_prompt(user)
        resp = random_response(tokenizer, rng, 6)
        tr.add_response(resp)
        responses.append((prompt, resp))
    samples = tr.samples()
    assert len(samples) == 3
    for t, (sample, (prompt, resp)) in enumerate(zip(samples, responses)):
        assert sample.input_ids == prompt + resp
        assert sample.loss_mask == [0] * len(prompt) + [1] * len(resp)
        assert sample.turn_numbers == [t] and sample.turn_ends == [len(sample.input_ids) - 1]
        assert not sample.has_logprobs
    last_prompt = responses[2][0]
    # window 2 = the previous turn + the current one; single_turn keeps no history at all
    if mode == "limited_multi_turn":
        assert contains(last_prompt, responses[1][1])  # the previous turn's sampled ids, spliced verbatim
        assert not contains(last_prompt, responses[0][1]) and users(3)[0] not in tokenizer.decode(last_prompt)
    else:
        assert not contains(last_prompt, responses[1][1]) and users(3)[1] not in tokenizer.decode(last_prompt)
    assert SYSTEM in tokenizer.decode(last_prompt)


def test_full_mode_drops_whole_old_turns_when_too_long(chatml_tokenizer):
    tok = chatml_tokenizer
    chat = ChatFormat(tok, prefill="<think>")
    base = len(chat.prompt(SYSTEM, [], users(1)[0])[0])
    resp_len = 40
    turn_cost = len(chat.continuation(SYSTEM, users(1)[0], [5] * resp_len + [tok.eos_token_id], users(2)[1])) + resp_len
    # room for the system prompt plus about two turns, then the left side must go
    cfg = AgentConfig(max_model_len=base + 2 * turn_cost + 30 + 16, max_response_tokens=16)
    tr = Transcript(chat, cfg, SYSTEM)
    rng = random.Random(3)
    for user in users(5):
        prompt = tr.next_prompt(user)
        assert len(prompt) + cfg.max_response_tokens <= cfg.max_model_len
        text = tok.decode(prompt)
        assert text.startswith("<|im_start|>system\n" + SYSTEM) and user in text
        tr.add_response([rng.randrange(3, len(tok)) for _ in range(resp_len)] + [tok.eos_token_id])
    samples = tr.samples()
    assert len(samples) >= 2  # a new sample started after the truncation
    assert sorted(n for s in samples for n in s.turn_numbers) == list(range(5))  # every turn trained once
    assert users(5)[0] not in tok.decode(samples[-1].input_ids)
    for s in samples:
        assert len(s.input_ids) <= cfg.max_model_len
        assert sum(s.loss_mask) == len(s.turn_numbers) * (resp_len + 1)


def test_system_prompt_too_long_names_the_lengths(chatml_tokenizer):
    chat = ChatFormat(chatml_tokenizer, prefill="<think>")
    tr = Transcript(chat, AgentConfig(max_model_len=64, max_response_tokens=32), SYSTEM * 10)
    with pytest.raises(ValueError, match="max_model_len=64.*max_response_tokens=32"):
        tr.next_prompt("Turn 1")


def test_protocol_errors(chatml_tokenizer):
    tr = Transcript(ChatFormat(chatml_tokenizer), AgentConfig(), SYSTEM)
    with pytest.raises(RuntimeError):
        tr.add_response([1, 2])
    tr.next_prompt("u")
    with pytest.raises(RuntimeError):
        tr.next_prompt("u again")


def test_tokenizer_without_template_is_rejected(chatml_tokenizer):
    import copy

    tok = copy.deepcopy(chatml_tokenizer)
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat_template"):
        ChatFormat(tok)


def test_smollm2_template_quirks_are_handled(smollm2_tokenizer):
    """SmolLM2's template adds a default system prompt ("You are a helpful AI assistant named SmolLM...") when the
    conversation has none, its pad token is its EOS (<|im_end|>), and its tokenizer adds no BOS. The transcript
    always sends the env's system prompt, so the default never appears; plain text encodes without special tokens."""
    tok = smollm2_tokenizer
    assert tok.pad_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    default = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert "named SmolLM" in default  # the quirk exists...
    chat = ChatFormat(tok, prefill="<answer>")
    tr = Transcript(chat, AgentConfig(enable_think=False), SYSTEM)
    first = tr.next_prompt(users(1)[0])
    text = tok.decode(first)
    assert "SmolLM" not in text and text.startswith("<|im_start|>system\n" + SYSTEM)  # ...and never reaches us
    assert chat.encode("Up || Left") == tok("Up || Left")["input_ids"]  # no BOS added by default either
    assert tok.bos_token_id not in chat.encode("<answer> Up </answer>")
