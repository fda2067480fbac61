"""The package's layers import one way only: every import (module-level or inside a function) goes down this
list, and no group of modules imports itself in a circle. Read from the source with ``ast``, nothing imported."""

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "ragen_rllib"

#: lowest first; a part may import only from parts on earlier lines (the top-level package is the public API)
LAYERS = [
    {"envs"},  # text environments: the contract, games, tool envs, multi-agent envs, a remote client (no LLM)
    {"testing"},  # fault injection into envs, for tests
    {"rl"},  # pure tensor math: advantages, losses, filters, log-probs
    {"core"},  # cross-cutting contracts and rules: batch keys, precision, threads, weight sync
    {"engines"},  # generation engines (vLLM, Hugging Face)
    {"agent"},  # prompts, parsing, transcripts (no RLlib)
    {"models"},  # tiny models, GGUF import, warm starts
    {"runner"},  # the RLlib env runner
    {"algorithms"},  # the RLlib algorithm, learner, module
    {"evaluation"},  # evaluation on fixed seeds, the transcript viewer
    {"run"},  # the commands' machinery: a training run, resources, loggers, Ray start-up, the env server
    {"sweep"},  # Ray Tune sweeps
    {"recipes"},  # demo models and the env demo (used by examples, benchmarks and `demo`)
    {"__init__"},  # the public API: RagenConfig, Ragen, init_ray
    {"cli"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
#: module pairs allowed to import each other (deferred, inside a function), with the reason
KNOWN_PAIRS = {
    # RLlib keeps PPOConfig and PPO in one module; ours are two files (each under the size limit): the config's
    # default algo_class is the algorithm, and the algorithm's default config is the config.
    frozenset({"ragen_rllib.algorithms.ragen.ragen", "ragen_rllib.algorithms.ragen.ragen_config"}),
}


def test_the_readme_layout_lists_the_layers_in_order():
    """The README's layout block names every part, lowest first, in an order these layers allow."""
    readme = (SRC.parent / "README.md").read_text()
    block = readme[readme.index("src/ragen_rllib/   layers, lowest first"):]
    block = block[:block.index("```")]
    listed = [re.match(r"  ([\w]+)", line).group(1) for line in block.splitlines()
              if re.match(r"  [\w]+(/|\.py)", line)]
    assert sorted(listed) == sorted(RANK), "the README's layout must name each part of LAYERS once"
    assert [RANK[p] for p in listed] == sorted(RANK[p] for p in listed), f"README order {listed} breaks LAYERS"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 2:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its body."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module == PACKAGE:
                    edges[name].add(f"{PACKAGE}.__init__")
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    target = sub if sub in modules else node.module
                    if target.startswith(PACKAGE + "."):
                        edges[name].add(target)
            elif isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{path}: relative import; use the full path")
            elif isinstance(node, ast.Import):
                edges[name] |= {a.name for a in node.names if a.name.startswith(PACKAGE + ".")}
    return edges


def _part(module: str) -> str:
    return module.split(".")[1]


def test_every_part_of_the_package_is_in_a_layer():
    parts = {_part(m) for m in _modules()}
    assert parts - set(RANK) == set(), "add the new part to LAYERS"


def test_imports_go_down_the_layers_only():
    wrong = sorted(f"{a} imports {b}" for a, targets in _imports(_modules()).items() for b in targets
                   if _part(a) != _part(b) and RANK[_part(a)] <= RANK[_part(b)])
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle():
    """Tarjan's strongly connected components over modules: only the documented pair may form one."""
    edges = _imports(_modules())
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(frozenset(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    assert [sorted(c) for c in cycles if c not in KNOWN_PAIRS] == []


@pytest.mark.parametrize("part, banned", [
    ("envs", ("ray", "torch", "transformers", "vllm")),  # envs know nothing of LLMs or RLlib
    ("agent", ("ray",)),  # the agent layer knows nothing of RLlib
    ("rl", ("ray", "vllm")),  # pure tensor functions
])
def test_lower_layers_do_not_import_the_stacks_above_them(part, banned):
    found = set()
    for name, path in _modules().items():
        if _part(name) != part:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found |= {f"{name}: {n}" for n in names if n.split(".")[0] in banned}
    assert found == set()
