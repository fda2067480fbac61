"""MetaMathQA: data loading, answer normalisation, reward, seeding and data errors."""

import json

import gymnasium as gym
import pytest

import ragen_rllib.envs  # noqa: F401  (registers the ids)
from ragen_rllib.envs.games.metamathqa import (
    MetaMathQAEnv,
    answers_match,
    gold_answer,
    load_problems,
    normalize_answer,
)


def make(**kw):
    return gym.make("ragen/MetaMathQA-v0", **kw)


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_shipped_sample():
    problems = load_problems()
    assert len(problems) == 60
    assert len({p.question for p in problems}) == 60
    first = problems[0]  # hand-checked: 26 - 9 + 9 = 26
    assert first.question.startswith("Carla has 26 apples. She gives 9 apples") and first.answer == "26"
    assert {p.answer for p in problems} >= {"\\frac{3}{5}", "-11", "2,432", "7.5"}


def test_known_problem_and_answer_variants():
    env = make()
    obs, _ = env.reset(seed=0, options={"index": 0})
    assert obs == load_problems()[0].question
    for answer in ["26", "The answer is: 26", "26.", "$26", "26.0", " 26 ", "\\boxed{26}"]:
        env.reset(seed=0, options={"index": 0})
        _, r, term, trunc, info = env.step(answer)
        assert (r, term, trunc, info["success"]) == (1.0, True, False, True), answer
        assert info["action_is_valid"]
    env.reset(seed=0, options={"index": 0})
    _, r, term, trunc, info = env.step("25")
    assert (r, term, info["success"], info["action_is_valid"]) == (0.0, True, False, True)


def test_seed_picks_problem_and_oracle_is_gold():
    env = make()
    seen = set()
    for seed in range(30):
        obs, _ = env.reset(seed=seed)
        assert env.reset(seed=seed)[0] == obs
        seen.add(obs)
        _, r, term, _, info = env.step(env.unwrapped.oracle_action())
        assert (r, term, info["success"]) == (1.0, True, True)
    assert len(seen) > 15


def test_empty_answers_are_invalid_and_truncate():
    env = make()
    obs0, _ = env.reset(seed=4)
    results = [env.step(a) for a in ["", "   ", "\n"]]
    assert all(obs == obs0 and r == 0.0 and not info["action_is_valid"] for obs, r, _, _, info in results)
    assert [res[3] for res in results] == [False, False, True]


@pytest.mark.parametrize(
    ("prediction", "gold", "match"),
    [
        ("3/5", "\\frac{3}{5}", True),
        ("0.6", "\\frac{3}{5}", True),
        ("$\\dfrac{3}{5}$", "0.6", True),
        ("2432", "2,432", True),
        ("x = 7", "7", True),
        ("Answer: 25%", "25", True),
        ("Final answer: 7.50", "7.5", True),
        ("\u221211", "-11", True),  # unicode minus
        ("-11", "11", False),
        ("0.333", "1/3", False),
        ("2+3", "5", False),  # expressions are not evaluated
        ("Paris", "paris", True),
        ("(1, 2)", "(1,2)", True),
        ("", "5", False),
        ("$", "5", False),
    ],
)
def test_answers_match(prediction, gold, match):
    assert answers_match(prediction, gold) is match


def test_normalize_answer():
    assert normalize_answer("The answer is: $1,250.") == "1250"
    assert normalize_answer("\\boxed{\\frac{1}{2}}") == "1/2"


def test_gold_answer_extraction():
    assert gold_answer({"response": "He has 3 + 15 = 18.\nThe answer is: 18"}) == "18"
    assert gold_answer({"response": "The answer is: 5 then The answer is: 6"}) == "6"
    assert gold_answer({"answer": "Natalia sold 48 + 24 = 72 clips.\n#### 72"}) == "72"
    assert gold_answer({"answer": 5, "response": "The answer is: 6"}) == "5"
    assert gold_answer({"response": "no final line"}) is None


def test_custom_jsonl_json_and_parquet(tmp_path):
    rows = [
        {"question": "What is 2 + 2?", "answer": "4"},
        {"query": "Half of 9?", "response": "The answer is: 4.5"},
    ]
    jsonl = _write_jsonl(tmp_path / "p.jsonl", rows)
    env = make(data_path=str(jsonl))
    env.reset(seed=0, options={"index": 1})
    assert env.unwrapped.render() == "Half of 9?"
    assert env.step("9/2")[1] == 1.0
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(rows))
    assert [p.answer for p in load_problems(as_json)] == ["4", "4.5"]
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    table = pa.table(
        {"query": ["What is 2 + 2?", "Half of 9?"], "response": ["The answer is: 4", "The answer is: 4.5"]}
    )
    pq.write_table(table, tmp_path / "p.parquet")
    assert [(p.question, p.answer) for p in load_problems(tmp_path / "p.parquet")] == [
        ("What is 2 + 2?", "4"),
        ("Half of 9?", "4.5"),
    ]


def test_unicode_questions_stay_in_the_observation_charset(tmp_path):
    row = {"query": "A circle\u2019s area is 4\u03c0. r\u00b2 = ?", "answer": "4"}
    path = _write_jsonl(tmp_path / "u.jsonl", [row])
    env = make(data_path=path)
    obs, _ = env.reset(seed=0)
    assert obs == "A circle's area is 4[GREEK SMALL LETTER PI]. r2 = ?"
    assert env.observation_space.contains(obs)


def test_data_errors(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match="data_path.*nope.jsonl"):
        MetaMathQAEnv(data_path=str(missing))
    csv = tmp_path / "p.csv"
    csv.write_text("q,a\n")
    with pytest.raises(ValueError, match="data_path"):
        MetaMathQAEnv(data_path=csv)
    bad_row = _write_jsonl(tmp_path / "bad.jsonl", [{"query": "ok?", "answer": "1"}, {"query": "no answer"}])
    with pytest.raises(ValueError, match="row 2"):
        MetaMathQAEnv(data_path=bad_row)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no problems"):
        MetaMathQAEnv(data_path=empty)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(ValueError, match="data_path"):
        MetaMathQAEnv(data_path=broken)
    with pytest.raises(ValueError, match="max_steps"):
        MetaMathQAEnv(max_steps=0)
    with pytest.raises(ValueError, match="index"):
        MetaMathQAEnv().reset(seed=0, options={"index": 60})
