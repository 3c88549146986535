"""Bug injection by AST transformation, for the SWE-v0 task factory (the SWE-smith approach).

    for m in mutations(source):      # every single-site mutation, function by function
        buggy = m.apply(source)      # only the mutated expression's text changes
        m.function, m.kind           # e.g. "LRUCache.get", "comparison swap"

Operators: arithmetic and comparison swaps, `and`/`or`, off-by-one on integer literals, flipped
boolean literals, a removed `if` branch (early returns included), swapped call arguments and a
dropped `not`. Each `Mutation` touches one site of one function; the gold fix is its inverse.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from rlgym_envs import safe_ast

_BINOPS: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
_CMPOPS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutation:
    """One site changed in one function.

    Args:
        function: the function's qualified name in its module (e.g. "Cache.pop").
        kind: the operator ("comparison swap", "off-by-one", ...).
        line: the first line of the changed text (1-based).
        span: (start, end) byte offsets of the changed text in the UTF-8 source.
        text: the text that replaces the span.
        docstring: the function's docstring, if any (for the problem statement).
        lines: the function's first and last line (decorators included), nested functions with it.
    """

    function: str
    kind: str
    line: int
    span: tuple[int, int]
    text: str
    docstring: str | None
    lines: tuple[int, int] = (0, 0)

    def apply(self, source: str) -> str:
        data = source.encode("utf-8")
        return (data[: self.span[0]] + self.text.encode("utf-8") + data[self.span[1] :]).decode("utf-8")


def _offsets(source: str) -> list[int]:
    starts = [0]
    for line in source.encode("utf-8").splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _sites(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[str, ast.AST, str]]:
    """(kind, node, replacement text) for every mutable site in the function's own body."""
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
                yield "arithmetic swap", node, ast.unparse(ast.BinOp(node.left, _BINOPS[type(node.op)](), node.right))
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
                swapped = ast.Compare(node.left, [_CMPOPS[type(node.ops[0])]()], node.comparators)
                yield "comparison swap", node, ast.unparse(swapped)
            elif isinstance(node, ast.BoolOp):
                other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
                yield "boolean operator swap", node, ast.unparse(ast.BoolOp(other, node.values))
            elif isinstance(node, ast.Constant) and type(node.value) is int:
                yield "off-by-one", node, repr(node.value + 1)
            elif isinstance(node, ast.Constant) and type(node.value) is bool:
                yield "changed constant", node, repr(not node.value)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                yield "dropped negation", node, ast.unparse(node.operand)
            elif (
                isinstance(node, ast.Call)
                and len(node.args) >= 2
                and not any(isinstance(a, ast.Starred) for a in node.args[:2])
            ):
                a, b = node.args[0], node.args[1]
                if ast.unparse(a) != ast.unparse(b):
                    args = [b, a, *node.args[2:]]
                    yield "swapped arguments", node, ast.unparse(ast.Call(node.func, args, node.keywords))
            elif isinstance(node, ast.If) and not node.orelse:
                kind = (
                    "removed early return" if isinstance(node.body[-1], (ast.Return, ast.Raise)) else "removed branch"
                )
                yield kind, node, "pass"


def mutations(source: str) -> list[Mutation]:
    """Every single-site mutation of every function (methods and nested functions included) of a module."""
    tree = safe_ast.parse(source)
    starts = _offsets(source)
    found: list[Mutation] = []

    def visit(scope: list[ast.stmt], prefix: str) -> None:
        for node in scope:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{node.name}"
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                lines = (first, node.end_lineno or node.lineno)
                for kind, site, text in _sites(node):
                    lineno, col = site.lineno, site.col_offset  # type: ignore[attr-defined]
                    end_line, end_col = site.end_lineno, site.end_col_offset  # type: ignore[attr-defined]
                    span = (starts[lineno - 1] + col, starts[end_line - 1] + end_col)
                    found.append(Mutation(name, kind, lineno, span, text, ast.get_docstring(node), lines))

    visit(tree.body, "")
    return found
