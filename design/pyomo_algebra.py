"""Translate a CasADi SX function into Pyomo algebra, so the Pyomo model evaluates the same expressions.

Every intermediate value used more than once becomes a named Pyomo Expression, which the NL writer emits as
a common subexpression (a "V" line): the expression graph stays a DAG instead of a tree of exponential size.
"""

from __future__ import annotations

from collections import Counter

import casadi as ca

_BINARY = {
    ca.OP_ADD: lambda a, b: a + b,
    ca.OP_SUB: lambda a, b: a - b,
    ca.OP_MUL: lambda a, b: a * b,
    ca.OP_DIV: lambda a, b: a / b,
}


def _unary(op: int, a):
    import pyomo.environ as pyo

    table = {
        ca.OP_NEG: lambda v: -v,
        ca.OP_SQ: lambda v: v * v,
        ca.OP_TWICE: lambda v: 2 * v,
        ca.OP_INV: lambda v: 1 / v,
        ca.OP_SIN: pyo.sin,
        ca.OP_COS: pyo.cos,
        ca.OP_SQRT: pyo.sqrt,
        ca.OP_EXP: pyo.exp,
        ca.OP_LOG: pyo.log,
    }
    fn = table.get(op)
    if fn is None:
        raise ValueError(f"CasADi operation {op} has no Pyomo translation")
    return fn(a)


def sx_to_pyomo(fn: ca.Function, inputs: list[list], named) -> list[list]:
    """Outputs of `fn` (dense SX) as Pyomo expressions of `inputs` (one list of Pyomo terms per input).

    `named(expr)` must return a named Pyomo Expression holding `expr` (it is called for shared values).
    """
    n = fn.n_instructions()
    ops = [fn.instruction_id(k) for k in range(n)]
    ins = [fn.instruction_input(k) for k in range(n)]
    outs = [fn.instruction_output(k) for k in range(n)]
    # pass 1: which instruction defines each value read, and how often it is read
    current: dict[int, int] = {}
    reads: list[list[int]] = [[] for _ in range(n)]
    uses: Counter = Counter()
    for k in range(n):
        if ops[k] not in (ca.OP_INPUT, ca.OP_CONST):
            reads[k] = [current[r] for r in ins[k]]
            uses.update(reads[k])
        if ops[k] != ca.OP_OUTPUT:
            current[outs[k][0]] = k
    # pass 2: build the expressions
    val: dict[int, object] = {}
    result = [[None] * fn.nnz_out(i) for i in range(fn.n_out())]
    for k in range(n):
        op = ops[k]
        if op == ca.OP_INPUT:
            val[k] = inputs[ins[k][0]][ins[k][1]]
            continue
        if op == ca.OP_CONST:
            val[k] = float(fn.instruction_constant(k))
            continue
        if op == ca.OP_OUTPUT:
            result[outs[k][0]][outs[k][1]] = val[reads[k][0]]
            continue
        args = [val[i] for i in reads[k]]
        e = _BINARY[op](*args) if op in _BINARY else _unary(op, args[0])
        val[k] = named(e) if uses[k] > 1 else e
    return result
