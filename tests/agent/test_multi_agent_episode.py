"""Several LLM agents in one game: per-agent token-exact transcripts, rewards credited to the right agent's turn,
scripted opponents, and the batched loop with one engine call per module."""

import pytest

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.multi_agent import MultiAgentEpisode, rollout_multi
from ragen_rllib.agent.prompts import generation_prefill
from ragen_rllib.envs.multi_agent.solver_verifier import SOLVER, VERIFIER, SolverVerifierEnv
from ragen_rllib.envs.multi_agent.tictactoe import TicTacToeEnv

CFG = AgentConfig(max_turns=5, max_response_tokens=32, max_model_len=2048)


def ids_for(chat, answer):
    return chat.encode(f" I pick {answer}. </think> <answer> {answer} </answer>") + [
        chat.tokenizer.convert_tokens_to_ids("<|im_end|>")]


@pytest.fixture
def chat(chatml_tokenizer):
    return ChatFormat(chatml_tokenizer, prefill=generation_prefill(CFG))


def test_each_agent_has_its_own_token_exact_transcript(chat):
    env = TicTacToeEnv()
    ep = MultiAgentEpisode(env, {"x": chat, "o": chat}, CFG, seed=0)
    moves = {"x": ["1", "2", "3"], "o": ["4", "5"]}
    sampled = {"x": [], "o": []}
    prompts = {"x": [], "o": []}
    while not ep.done:
        agent = ep.current
        prompts[agent].append(ep.prompt())
        ids = ids_for(chat, moves[agent][len(sampled[agent])])
        sampled[agent].append(ids)
        ep.step(ids, [-1.0] * len(ids))
    assert env.board[:3] == ("X", "X", "X") and ep.success == {"x": True, "o": False}
    for agent in ("x", "o"):
        (sample,) = ep.samples(agent)
        trained = [t for t, m in zip(sample.input_ids, sample.loss_mask) if m]
        assert trained == [t for ids in sampled[agent] for t in ids]  # only this agent's own sampled ids
        for k, prompt in enumerate(prompts[agent]):  # each prompt = the conversation rebuilt by the template
            history = [(ep.transcripts[agent].turns[j].user, sampled[agent][j]) for j in range(k)]
            assert prompt == chat.prompt(ep.systems[agent], history, ep.transcripts[agent].turns[k].user)[0]
    second_x = chat.tokenizer.decode(prompts["x"][1])
    assert "You are X" in second_x and "X . .\nO . ." in second_x  # o's move, as text
    assert "playing tic-tac-toe as X" in ep.systems["x"] and "as O" in ep.systems["o"]
    # the win pays x's last turn; o's loss lands on o's last turn, though it came on x's move
    assert [t.reward for t in ep.turns["x"]] == [0.0, 0.0, 1.0]
    assert [t.reward for t in ep.turns["o"]] == [0.0, -1.0]
    assert ep.samples("o")[0].turn_rewards == [0.0, -1.0]
    assert ep.returns == {"x": 1.0, "o": -1.0}
    assert ep.metrics("x")["success"] == 1.0 and ep.metrics("o")["num_turns"] == 2.0


def test_a_scripted_opponent_has_no_transcript_and_its_moves_show_as_text(chat):
    env = TicTacToeEnv()
    ep = MultiAgentEpisode(env, {"x": chat}, CFG, seed=0, scripted={"o": lambda e, a: e.opponent_action(a, "minimax")})
    assert ep.llm_agents == ["x"] and "o" not in ep.transcripts
    ep.prompt()
    ep.step(ids_for(chat, "1"))
    assert ep.current == "x" and env.board.count("O") == 1
    assert "O" in ep.env.observe("x") and ep.turns["o"] == []


def test_a_malformed_response_is_an_invalid_move_and_the_agent_tries_again(chat):
    env = TicTacToeEnv()
    ep = MultiAgentEpisode(env, {"x": chat, "o": chat}, CFG, seed=0)
    ep.prompt()
    ep.step(chat.encode(" no tags"))
    assert ep.current == "x" and ep.turns["x"][0].reward == -0.1 and not ep.turns["x"][0].action_is_valid
    user = ep.transcripts["x"].turns[-1].user
    ep.prompt()
    assert "No valid action provided previously" in ep.transcripts["x"].turns[-1].user and user


def test_an_agent_without_a_chat_is_refused(chat):
    with pytest.raises(ValueError, match=r"agents \['o'\] have no chat format"):
        MultiAgentEpisode(TicTacToeEnv(), {"x": chat}, CFG, seed=0)


class CountingEngine:
    """A real HF engine that counts its batched calls per module."""

    def __init__(self, engine, name, calls):
        self.engine, self.name, self.calls = engine, name, calls

    def generate(self, prompts, sampling):
        self.calls.append((self.name, len(prompts)))
        return self.engine.generate(prompts, sampling)


def test_rollout_multi_calls_each_modules_engine_once_per_round(chatml_tokenizer):
    from transformers import AutoModelForCausalLM

    from ragen_rllib.engines.base import SamplingConfig
    from ragen_rllib.engines.hf_engine import HFEngine
    from ragen_rllib.models.tiny import tiny_model_path

    hf = HFEngine(AutoModelForCausalLM.from_pretrained(tiny_model_path("nano")), chatml_tokenizer)
    calls = []
    engines = {m: CountingEngine(hf, m, calls) for m in ("solver_module", "verifier_module")}
    chat = ChatFormat(chatml_tokenizer, prefill=generation_prefill(CFG))
    cfg = AgentConfig(max_turns=2, max_response_tokens=12, max_model_len=1024)
    episodes = rollout_multi(engines, {m: chat for m in engines}, [SolverVerifierEnv() for _ in range(3)],
                             [0, 1, 2], cfg, SamplingConfig(seed=0), module_of=lambda a: f"{a}_module")
    assert all(ep.done and ep.error is None for ep in episodes)
    assert all(1 <= len(ep.turns[SOLVER]) <= 2 for ep in episodes)
    rounds = [c for c in calls if c[0] == "solver_module"]
    assert rounds[0] == ("solver_module", 3)  # the three episodes' solvers in one call
    assert {name for name, _ in calls} <= set(engines)
    for ep in episodes:
        for agent in (SOLVER, VERIFIER):
            for sample in ep.samples(agent):
                assert sum(sample.loss_mask) == sum(len(t.response_ids) for t in ep.turns[agent])


def test_each_agent_becomes_its_own_trajectory_and_group(chat):
    from ragen_rllib.agent.trajectory import agent_trajectories
    from ragen_rllib.envs.multi_agent.turn_based import is_multi_agent

    env = TicTacToeEnv()
    assert is_multi_agent(env) and not is_multi_agent(object())
    ep = MultiAgentEpisode(env, {"x": chat, "o": chat}, CFG, seed=7)
    for move in ["1", "4", "2", "5", "3"]:
        ep.prompt()
        ep.step(ids_for(chat, move))
    x, o = agent_trajectories([ep], ["TicTacToe"], [7])
    assert (x.env_id, x.group_id, o.env_id, o.group_id) == ("x", 14, "o", 15)
    assert x.score == 1.0 and o.score == -1.0 and x.metrics["success"] == 1.0 and o.metrics["success"] == 0.0
    assert x.response_ids == [list(t.response_ids) for t in ep.turns["x"]] and len(o.turn_states) == 2
    several = agent_trajectories([ep, ep], ["A", "B"], [1, 2])
    assert [t.env_id for t in several] == ["A/x", "A/o", "B/x", "B/o"]
