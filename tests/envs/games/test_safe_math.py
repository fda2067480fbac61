"""The safe arithmetic evaluator: exact values, and fast rejection of everything else."""

import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragen_rllib.envs.games.safe_math import MAX_EXPRESSION_CHARS, numbers_used, safe_eval


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("1+2*3", 7),
        ("(1 + 2) * 3", 9),
        ("7/2", Fraction(7, 2)),
        ("10 / 4 * 2", 5),
        ("-3 + -(-4)", 1),
        ("+5 - 8", -3),
        ("0.1 + 0.2", Fraction(3, 10)),
        (" 2 * (3 + 4) \n", 14),
        ("((((6))))", 6),
        ("5 * (5 - 1 / 5)", 24),
        ("999999 * 999999", 999998000001),
        ("2.", 2),
        ("- " * 99 + "1", -1),
    ],
)
def test_values_are_exact(expr, value):
    assert safe_eval(expr) == value
    assert isinstance(safe_eval(expr), Fraction)


def test_adversarial_inputs_are_rejected_fast(tmp_path):
    marker = tmp_path / "pwned"
    hostile = [
        f"__import__('os').system('touch {marker}')",
        "__import__('os').system('touch /tmp/pwned')",
        "9**9**9**9",
        "(" * 10000 + "1" + ")" * 10000,
        "(" * 33 + "1" + ")" * 33,  # short but nested deeper than 32
        "1/0",
        "(1 - 1) / (2 - 2)",
        "lambda: 1",
        "(1).real",
        "1 .real",
        "2 % 3",
        "7 // 2",
        "'a'",
        "1 < 2",
        "x + 1",
        "True + 1",
        "1e3",
        "1_000",
        "1j",
        "[1]",
        "1; 2",
        "",
        "   ",
        "1 +",
        "((1)",
        "01",
        "9*" * 60 + "9",  # explodes past the magnitude bound after a few products
        "1000000 * 1000000",  # exactly 1e12: out of range
        "1000000000000",
        "1/1000000/1000000",  # denominator out of range
        "1" * (MAX_EXPRESSION_CHARS + 1),
        "-" * 150 + "1",  # syntax tree deeper than the limit
        "1\x00",
    ]
    for expr in hostile:
        start = time.perf_counter()
        with pytest.raises(ValueError):
            safe_eval(expr)
        assert time.perf_counter() - start < 0.05, expr[:40]
    assert not marker.exists()


def test_non_string_is_rejected():
    with pytest.raises(ValueError):
        safe_eval(5)  # type: ignore[arg-type]


def test_decimals_can_be_disallowed():
    assert safe_eval("3 * 4", allow_decimals=False) == 12
    with pytest.raises(ValueError, match="decimal"):
        safe_eval("1.5 * 2", allow_decimals=False)


def test_numbers_used_in_reading_order():
    assert numbers_used("-3 + 4*3") == [3, 4, 3]
    assert numbers_used("(25 - 5) / 4") == [25, 5, 4]
    assert numbers_used("1/0") == [1, 0]  # validated, not evaluated
    with pytest.raises(ValueError):
        numbers_used("1.5 + 2")
    with pytest.raises(ValueError):
        numbers_used("2 ** 3")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_value_or_value_error(text):
    try:
        assert isinstance(safe_eval(text), Fraction)
    except ValueError:
        pass


_leaf = st.integers(0, 50).map(lambda n: (str(n), Fraction(n)))


def _node(children):
    def build(parts):
        (ta, va), op, (tb, vb) = parts
        if op == "/" and vb == 0:
            return (f"({ta} + {tb})", va + vb)
        value = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va / vb if vb else 0}[op]
        return (f"({ta} {op} {tb})", value)

    return st.tuples(children, st.sampled_from("+-*/"), children).map(build)


@settings(max_examples=150, deadline=None)
@given(st.recursive(_leaf, _node, max_leaves=6))
def test_random_expressions_match_fraction_arithmetic(tree):
    text, value = tree
    assert safe_eval(text) == value
