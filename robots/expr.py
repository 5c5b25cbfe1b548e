"""Arithmetic expressions from data files (base-parameter formulas, CAD polynomials), evaluated safely.

Only + − · / and numeric powers over named symbols, numbers and whitelisted functions (e.g. sin, cos): no
Python evaluation. The same expression evaluates on floats, CasADi SX and other types with those operators.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from formats.errors import DataError

_BIN = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def evaluate(expr: str, env: dict, where: str, functions: dict[str, Callable] | None = None):
    """The value of `expr` with names from `env` and calls to `functions`; DataError naming `where` otherwise."""
    functions = functions or {}
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise DataError(f"{where}: cannot parse {expr!r}") from None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](ev(node.left), ev(node.right))
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Pow)
            and isinstance(node.right, ast.Constant)
        ):
            return ev(node.left) ** node.right.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
        ):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise DataError(f"{where}: unknown symbol {node.id!r} in {expr!r}")
            return env[node.id]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in functions
            and len(node.args) == 1
            and not node.keywords
        ):
            return functions[node.func.id](ev(node.args[0]))
        raise DataError(f"{where}: unsupported expression {ast.unparse(node)!r} in {expr!r}")

    return ev(tree)
