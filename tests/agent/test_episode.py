"""Turn execution, budgets, penalties and the batched rollout loop."""

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the envs)
from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.episode import M_NUM_ACTIONS, M_SUCCESS, M_VALID, AgentEpisode
from ragen_rllib.agent.prompts import INVALID_WARNING
from ragen_rllib.agent.rollout import rollout, summarize
from ragen_rllib.engines.base import Generation, SamplingConfig

DESC = ["SFFF", "FHFH", "FFFH", "HFFG"]  # gymnasium's 4x4 map: Down, Down, Right, Right, Down, Right wins


def frozen_lake():
    return gym.make("ragen/FrozenLake-v0", desc=DESC, is_slippery=False)


def respond(chat, tok, answer):
    return chat.encode(f" plan </think> <answer> {answer} </answer>") + [tok.eos_token_id]


@pytest.fixture
def chat(chatml_tokenizer):
    return ChatFormat(chatml_tokenizer, prefill="<think>")


def test_actions_execute_in_order_and_win(chat, chatml_tokenizer):
    tok = chatml_tokenizer
    ep = AgentEpisode(frozen_lake(), chat, AgentConfig(), seed=0)
    rewards = []
    for answer in ["Down || down", "RIGHT || Down", "Right || right"]:
        ep.prompt()
        rewards.append(ep.step(respond(chat, tok, answer)).result.reward)
    assert rewards == [0.0, 0.0, 1.0]
    assert ep.done and ep.success and ep.actions_left == 4
    assert ep.metrics()[M_SUCCESS] == 1.0 and ep.metrics()[M_NUM_ACTIONS] == 6


def test_format_penalty_warning_and_unchanged_state(chat, chatml_tokenizer):
    tok = chatml_tokenizer
    ep = AgentEpisode(frozen_lake(), chat, AgentConfig(), seed=0)
    ep.prompt()
    before = ep.state
    rec = ep.step(chat.encode(" I forgot the tags") + [tok.eos_token_id])
    assert not rec.parsed.format_ok and rec.result.reward == pytest.approx(-0.1)
    assert ep.state == before and ep.actions_left == 10
    assert INVALID_WARNING in ep.user_text() and "Reward:\n-0.1" in ep.user_text()
    ep.prompt()
    rec = ep.step(respond(chat, tok, "Down || Fly"))  # one valid, one invalid: the valid one runs, penalty applies
    assert rec.result.actions == ("Down",) and rec.result.reward == pytest.approx(-0.1)
    assert not rec.result.action_is_valid and ep.actions_left == 9
    assert ep.metrics()[M_VALID] == 0.0


def test_trajectory_budget_stops_the_episode(chat, chatml_tokenizer):
    cfg = AgentConfig(max_actions_per_traj=3, max_turns=5)
    ep = AgentEpisode(frozen_lake(), chat, cfg, seed=0)
    ep.prompt()
    ep.step(respond(chat, chatml_tokenizer, "Right || Left"))
    ep.prompt()
    rec = ep.step(respond(chat, chatml_tokenizer, "Right || Left"))
    assert rec.result.actions == ("Right",) and ep.actions_left == 0 and ep.done
    with pytest.raises(RuntimeError):
        ep.prompt()


def test_hole_ends_the_episode_without_success(chat, chatml_tokenizer):
    ep = AgentEpisode(frozen_lake(), chat, AgentConfig(), seed=0)
    ep.prompt()
    rec = ep.step(respond(chat, chatml_tokenizer, "Right || Down"))  # (0,1) then the hole at (1,1)
    assert rec.result.done and ep.done and not ep.success and rec.result.reward == 0.0


class ScriptedEngine:
    """A GenerationEngine that answers every prompt with the same response and records its calls."""

    def __init__(self, ids):
        self.ids, self.calls = ids, []

    def generate(self, prompts, sampling):
        self.calls.append((len(prompts), sampling))
        return [Generation(token_ids=list(self.ids), logprobs=[-1.0] * len(self.ids)) for _ in prompts]

    def load_weights(self, state_dict):
        raise NotImplementedError

    def close(self):
        pass


def test_rollout_makes_one_batched_call_per_turn(chat, chatml_tokenizer):
    engine = ScriptedEngine(respond(chat, chatml_tokenizer, "Down"))
    envs = [frozen_lake() for _ in range(3)] + [gym.make("ragen/FrozenLake-v0", desc=["SH", "FG"], is_slippery=False)]
    eps = rollout(engine, chat, envs, [0, 1, 2, 3], AgentConfig(max_turns=4), SamplingConfig(seed=7))
    # "Down" every turn: the 4x4 envs fall into the hole at (3,0) on turn 3; the 2x2 env hits the wall and
    # runs all 4 turns
    assert [c[0] for c in engine.calls] == [4, 4, 4, 1]
    assert [c[1].seed for c in engine.calls] == [7, 7 + 1_000_003, 7 + 2_000_006, 7 + 3_000_009]
    assert all(c[1].max_tokens == 400 for c in engine.calls)
    assert [len(ep.turns) for ep in eps] == [3, 3, 3, 4]
    stats = summarize(eps)
    assert stats[M_SUCCESS] == 0.0 and stats["format_ok"] == 1.0
    for ep in eps:
        [sample] = ep.samples()
        assert sum(sample.loss_mask) == len(engine.ids) * len(ep.turns) and sample.has_logprobs


@pytest.mark.parametrize("env_id", ["ragen/FrozenLake-v0", "ragen/Sokoban-v0", "ragen/Countdown-v0", "ragen/Sudoku-v0"])
def test_arbitrary_sampled_ids_never_raise(chat, chatml_tokenizer, env_id):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tok = chatml_tokenizer
    fragments = st.sampled_from([" </think>", " <answer>", " </answer>", " Left", " ||", "<think>", " (1+2)"])
    pieces = st.lists(st.one_of(fragments.map(chat.encode), st.lists(st.integers(0, len(tok) - 1), max_size=5)),
                      max_size=12)

    @settings(max_examples=25, deadline=None)
    @given(st.lists(pieces.map(lambda ps: [i for p in ps for i in p]), min_size=1, max_size=5))
    def run(responses):
        ep = AgentEpisode(gym.make(env_id), chat, AgentConfig(), seed=1)
        for ids in responses:
            if ep.done:
                break
            ep.prompt()
            rec = ep.step(ids)
            assert rec.result.reward <= 10.0 + 1.0 and len(rec.result.actions) <= 2
        [sample] = ep.samples()
        assert sum(sample.loss_mask) == sum(len(t.response_ids) for t in ep.turns)

    run()


class StepBug(gym.Wrapper):
    def step(self, action):
        raise RuntimeError("env bug in step")


def test_an_env_that_raises_in_step_ends_only_its_own_episode(chat, chatml_tokenizer):
    engine = ScriptedEngine(respond(chat, chatml_tokenizer, "Down"))
    envs = [frozen_lake(), StepBug(frozen_lake()), frozen_lake()]
    eps = rollout(engine, chat, envs, [0, 0, 0], AgentConfig(max_turns=4), SamplingConfig(seed=7))
    assert [ep.error for ep in eps] == [None, "RuntimeError: env bug in step", None]
    assert [len(ep.turns) for ep in eps] == [3, 0, 3] and eps[1].done


def test_a_nan_reward_or_a_failing_reset_ends_only_its_own_episode(chat, chatml_tokenizer, tmp_path):
    from ragen_rllib.testing.fault_inject import FaultInjectEnv

    (tmp_path / "nan").write_text("nan *")
    (tmp_path / "reset").write_text("raise * reset")
    nan = FaultInjectEnv(env_config={"size": 4}, trigger_file=str(tmp_path / "nan"))
    bad_reset = FaultInjectEnv(env_config={"size": 4}, trigger_file=str(tmp_path / "reset"))
    engine = ScriptedEngine(respond(chat, chatml_tokenizer, "Down"))
    eps = rollout(engine, chat, [frozen_lake(), nan, bad_reset], [0, 0, 0], AgentConfig(max_turns=4),
                  SamplingConfig(seed=7))
    assert eps[0].error is None and len(eps[0].turns) == 3
    assert eps[1].error.startswith("ValueError: the env returned a non-finite reward nan") and eps[1].turns == []
    assert eps[2].error == "RuntimeError: injected fault in reset" and eps[2].done and eps[2].turns == []
    assert engine.calls[0][0] == 2  # the episode whose reset failed never reaches the engine
