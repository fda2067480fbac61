"""Multi-agent warm-start demonstrations are rollout transcripts: token-exact per agent, the loss on assistant
tokens only, the oracle never loses, noise makes games imperfect, the LLM's side cycles."""

import numpy as np
import pytest
from transformers import AutoTokenizer

from ragen_rllib.agent.chat_format import ChatFormat
from ragen_rllib.agent.config import AgentConfig
from ragen_rllib.agent.prompts import assistant_text, generation_prefill
from ragen_rllib.envs.multi_agent.tictactoe import TicTacToeEnv
from ragen_rllib.models.demonstrations import response_ids
from ragen_rllib.models.multi_agent_demos import MultiAgentDemoPolicy, demo_samples, multi_agent_demonstrations
from ragen_rllib.models.tiny import tiny_model_path

CFG = AgentConfig(max_turns=5, max_response_tokens=24, max_model_len=1024)


@pytest.fixture(scope="module")
def chat():
    return ChatFormat(AutoTokenizer.from_pretrained(tiny_model_path("nano")), prefill=generation_prefill(CFG))


def games(chat, policy, episodes=20, seed=0, opening_moves=2):
    return list(multi_agent_demonstrations(lambda: TicTacToeEnv(opening_moves=opening_moves), chat, CFG, policy,
                                           episodes, seed))


def test_samples_are_the_transcripts_token_for_token(chat):
    eps = games(chat, MultiAgentDemoPolicy(noise=0.3), episodes=6)
    samples = demo_samples(eps)
    assert len(samples) == sum(len(ep.llm_agents) for ep in eps) == 12  # self-play: x and o, one sample each
    k = 0
    for ep in eps:
        for agent in ep.llm_agents:
            (sample,) = ep.samples(agent)
            assert samples[k] == {"input_ids": sample.input_ids, "loss_mask": sample.loss_mask}
            k += 1
            turns = ep.transcripts[agent].turns
            # the trained ids are exactly each turn's demonstrated response: its move as text, then EOS
            expected = [response_ids(chat, assistant_text(f"I will move {t.parsed.actions[0]}.",
                                                          t.parsed.actions[0], CFG)) for t in ep.turns[agent]]
            ids, mask = np.array(sample.input_ids), np.array(sample.loss_mask)
            assert ids[mask == 1].tolist() == [i for r in expected for i in r]
            assert [list(t.response_ids) for t in ep.turns[agent]] == expected
            # the whole sample is the chat template's rendering of the conversation (prompt ids never trained)
            history = [(t.user, t.response) for t in turns[:-1]]
            prompt = chat.prompt(ep.systems[agent], history, turns[-1].user)[0]
            assert sample.input_ids[:len(prompt)] == prompt
            assert sample.input_ids[len(prompt):] == expected[-1]
            trained = chat.tokenizer.decode(ids[mask == 1].tolist())
            assert trained.count("</answer>") == len(turns) and "Board" not in trained and "<|im_start|>" not in trained
            assert "Board" in chat.tokenizer.decode(ids[mask == 0].tolist())


def test_the_oracle_never_loses_and_noise_makes_games_imperfect(chat):
    x_vs_random = MultiAgentDemoPolicy(noise=0.0, sides=(("x",),), opponent="random")
    clean = games(chat, x_vs_random, episodes=30)
    assert all(ep.returns["x"] >= 0 for ep in clean) and sum(ep.success["x"] for ep in clean) >= 20
    assert all(t.action_is_valid and t.parsed.format_ok for ep in clean for t in ep.turns["x"])
    noisy = games(chat, MultiAgentDemoPolicy(noise=1.0, sides=(("x",),), opponent="minimax"), episodes=30)
    assert any(ep.returns["x"] < 0 for ep in noisy)  # random moves lose to minimax
    assert all(t.action_is_valid for ep in noisy for t in ep.turns["x"])  # random, but always legal


def test_pair_demonstrations_use_the_envs_own_random_moves(chat):
    """The solver/verifier pair: oracle play always succeeds; at noise 1 every move is the env's random one
    (well-formed: a random expression of the numbers, a random verdict), so no move is invalid yet teams fail."""
    from ragen_rllib.envs.multi_agent.solver_verifier import SolverVerifierEnv

    def pair(noise):
        return list(multi_agent_demonstrations(lambda: SolverVerifierEnv(num_numbers=2, max_number=9, max_target=20),
                                               chat, CFG, MultiAgentDemoPolicy(noise=noise, opponent="oracle"), 20, 0))
    assert all(ep.success["solver"] and ep.success["verifier"] for ep in pair(0.0))
    noisy = pair(1.0)
    assert all(t.action_is_valid for ep in noisy for a in ep.llm_agents for t in ep.turns[a])
    assert not all(ep.success["solver"] for ep in noisy)
    assert {t.parsed.actions[0] for ep in noisy for t in ep.turns["verifier"]} == {"accept", "reject"}


def test_agent_noise_overrides_noise_for_the_agents_it_names(chat):
    """{"verifier": 0.0}: every verdict is the oracle's (accept exactly the correct proposals) while the solver's
    proposals stay noisy, so some are rejected."""
    from ragen_rllib.envs.multi_agent.solver_verifier import SolverVerifierEnv

    policy = MultiAgentDemoPolicy(noise=1.0, agent_noise={"verifier": 0.0}, opponent="oracle")
    assert (policy.noise_of("verifier"), policy.noise_of("solver")) == (0.0, 1.0)
    env = SolverVerifierEnv(num_numbers=2, max_number=9, max_target=20)
    eps = list(multi_agent_demonstrations(lambda: env, chat, CFG, policy, 30, 0))
    verdicts = [t.parsed.actions[0] for ep in eps for t in ep.turns["verifier"]]
    assert {"accept", "reject"} <= set(verdicts)
    for ep in eps:  # an accepted proposal is correct (the oracle's verdict), a rejected one is not
        solver, verifier = ep.turns["solver"], ep.turns["verifier"]
        assert verifier[-1].parsed.actions[0] == "accept" or len(verifier) == env.max_rounds
        assert ep.success["solver"] == (verifier[-1].parsed.actions[0] == "accept")
        assert len(solver) == len(verifier)


def test_sides_cycle_and_games_are_deterministic(chat):
    policy = MultiAgentDemoPolicy(noise=0.3, sides=(("x",), ("o",)))
    eps = games(chat, policy, episodes=4)
    assert [ep.llm_agents for ep in eps] == [["x"], ["o"], ["x"], ["o"]]
    assert demo_samples(eps) == demo_samples(games(chat, policy, episodes=4))
    assert demo_samples(eps) != demo_samples(games(chat, policy, episodes=4, seed=1))


@pytest.mark.parametrize(("kwargs", "match"), [({"noise": 1.5}, "noise"), ({"sides": ()}, "sides"),
                                               ({"sides": ((),)}, "sides"),
                                               ({"agent_noise": {"o": -0.1}}, r"agent_noise\['o'\]")])
def test_bad_policies_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiAgentDemoPolicy(**kwargs)


def test_unknown_sides_are_refused(chat):
    with pytest.raises(ValueError, match=r"\['z'\]"):
        games(chat, MultiAgentDemoPolicy(sides=(("z",),)), episodes=1)
    with pytest.raises(ValueError, match=r"agent_noise name agents \['z'\]"):
        games(chat, MultiAgentDemoPolicy(agent_noise={"z": 0.0}), episodes=1)


def test_warm_start_trains_on_multi_agent_games_and_evaluates_against_the_opponent(tmp_path):
    import json
    import shutil

    from ragen_rllib.models.warm_start import REPORT_FILE, WarmStartConfig, warm_start

    model_dir = tmp_path / "m"
    shutil.copytree(tiny_model_path("nano"), model_dir)
    env = "ragen_rllib.envs.multi_agent.tictactoe:TicTacToeEnv"
    cfg = WarmStartConfig(envs=(env,), env_configs={env: {"opening_moves": 2, "openings": "train"}},
                          episodes_per_env=4, epochs=1, sides=(("x",), ("o",)), opponent="random", agent=CFG,
                          eval_episodes=3, eval_env_config={"opening_moves": 2, "openings": "validation"})
    report = warm_start(model_dir, cfg, progress=False)
    assert report.envs == [env] and report.demo_episodes == 4 and report.samples == 4 and report.steps >= 1
    assert report.eval["episodes"] == 3 and report.eval["success"] == report.eval["win_rate"]
    assert report.eval_env_config == {"opening_moves": 2, "openings": "validation"}
    assert json.loads((model_dir / REPORT_FILE).read_text())["config"]["sides"] == [["x"], ["o"]]
