"""Measurements live in docs/ and benchmarks/results/, not in the package's comments and docstrings: a comment
says why, in a sentence (a figure there goes stale with the next machine or change)."""

import ast
import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ragen_rllib"
FIGURE = re.compile(r"\d+(\.\d+)?\s?x (faster|slower)|~\d+(\.\d+)?\s?(s|ms|min|%|GiB|GB)\b|\d+(\.\d+)?\s?tokens/s"
                    r"|\d+(\.\d+)? ?(s|min) on \d|peaked at \d|\d+(\.\d+)? (to|->) \d+(\.\d+)? ?s\b|\(measured",
                    re.IGNORECASE)


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring in ``path``."""
    text = path.read_text()
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


def test_comments_and_docstrings_quote_no_measurements():
    found = [f"{path.relative_to(SRC)}:{line}: {FIGURE.search(text).group(0)!r}"
             for path in sorted(SRC.rglob("*.py")) for line, text in _prose(path) if FIGURE.search(text)]
    assert found == []
