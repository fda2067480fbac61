"""BFCL multi-turn: the Berkeley Function Calling Leaderboard's stateful multi-turn function calling, offline.

Each episode is one entry of BFCL's ``multi_turn_base`` category (200 entries, shipped inside the ``bfcl-eval``
package): a user with several requests in turn ("move final_report.pdf into a new temp directory", then "grep it
for 'budget analysis'", ...) and the stateful APIs the entry involves (BFCL's own Python classes: a file system,
a trading bot, travel booking, vehicle control, messaging, posting, tickets, math), loaded with the entry's
initial state. The agent calls the APIs as tools (their JSON schemas from BFCL's function docs, minus the
entry's excluded functions) and ends each request with an answer; the observation after an answer is the next
request.

Scoring is BFCL's own multi-turn check, request by request: BFCL's ground-truth calls for the request run on a
second set of instances, then ``state_checker`` (every instance's attributes equal the ground truth's) and
``response_checker`` (the ground truth's results are among the agent's results so far), imported from
``bfcl_eval``. A request that passes earns ``1 / requests``; the first request that fails ends the episode, as it
makes the entry wrong in BFCL; success = every request passed. A request the ground truth answers with calls must
see at least one call.

Nothing is evaluated: BFCL's harness runs model output with ``eval``; here a call is the tool env's parsed JSON,
dispatched to the instance's public method by name, and the ground truth's call strings are read with ``ast``
(literal arguments only). Results are serialised as BFCL does (strings as they are, dicts as JSON, else ``str``).

env_config: ``split`` (``train``: 160 entries, ``validation``: 40, every fifth), ``max_steps``,
``tool_timeout_s``. The reset seed picks the entry; ``reset(options={"index": i})`` picks one directly. Needs
the ``bfcl-eval`` package (installed by the set-up without its dependencies, which pin versions that clash with
this project's; the parts used here need none of them).
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
from functools import lru_cache
from typing import Any

from ragen_rllib.envs.base import StepOutcome, pick_index, require
from ragen_rllib.envs.tools.tool_env import Tool, ToolEnv, tool_call_action

CATEGORY = "BFCL_v4_multi_turn_base.json"
DONE_TEXT = "All requests are done."
INSTRUCTION = (
    "You are an assistant that completes the user's requests by calling the available functions (tools). Make "
    "the calls a request needs, one after another, using their results; when the request is done, give a short "
    "answer. The next request follows."
)
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def _bfcl():
    try:
        import bfcl_eval  # noqa: F401
    except ImportError as err:
        raise ImportError("the BFCL env needs the bfcl-eval package: pip install --no-deps bfcl-eval==2026.3.23 "
                          "(scripts/setup.sh installs it)") from err
    from importlib import resources

    return resources.files("bfcl_eval") / "data"


@lru_cache(maxsize=1)
def load_entries() -> tuple[dict, ...]:
    """BFCL's multi_turn_base entries, each with its ``ground_truth`` (a list of call strings per request)."""
    data = _bfcl()
    answers = {}
    for line in (data / "possible_answer" / CATEGORY).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            answers[row["id"]] = row["ground_truth"]
    entries = []
    for line in (data / CATEGORY).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            entries.append({**row, "ground_truth": answers[row["id"]]})
    return tuple(entries)


def split_entries(split: str) -> tuple[dict, ...]:
    """The fixed split: every fifth entry is validation (40), the rest train (160)."""
    entries = load_entries()
    if split == "validation":
        return entries[4::5]
    if split == "train":
        return tuple(e for i, e in enumerate(entries) if i % 5 != 4)
    raise ValueError(f"split={split!r} is invalid: use 'train' or 'validation'")


def to_json_schema(schema: Any) -> Any:
    """BFCL's parameter schema as JSON Schema (``dict`` -> ``object``, ``float`` -> ``number``, ...)."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            mapped = _TYPES.get(value, value)
            if mapped is not None:
                out["type"] = mapped
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: to_json_schema(v) for name, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out


@lru_cache(maxsize=16)
def _function_docs(class_name: str) -> tuple[dict, ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    path = _bfcl() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(json.loads(line) for line in path.read_text().splitlines() if line.strip())


def _instances(entry: dict) -> dict[str, Any]:
    """Fresh instances of the entry's classes, loaded with its initial state (as BFCL's harness does)."""
    import importlib

    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    out = {}
    for name in entry["involved_classes"]:
        instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)()
        if name not in STATELESS_CLASSES:
            instance._load_scenario(copy.deepcopy(entry["initial_config"].get(name, {})), long_context=False)
        out[name] = instance
    return out


def _methods(instances: dict[str, Any]) -> dict[str, Any]:
    return {name: method for instance in instances.values()
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod) if not name.startswith("_")}


def serialize(result: Any) -> str:
    """A call's result as BFCL's harness writes it."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def parse_call(text: str, methods: dict[str, Any]) -> tuple[str, dict]:
    """``"mv(source='a', destination='b')"`` -> ``("mv", {"source": "a", "destination": "b"})``, reading only
    a plain call with literal arguments (positional ones named from the method's signature)."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id not in methods:
        raise ValueError(f"not a call of a known function: {text!r}")
    name = node.func.id
    params = [p for p in inspect.signature(methods[name]).parameters if p != "self"]
    kwargs = {params[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    kwargs.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
    return name, kwargs


class BFCLMultiTurnEnv(ToolEnv):
    """See the module docstring."""

    def __init__(self, split: str = "train", max_steps: int = 40, tool_timeout_s: float = 5.0,
                 render_mode: str | None = "ansi") -> None:
        require(split in ("train", "validation"), "split", split, "'train' or 'validation'")
        super().__init__(tool_timeout_s=tool_timeout_s, max_steps=max_steps, render_mode=render_mode)
        self.split = split
        self.entries = split_entries(split)
        self.entry = self.entries[0]
        self.tools = []

    @property
    def instruction(self) -> str:
        return INSTRUCTION

    # ------------------------------------------------------------------ episode
    def _reset_state(self, options: dict) -> None:
        self.entry = self.entries[pick_index(options, len(self.entries), self.np_random)]
        self.model, self.reference = _instances(self.entry), _instances(self.entry)
        self._model_methods, self._reference_methods = _methods(self.model), _methods(self.reference)
        excluded = set(self.entry.get("excluded_function", []))
        self.tools = [Tool(doc["name"], doc["description"], to_json_schema(doc["parameters"]))
                      for name in self.entry["involved_classes"] for doc in _function_docs(name)
                      if doc["name"] not in excluded and doc["name"] in self._model_methods]
        self.request = 0
        self.passed = 0
        self.results: list[str] = []  # every result of the agent's calls so far (BFCL's response check)
        self._request_calls = 0  # the agent's calls in the current request

    @property
    def num_requests(self) -> int:
        return len(self.entry["question"])

    def _render_text(self) -> str:
        if self.request >= self.num_requests:
            return DONE_TEXT
        messages = self.entry["question"][self.request]
        return "\n".join(m["content"] for m in messages if m.get("role") == "user")

    def _run_tool(self, name: str, arguments: dict) -> str:
        self._request_calls += 1
        try:
            result = serialize(self._model_methods[name](**arguments))
        except Exception as err:
            self.results.append(f"Error during execution: {err}")
            raise
        self.results.append(result)
        return result

    def _score_answer(self, text: str) -> StepOutcome:
        """End the current request: BFCL's checks against the ground truth's calls for it."""
        truth = self.entry["ground_truth"][self.request]
        truth_results = []
        for call in truth:
            name, kwargs = parse_call(call, self._reference_methods)
            try:
                truth_results.append(serialize(self._reference_methods[name](**kwargs)))
            except Exception as err:
                truth_results.append(f"Error during execution: {err}")
        ok = self._request_passes(truth, truth_results)
        self.request += 1
        self._request_calls = 0
        if not ok:
            return StepOutcome(reward=0.0, terminated=True, effective=True, success=False)
        self.passed += 1
        last = self.request >= self.num_requests
        return StepOutcome(reward=1.0 / self.num_requests, terminated=last, effective=True, success=last)

    def _request_passes(self, truth: list[str], truth_results: list[str]) -> bool:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

        if not truth:
            return True
        if self._request_calls == 0:
            return False
        return (state_checker(self.model, self.reference)["valid"]
                and response_checker(self.results, truth_results, self.request)["valid"])

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str:
        """BFCL's ground-truth calls of the current request in order, then an answer."""
        truth = self.entry["ground_truth"][self.request] if self.request < self.num_requests else []
        if self._request_calls < len(truth):
            name, kwargs = parse_call(truth[self._request_calls], self._model_methods)
            return tool_call_action(name, kwargs)
        return "Done."

    def __repr__(self) -> str:
        return f"BFCLMultiTurnEnv(split={self.split!r})"
