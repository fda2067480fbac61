"""MetaMathQA: answer one math word problem (RAGEN's ``metamathqa`` env).

Problems come from a local file given by env_config ``data_path``: JSON lines (``.jsonl``), a JSON
list (``.json``) or, when ``pyarrow`` is installed, ``.parquet``. Each row needs a question
(``query``, as in MetaMathQA, or ``question``/``problem``) and a gold answer: the ``answer`` field
(a GSM8K-style ``"... #### 72"`` keeps the part after ``####``), else the text after the last
``"The answer is:"`` of MetaMathQA's ``response`` field. The default is a shipped sample of 60
grade-school problems. The reset seed picks the problem (``reset(options={"index": i})`` picks one
directly).

Answers are compared after :func:`normalize_answer`; when both sides are plain numbers
(``7``, ``-2.50``, ``3/4``, ``\\frac{3}{4}``) they are compared exactly as rationals, otherwise as
case-insensitive strings without whitespace. Reward 1 for a match, else 0. Any non-empty answer
is a valid action and ends the episode; ``max_steps`` empty answers truncate it.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ragen_rllib.envs.base import MAX_OBSERVATION_CHARS, TEXT_CHARSET, StepOutcome, TextEnv, require

#: Resource name of the shipped sample (inside ``ragen_rllib.envs``).
SAMPLE_RESOURCE = "data/metamathqa_sample.jsonl"
#: File suffixes ``data_path`` may have.
SUFFIXES = (".jsonl", ".json", ".parquet")
QUESTION_KEYS = ("query", "question", "problem")

INSTRUCTION = (
    "You are solving a math word problem. Work it out, then give only the final answer "
    "(a number such as 42, 7.5 or 3/4) as your answer."
)

_PREFIX_RE = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\b(?:\s+is)?\s*[:=]?\s*", re.IGNORECASE)
_BOXED_RE = re.compile(r"\\boxed\s*\{(.*)\}", re.DOTALL)
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_VARIABLE_RE = re.compile(r"^[a-zA-Z]\s*=\s*")
_DECIMAL = r"(?:\d+(?:\.\d*)?|\.\d+)"
_NUMBER_RE = re.compile(rf"([-+]?{_DECIMAL})(?:/([-+]?{_DECIMAL}))?")
_ANSWER_IS_RE = re.compile(r"The answer is\s*:?", re.IGNORECASE)
_ASCII_LOOKALIKES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "\u2212": "-",
     "\u00d7": "*", "\u00f7": "/", "\u00a0": " "}
)


@dataclass(frozen=True)
class Problem:
    """One question and its gold answer."""

    question: str
    answer: str


# ----------------------------------------------------------------------- answers
def normalize_answer(text: str) -> str:
    """Strip answer prefixes, ``\\boxed{}``, ``$``, ``,``, ``%``, a trailing ``.`` and ``x =``."""
    s = text.translate(_ASCII_LOOKALIKES).strip()
    for _ in range(3):  # "Final answer: The answer is: 5"
        s = _PREFIX_RE.sub("", s, count=1)
    boxed = _BOXED_RE.search(s)
    if boxed:
        s = boxed.group(1)
    s = s.replace("$", "").replace(",", "").replace("\\%", "").replace("\\!", "").strip()
    s = _FRAC_RE.sub(r"\1/\2", s)
    s = _VARIABLE_RE.sub("", s)
    s = s.rstrip(". ").rstrip("%").strip()
    return s


def parse_number(text: str) -> Fraction | None:
    """An exact value for ``"7"``, ``"-2.50"``, ``"3/4"`` (after normalising), else None."""
    match = _NUMBER_RE.fullmatch(re.sub(r"\s+", "", text))
    if match is None:
        return None
    numerator = Fraction(match.group(1))
    if match.group(2) is None:
        return numerator
    denominator = Fraction(match.group(2))
    return None if denominator == 0 else numerator / denominator


def answers_match(prediction: str, gold: str) -> bool:
    """Whether a predicted answer equals the gold answer after normalisation."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if not pred:
        return False
    pred_value, ref_value = parse_number(pred), parse_number(ref)
    if pred_value is not None and ref_value is not None:
        return pred_value == ref_value
    return re.sub(r"\s+", "", pred).lower() == re.sub(r"\s+", "", ref).lower()


def gold_answer(row: dict[str, Any]) -> str | None:
    """A row's gold answer: ``answer`` (after ``####`` if any), else ``response``'s "The answer is: X"."""
    answer = row.get("answer")
    if answer is not None and str(answer).strip():
        return str(answer).split("####")[-1].strip()
    response = row.get("response")
    if isinstance(response, str):
        found = list(_ANSWER_IS_RE.finditer(response))
        if found:
            rest = response[found[-1].end() :].strip()
            return rest.splitlines()[0].strip() if rest else None
    return None


# ----------------------------------------------------------------------- data
def _read_rows(path: Path) -> list[Any]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ValueError(
                f"env_config['data_path'] = {str(path)!r} is a parquet file but pyarrow is not installed; "
                "install the 'parquet' extra or use a .jsonl file"
            ) from None
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise ValueError(
                f"env_config['data_path'] = {str(path)!r}: a .json file must hold a list of objects"
            )
        return rows
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _to_problems(rows: list[Any], where: str) -> tuple[Problem, ...]:
    problems = []
    for number, row in enumerate(rows, start=1):
        question = next((row.get(k) for k in QUESTION_KEYS if isinstance(row, dict) and row.get(k)), None)
        answer = gold_answer(row) if isinstance(row, dict) else None
        if not isinstance(question, str) or not answer:
            raise ValueError(
                f"env_config['data_path'] = {where!r}: row {number} needs a question "
                f"({'/'.join(QUESTION_KEYS)}) and an 'answer' or a 'response' ending in 'The answer is: X'"
            )
        problems.append(Problem(question.strip(), answer))
    if not problems:
        raise ValueError(f"env_config['data_path'] = {where!r} holds no problems")
    return tuple(problems)


@lru_cache(maxsize=8)
def _load_file(path: str, mtime_ns: int, size: int) -> tuple[Problem, ...]:
    try:
        rows = _read_rows(Path(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"env_config['data_path'] = {path!r} is not valid JSON lines: {err}") from None
    return _to_problems(rows, path)


@lru_cache(maxsize=1)
def _load_sample() -> tuple[Problem, ...]:
    text = resources.files("ragen_rllib.envs").joinpath(SAMPLE_RESOURCE).read_text(encoding="utf-8")
    return _to_problems([json.loads(line) for line in text.splitlines() if line.strip()], SAMPLE_RESOURCE)


def load_problems(data_path: str | os.PathLike | None = None) -> tuple[Problem, ...]:
    """Problems of ``data_path`` (cached per file version), or the shipped sample when None."""
    if data_path is None:
        return _load_sample()
    path = Path(data_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"env_config['data_path'] = {str(data_path)!r}: no such file")
    require(path.suffix in SUFFIXES, "data_path", str(data_path), f"use a file ending in one of {SUFFIXES}")
    stat = path.stat()
    return _load_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def to_observation_text(text: str) -> str:
    """``text`` within the observation charset: ASCII look-alikes mapped, other symbols spelled by name."""
    text = unicodedata.normalize("NFKC", text).translate(_ASCII_LOOKALIKES)
    out = [ch if ch in TEXT_CHARSET else f"[{unicodedata.name(ch, '?')}]" for ch in text]
    return "".join(out)[:MAX_OBSERVATION_CHARS]


# ----------------------------------------------------------------------- env
class MetaMathQAEnv(TextEnv):
    """Answer one math word problem; reward 1 if the answer matches the gold answer.

    Args:
        data_path: a .jsonl/.json/.parquet file of problems (None: the shipped 60-problem sample).
        max_steps: attempts (empty answers included) before truncation.
    """

    action_names: list[str] = []  # free-form answer

    def __init__(
        self,
        data_path: str | os.PathLike | None = None,
        max_steps: int = 3,
        render_mode: str | None = "ansi",
    ) -> None:
        ok = data_path is None or isinstance(data_path, (str, os.PathLike))
        allowed = "use a path to a .jsonl/.json/.parquet file, or None for the shipped sample"
        require(ok, "data_path", data_path, allowed)
        ok = isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps >= 1
        require(ok, "max_steps", max_steps, "use an integer >= 1")
        self.problems = load_problems(data_path)
        self.max_steps = max_steps
        super().__init__(render_mode)
        self.index = 0
        self.problem = self.problems[0]
        self._question_text = to_observation_text(self.problem.question)

    @property
    def instruction(self) -> str:
        return INSTRUCTION

    def oracle_action(self) -> str | None:
        """The gold answer of the current problem."""
        return self.problem.answer

    def _reset_state(self, options: dict) -> None:
        index = options.get("index")
        if index is None:
            index = int(self.np_random.integers(len(self.problems)))
        ok = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(self.problems)
        if not ok:
            last = len(self.problems) - 1
            raise ValueError(f"reset option 'index' = {index!r} is invalid: use an int from 0 to {last}")
        self.index = int(index)
        self.problem = self.problems[self.index]
        self._question_text = to_observation_text(self.problem.question)

    def _parse_action(self, text: str) -> str | None:
        return text or None

    def _apply(self, action: str) -> StepOutcome:
        correct = answers_match(action, self.problem.answer)
        return StepOutcome(reward=1.0 if correct else 0.0, terminated=True, effective=True, success=correct)

    def _render_text(self) -> str:
        return self._question_text
