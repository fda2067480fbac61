"""A safe evaluator for small arithmetic expressions written by a model (never ``eval``/``exec``).

Accepted: integer literals, decimal literals such as ``2.5`` (unless ``allow_decimals=False``),
binary ``+ - * /``, unary ``-``/``+`` and parentheses. Everything else is rejected with a
``ValueError``: names, calls, attributes, strings, comparisons, ``**``, ``%``, ``//``, exponent
notation (``1e3``), digit separators (``1_000``), ...

Cheap checks run BEFORE ``ast.parse``: a length limit, a character whitelist and a parenthesis
nesting limit, so hostile input (``"(" * 10000``) never reaches the parser. Arithmetic is exact
(:class:`fractions.Fraction`) and every literal and intermediate result is bounded in magnitude
and denominator, so ``9*9*9*...`` is rejected after a few multiplications.
"""

from __future__ import annotations

import ast
from fractions import Fraction

#: Longest expression (characters) accepted.
MAX_EXPRESSION_CHARS = 200
#: Deepest parenthesis nesting accepted.
MAX_PAREN_DEPTH = 32
#: Deepest syntax tree accepted (bounds recursion, e.g. for ``- - - - 1``).
MAX_AST_DEPTH = 100
#: Bound on |value| and on the denominator of every literal and intermediate result.
MAX_MAGNITUDE = 10**12
#: Characters an expression may contain (checked before parsing).
ALLOWED_CHARS = frozenset("0123456789.+-*/() \t\r\n")

_BINARY_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def _precheck(expr: object) -> str:
    """Length, charset and nesting checks that run before any parsing; returns the stripped text."""
    if not isinstance(expr, str):
        raise ValueError(f"expression must be a string, got {type(expr).__name__}")
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    text = expr.strip()
    if not text:
        raise ValueError("empty expression")
    bad = next((ch for ch in text if ch not in ALLOWED_CHARS), None)
    if bad is not None:
        raise ValueError(f"character {bad!r} is not allowed (use digits, + - * /, parentheses)")
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
            if depth > MAX_PAREN_DEPTH:
                raise ValueError(f"parentheses nested deeper than {MAX_PAREN_DEPTH}")
        elif ch == ")":
            depth -= 1
    return text


def parse_expression(expr: str) -> ast.Expression:
    """Parse ``expr`` into a syntax tree made only of whitelisted nodes, or raise ``ValueError``."""
    text = _precheck(expr)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise ValueError(f"not a well-formed expression: {err}") from None
    _check_tree(tree.body, 1)
    return tree


def _check_tree(node: ast.AST, depth: int) -> None:
    if depth > MAX_AST_DEPTH:
        raise ValueError(f"expression nested deeper than {MAX_AST_DEPTH}")
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):  # bool is an int subclass: excluded by the exact type test
            raise ValueError(f"literal {node.value!r} is not a number")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY_OPS:
            raise ValueError(f"operator {type(node.op).__name__} is not allowed (use + - * /)")
        _check_tree(node.left, depth + 1)
        _check_tree(node.right, depth + 1)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            raise ValueError(f"operator {type(node.op).__name__} is not allowed")
        _check_tree(node.operand, depth + 1)
    else:
        raise ValueError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _bounded(value: Fraction) -> Fraction:
    if abs(value) >= MAX_MAGNITUDE or value.denominator >= MAX_MAGNITUDE:
        raise ValueError(f"result out of range (|x| and denominator must stay below {MAX_MAGNITUDE})")
    return value


def _literal(node: ast.Constant, allow_decimals: bool) -> Fraction:
    value = node.value
    if type(value) is float:
        if not allow_decimals:
            raise ValueError(f"decimal literal {value!r} is not allowed (use integers)")
        # repr is the shortest round-trip text, so 0.1 becomes exactly 1/10.
        return _bounded(Fraction(repr(value)))
    return _bounded(Fraction(value))


def _evaluate(node: ast.AST, allow_decimals: bool) -> Fraction:
    if isinstance(node, ast.Constant):
        return _literal(node, allow_decimals)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, allow_decimals)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left = _evaluate(node.left, allow_decimals)
        right = _evaluate(node.right, allow_decimals)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return _bounded(_BINARY_OPS[type(node.op)](left, right))
    raise ValueError(f"{type(node).__name__} is not allowed")  # unreachable after _check_tree


def safe_eval(expr: str, allow_decimals: bool = True) -> Fraction:
    """The exact value of an arithmetic expression, or ``ValueError`` for anything unsafe or invalid.

    >>> safe_eval("(1 + 2) * 3 / 4")
    Fraction(9, 4)
    """
    return _evaluate(parse_expression(expr).body, allow_decimals)


def numbers_used(expr: str) -> list[int]:
    """The integer literals of ``expr`` in reading order (``"-3 + 4*3"`` -> ``[3, 4, 3]``).

    Raises ``ValueError`` for an invalid expression or a decimal literal. The expression is only
    validated, not evaluated (so ``"1/0"`` gives ``[1, 0]``).
    """
    tree = parse_expression(expr)
    numbers: list[int] = []
    for node in _in_order(tree.body):
        if type(node.value) is not int:
            raise ValueError(f"literal {node.value!r} is not an integer")
        numbers.append(int(node.value))
    return numbers


def _in_order(node: ast.AST) -> list[ast.Constant]:
    """Constants of a checked tree, left to right."""
    if isinstance(node, ast.Constant):
        return [node]
    if isinstance(node, ast.UnaryOp):
        return _in_order(node.operand)
    if isinstance(node, ast.BinOp):
        return _in_order(node.left) + _in_order(node.right)
    return []
