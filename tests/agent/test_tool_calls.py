"""Tool calls in the model's own format: the parser, the prompts on templates with and without tool support
(Qwen2.5's renders ``tools=``, SmolLM2's does not), token-exact transcripts across tool turns, and bad calls as
the agent's error."""

import pytest

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.episode import AgentEpisode
from ragen_rllib.agent.parsing import parse_tool_response
from ragen_rllib.agent.prompts import generation_prefill
from ragen_rllib.envs.tools.search_qa import SearchQAEnv

CFG = AgentConfig(max_turns=5, max_actions_per_turn=2, max_actions_per_traj=6, max_response_tokens=100,
                  max_model_len=4000)


def parse(text, cfg=CFG):
    return parse_tool_response(text, cfg)


# ----------------------------------------------------------------------------------------------- the parser
def test_parser_reads_several_calls_an_answer_and_drops_calls_past_the_turn_limit():
    calls = parse('<think> look up </think> <tool_call>\n{"name": "search", "arguments": {"query": "a"}}\n'
                  '</tool_call>\n<tool_call>{"name": "search"}</tool_call> trailing words')
    assert calls.format_ok and calls.num_tool_calls == 2 and calls.num_invalid == 0
    assert calls.actions == ('<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>',
                             '<tool_call>{"name": "search"}</tool_call>')
    answer = parse("<think> ok </think><answer> 1742 </answer> ignored")
    assert answer.actions == ("1742",) and answer.num_tool_calls == 0
    three = parse("<think>t</think>" + "<tool_call>{}</tool_call>" * 3)
    assert (three.num_tool_calls, three.num_invalid, three.format_ok) == (2, 1, True)


@pytest.mark.parametrize("text", [
    "<tool_call>{}</tool_call>",  # no think
    "<think> x </think> plain words",
    "<think> x </think> <answer> </answer>",
    "<think> x <tool_call>{}</tool_call> </think> <answer> a </answer>",  # a call inside the thoughts
    "<think> x </think> <answer> <tool_call>{}</tool_call> </answer>",
    "<think> x </think> <tool_call> <tool_call>{}</tool_call>",
    "<think> x </think> <tool_call>{} <answer>a</answer></tool_call>",
    None, 42,
])
def test_parser_rejects_malformed_responses(text):
    assert not parse(text).format_ok


def test_answer_only_format_parses_tool_calls_too():
    cfg = AgentConfig(enable_think=False)
    assert parse("<tool_call>{}</tool_call>", cfg).num_tool_calls == 1
    assert parse("<answer>x</answer>", cfg).actions == ("x",)


# ----------------------------------------------------------------------------------------------- templates
def test_templates_that_render_tools_are_told_apart(qwen2_tokenizer, smollm2_tokenizer, chatml_tokenizer):
    assert ChatFormat(qwen2_tokenizer).native_tools
    assert not ChatFormat(smollm2_tokenizer).native_tools
    assert not ChatFormat(chatml_tokenizer).native_tools
    assert ChatFormat(qwen2_tokenizer).tool_messages(["r1", "r2"]) == [{"role": "tool", "content": "r1"},
                                                                       {"role": "tool", "content": "r2"}]
    assert ChatFormat(smollm2_tokenizer).tool_messages(["r1", "r2"]) == [
        {"role": "user", "content": "<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"}]


def _end(tokenizer):
    return tokenizer.convert_tokens_to_ids("<|im_end|>")


def _play(tokenizer, responses, cfg=CFG):
    """Run a SearchQA episode with scripted responses (text after the prefill) as the sampled ids."""
    chat = ChatFormat(tokenizer, prefill=generation_prefill(cfg))
    ep = AgentEpisode(SearchQAEnv(split="validation"), chat, cfg, seed=None, options={"index": 3})
    prompts, sampled = [], []
    for text in responses:
        if ep.done:
            break
        prompts.append(ep.prompt())
        ids = chat.encode(text) + [_end(tokenizer)]
        sampled.append(ids)
        ep.step(ids, [-0.5] * len(ids))
    return ep, chat, prompts, sampled


def _script(ep_env_answer):
    return [
        ' I search. </think>\n<tool_call>\n{"name": "search", "arguments": {"query": "QUERY"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": 7}}\n</tool_call>',
        ' Next. </think>\n<tool_call>{"name": "lookup", "arguments": {}}</tool_call>',
        f" Found it. </think> <answer> {ep_env_answer} </answer>",
    ]


@pytest.mark.parametrize("name", ["qwen2", "smollm2", "chatml"])
def test_tool_turns_are_token_exact_and_results_go_back_as_tool_messages(name, request):
    tokenizer = request.getfixturevalue(f"{name}_tokenizer")
    probe = SearchQAEnv(split="validation")
    probe.reset(options={"index": 3})
    script = [s.replace("QUERY", probe.question.searches[0]) for s in _script(probe.question.answer)]
    ep, chat, prompts, sampled = _play(tokenizer, script)
    assert ep.done and ep.success and ep.error is None and len(ep.turns) == 3

    # each prompt handed out equals the conversation rebuilt from scratch with the template
    for k, prompt in enumerate(prompts):
        history = [(ep.transcript.turns[j].user, sampled[j]) for j in range(k)]
        rebuilt, spans = chat.prompt(ep.system, history, ep.transcript.turns[k].user,
                                     tools=ep.tools if chat.native_tools else None)
        assert prompt == rebuilt
        for (start, end), ids in zip(spans, sampled):  # the sampled ids sit in the prompt unchanged
            assert prompt[start:end] == ids

    # one sample, trained exactly on the sampled ids, with their log-probs
    (sample,) = ep.samples()
    trained = [t for t, m in zip(sample.input_ids, sample.loss_mask) if m]
    assert trained == [t for ids in sampled for t in ids]
    assert sum(sample.loss_mask) == sum(1 for lp in sample.logprobs if lp == -0.5)
    assert sample.input_ids[: len(prompts[-1])] == prompts[-1]

    text = tokenizer.decode(prompts[-1])
    results = ep.turns[0].result.observations
    assert results[0].startswith("Doc 1 (") and results[1].startswith("Error: bad arguments for 'search'")
    assert ep.turns[1].result.observations[0].startswith("Error: unknown tool 'lookup'")
    assert text.count("<tool_response>") == 3
    if name == "qwen2":  # the template's own tool rendering: its "# Tools" block, results in a user turn
        assert text.count("# Tools") == 1 and '"name": "search"' in text
        assert "<|im_start|>user\n<tool_response>\n" + results[0] in text
        assert "<|im_start|>tool" not in text
    else:  # our text format in the system message, results as a user message
        assert text.count("# Tools") == 1 and "<tools>\n{" in text
        assert "<|im_start|>user\n<tool_response>\n" + results[0] in text


def test_bad_calls_get_the_format_penalty_and_good_ones_do_not(chatml_tokenizer):
    probe = SearchQAEnv(split="validation")
    probe.reset(options={"index": 3})
    script = [s.replace("QUERY", probe.question.searches[0]) for s in _script(probe.question.answer)]
    ep, *_ = _play(chatml_tokenizer, script)
    rewards = [t.result.reward for t in ep.turns]
    assert rewards == [CFG.format_penalty, CFG.format_penalty, 1.0]
    good = [' ok </think><tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>',
            " done </think><answer> nothing </answer>"]
    ep, *_ = _play(chatml_tokenizer, good)
    assert [t.result.reward for t in ep.turns] == [0.0, 0.0] and ep.metrics()["action_is_valid"] == 1.0
    assert ep.metrics()["num_actions"] == 2.0


def test_a_malformed_turn_repeats_the_question_with_the_warning(chatml_tokenizer):
    ep, *_ = _play(chatml_tokenizer, [" no tags at all", " hm </think><answer> x </answer>"])
    second = ep.turns[1].user_text
    assert "No valid action provided previously" in second and "Question:" in second
    assert ep.turns[0].result.reward == CFG.format_penalty


def test_tool_envs_need_thinking_on(chatml_tokenizer):
    cfg = AgentConfig(enable_think=False)
    with pytest.raises(ValueError, match="offers tools, which need agent enable_think=True"):
        AgentEpisode(SearchQAEnv(), ChatFormat(chatml_tokenizer, prefill=generation_prefill(cfg)), cfg, seed=0)


def test_bfcl_prompts_fit_the_shipped_configs_context_with_smollm2(smollm2_tokenizer):
    """BFCL's function docs make long system prompts (2-5k SmolLM2 tokens): every validation entry's first prompt
    leaves room for a response within configs/envs/bfcl_multi_turn.yaml's max_model_len."""
    from pathlib import Path

    from ragen_rllib import RagenConfig
    from ragen_rllib.envs.tools.bfcl import BFCLMultiTurnEnv

    config = RagenConfig.from_yaml(Path(__file__).resolve().parents[2] / "configs" / "envs" / "bfcl_multi_turn.yaml")
    cfg = config.agent_config()
    chat = ChatFormat(smollm2_tokenizer, prefill=generation_prefill(cfg))
    env = BFCLMultiTurnEnv(split="validation")
    longest = 0
    for i in range(len(env.entries)):
        ep = AgentEpisode(env, chat, cfg, options={"index": i})
        assert ep.tools and "# Tools" in ep.system
        longest = max(longest, len(ep.prompt()))
    assert 2000 < longest <= cfg.max_model_len - cfg.max_response_tokens
