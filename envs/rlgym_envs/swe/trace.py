"""Outcome traces of `rlgym/SWE-v0`: graded tests that record values instead of asserting them.

    boxed = trace_test_files(inst.test_files, inst.tests)  # assertions become record calls
    trace = parse_records(run.records, ids)                # node id -> [(site, value hash), ...]
    ref = reference_trace(trace_a, trace_b)                # two gold runs; unstable records dropped
    passed = matches(ref, trace, test_id)                  # record for record, on the host

Why: code under test runs inside the grading pytest process, so everything that process reports
(status lines, exit status, a record stream) can be forged. A forger can write any record, but
the records only count when they equal the reference trace, which the host took from the gold fix in
a box that never ran the candidate's code. Expected values (the literal side of a comparison, the
polarity of `assert not x`, `assertTrue` vs `assertFalse`, the exception class of `pytest.raises`)
are removed from the box's copy of the tests, so the box holds nothing that says what to record:
forging a record means knowing the value the gold fix computes, i.e. solving.

Nothing here imports repository code; the in-box recorder is `box_pytest.RECORDER`.
"""

from __future__ import annotations

import ast
import contextlib
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rlgym_envs import safe_ast
from rlgym_envs.swe.grading import _base_names, _find_test, find_node

RECORDER_MODULE = "_rlgym_trace"
REC, RAISES, CALL_RAISES = "_rlgym_rec", "_rlgym_raises", "_rlgym_call_raises"
WILDCARD = "*"  # a reference record that differed between the two gold runs: any value matches

# unittest assertion methods -> how many leading arguments are values (the rest: msg, places, delta).
_UNITTEST = {
    **dict.fromkeys(
        (
            "assertEqual assertNotEqual assertIs assertIsNot assertIn assertNotIn assertListEqual "
            "assertDictEqual assertTupleEqual assertSequenceEqual assertSetEqual assertCountEqual "
            "assertMultiLineEqual assertGreater assertGreaterEqual assertLess assertLessEqual "
            "assertAlmostEqual assertNotAlmostEqual assertEquals assertItemsEqual assertDictContainsSubset"
        ).split(),
        2,
    ),
    **dict.fromkeys("assertTrue assertFalse assertIsNone assertIsNotNone assert_ failUnless failIf".split(), 1),
    # (obj, class) / (text, pattern): the class and the pattern are the expectation, left out.
    **dict.fromkeys("assertIsInstance assertNotIsInstance assertRegex assertNotRegex assertRegexpMatches".split(), -1),
}
_RAISES_METHODS = {"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "raises"}


def _kind(node: ast.expr, scope: _Scope) -> str:
    """ "const" (a value written into the test), "made" (built by calls whose arguments are all
    written into the test, such as `Interval(1, 2)` or `pytest.approx(0.5)`), or "actual"."""
    if isinstance(node, ast.Constant):
        return "const"
    if isinstance(node, ast.Name):
        return scope.bound.get(node.id, "actual")
    parts: list[ast.expr] = []
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not, ast.Invert)):
        parts = [node.operand]
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = list(node.elts)
    elif isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return "actual"
        parts = [*node.keys, *node.values]  # type: ignore[list-item]
    elif isinstance(node, ast.BinOp):
        parts = [node.left, node.right]
    elif isinstance(node, ast.Call):
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in scope.local:
            return "actual"
        kinds = {_kind(a, scope) for a in [*node.args, *(k.value for k in node.keywords)]}
        return "made" if kinds <= {"const", "made"} else "actual"
    else:
        return "actual"
    kinds = {_kind(p, scope) for p in parts}
    return "const" if kinds <= {"const"} else "made" if kinds <= {"const", "made"} else "actual"


class _Scope:
    """A function's local names, and those it binds once to an expectation (`expected = [1, 2]`)."""

    def __init__(self, func: ast.AST | None = None) -> None:
        self.local: set[str] = set()
        self.bound: dict[str, str] = {}
        if func is None:
            return
        args = getattr(func, "args", None)
        if isinstance(args, ast.arguments):
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None:
                    self.local.add(a.arg)
        counts: dict[str, int] = {}
        single: dict[str, ast.expr] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.local.add(node.id)
                counts[node.id] = counts.get(node.id, 0) + 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                single[node.targets[0].id] = node.value
        # Only names read nowhere but as a whole operand of an assertion: `calls = []` that a helper
        # appends to is state, not an expectation.
        operands = {id(o) for o in _assertion_operands(func)}
        reads: dict[str, bool] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads[node.id] = reads.get(node.id, True) and id(node) in operands
        for name, value in single.items():
            if counts.get(name) == 1 and reads.get(name, False):
                kind = _kind(value, self)
                if kind != "actual":
                    self.bound[name] = kind


def _is_read(node: ast.expr) -> bool:
    """A name or attribute chain: reading it again has no side effect (properties aside)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _context(value: ast.expr) -> list[ast.expr]:
    """What a value was read from: the object of `x.flag`, `x[k]`, `x.is_full()`, the names passed to
    `f(x)`. A boolean alone is one guessable bit; the object's state is not."""
    out: list[ast.expr] = []
    if isinstance(value, (ast.Attribute, ast.Subscript)) and _is_read(value.value):
        out.append(value.value)
    elif isinstance(value, ast.Call):
        if isinstance(value.func, ast.Attribute) and _is_read(value.func.value):
            out.append(value.func.value)
        out += [a for a in [*value.args, *(k.value for k in value.keywords)] if _is_read(a)]
    elif isinstance(value, ast.BoolOp):
        for v in value.values:
            out += _context(v) if not _is_read(v) else [v]
    elif isinstance(value, ast.UnaryOp):
        out += _context(value.operand)
    elif isinstance(value, ast.Compare):
        for v in [value.left, *value.comparators]:
            out += _context(v) if not _is_read(v) else [v]
    return [ast.Name(n.id, ast.Load()) if isinstance(n, ast.Name) else n for n in out]


def _assertion_operands(func: ast.AST) -> Iterable[ast.expr]:
    """The whole operands of the assertions in `func` (as `_Rewrite` reads them)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Assert):
            test = node.test
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            yield from [test.left, *test.comparators] if isinstance(test, ast.Compare) else [test]
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func_ = node.value.func
            if isinstance(func_, ast.Attribute) and func_.attr in _UNITTEST:
                yield from node.value.args[:2]


def _kept(operands: Sequence[ast.expr], scope: _Scope) -> list[ast.expr]:
    """The operands to record: the actual ones, never the constants. Where only built ones are
    left (`k(4) == Interval(5, 6)`), one of them: the box must not hold both sides of an equality,
    or a forger records the one it can compute for the other. That is the first, unless it is a
    bare constructor call (`Interval(5, 6) == k(4)`)."""
    kinds = [_kind(o, scope) for o in operands]
    if "actual" in kinds:
        return [o for o, k in zip(operands, kinds, strict=True) if k == "actual"]
    made = [o for o, k in zip(operands, kinds, strict=True) if k == "made"]
    if len(made) > 1:
        plain = [o for o in made if not _is_constructor(o)]
        return plain[:1] or made[:1]
    return made


def _is_constructor(node: ast.expr) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name[:1].isupper()


class _Rewrite(ast.NodeTransformer):
    """Assertions -> `_rlgym_rec(site, *values)`; raises-contexts -> `_rlgym_raises(site)`; docstrings out."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.n = 0
        self.scopes: list[_Scope] = [_Scope()]

    def site(self) -> ast.Constant:
        self.n += 1
        return ast.Constant(f"{self.prefix}{self.n}")

    def rec(self, node: ast.AST, values: Iterable[ast.expr], rel: Sequence[str] = ()) -> ast.Expr:
        values = list(values)
        context = [c for v in values for c in _context(v)]
        keywords = [ast.keyword("rel", ast.Constant(tuple(rel)))] if rel else []
        if context:  # read lazily, only for a low-entropy value (see `box_pytest.RECORDER`)
            no_args = ast.arguments([], [], None, [], [], None, [])
            keywords.append(ast.keyword("ctx", ast.Lambda(no_args, ast.Tuple(context, ast.Load()))))
        call = ast.Call(ast.Name(REC, ast.Load()), [self.site(), *values], keywords)
        return ast.copy_location(ast.Expr(call), node)

    def values(self, test: ast.expr) -> list[ast.expr]:
        """The values an assertion's outcome depends on, minus the expected (literal) ones."""
        scope = self.scopes[-1]
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.values(test.operand)  # the polarity stays on the host
        if isinstance(test, ast.Compare):
            return [self.visit(o) for o in _kept([test.left, *test.comparators], scope)]
        return [self.visit(o) for o in _kept([test], scope)]

    def _strip_docstring(self, node: ast.AST) -> None:
        body = getattr(node, "body", None)
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            body[0] = ast.copy_location(ast.Pass(), first)

    def visit_Module(self, node: ast.Module) -> ast.Module:
        self._strip_docstring(node)
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        self._strip_docstring(node)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self._strip_docstring(node)
        self.scopes.append(_Scope(node))
        self.generic_visit(node)
        self.scopes.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        test = node.test
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if isinstance(test, ast.Compare):
            operands = [test.left, *test.comparators]
            if all(_kind(o, self.scopes[-1]) != "const" for o in operands):
                # No value written into the test: the relation itself (a repository type's `<`,
                # `==`, `in`) is recorded with the operands; only the operator is in the box.
                rel = [type(op).__name__ for op in test.ops]
                return self.rec(node, [self.visit(o) for o in operands], rel)
        return self.rec(node, self.values(node.test))

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            name = call.func.attr
            n_values = _UNITTEST.get(name)
            if n_values is not None:
                args = call.args[: abs(n_values)] if n_values > 0 else call.args[:1]
                return self.rec(node, [self.visit(a) for a in _kept(args, self.scopes[-1])])
            if name in _RAISES_METHODS and len(call.args) >= 2:  # assertRaises(E, f, *args): the call form
                skip = 2 if name.startswith("assertRaisesRegex") else 1
                args = [self.site(), *call.args[skip:]]
                keywords = [k for k in call.keywords if k.arg not in ("match", "msg")]
                new = ast.Call(ast.Name(CALL_RAISES, ast.Load()), args, keywords)
                return ast.copy_location(ast.Expr(new), node)
        self.generic_visit(node)
        return node

    def visit_withitem(self, node: ast.withitem) -> ast.withitem:
        expr = node.context_expr
        if isinstance(expr, ast.Call):
            func = expr.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _RAISES_METHODS and len(expr.args) <= 2:
                message = bool(expr.args[1:]) or any(k.arg in ("match", "expected_regex") for k in expr.keywords)
                node.context_expr = ast.Call(
                    ast.Name(RAISES, ast.Load()), [self.site()], [ast.keyword("message", ast.Constant(message))]
                )
                return node
        self.generic_visit(node)
        return node


def rewrite_test_source(source: str, prefix: str = "") -> str:
    """`source` with its assertions turned into record calls (see the module docstring).

    Raises:
        SyntaxError: the file is not valid Python (the caller ships it unchanged: pytest reports it).
    """
    tree = _Rewrite(prefix).visit(safe_ast.parse(source))
    body = tree.body
    at = 0
    while at < len(body) and isinstance(body[at], ast.ImportFrom) and body[at].module == "__future__":
        at += 1
    names = [ast.alias(REC), ast.alias(RAISES), ast.alias(CALL_RAISES)]
    body.insert(at, ast.ImportFrom(RECORDER_MODULE, names, 0))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def trace_test_files(test_files: Mapping[str, str]) -> dict[str, str]:
    """The box's copy of the test files: every Python test file rewritten (sites named per file)."""
    out = {}
    for k, path in enumerate(sorted(test_files)):
        text = test_files[path]
        if path.endswith(".py"):
            with contextlib.suppress(SyntaxError, ValueError, RecursionError):
                text = rewrite_test_source(text, f"{k}.")
        out[path] = text
    return out


class _Mutate(ast.NodeTransformer):
    """Each number in a test body moved by its own random 0..2: other inputs, which the bug may
    not touch (`Interval(2, 2).contains(2)` may become `Interval(3, 2).contains(4)`)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        value = node.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moved = value + self.rng.randint(0, 2) * (1 if isinstance(value, int) else 0.5)
            return ast.copy_location(ast.Constant(moved), node)
        if isinstance(value, str) and len(value) <= 200:  # "1.0.0" -> "1.2.0": versions, dates, sizes
            moved = re.sub(r"\d+", lambda m: str(int(m.group()) + self.rng.randint(0, 2)), value)
            return ast.copy_location(ast.Constant(moved), node)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.JoinedStr:
        return node  # an f-string's parts are not values of their own


@dataclass(frozen=True)
class Boxed:
    """What the traced run gets: its test files, the node ids it runs, and what each stands for.

    Every FAIL_TO_PASS test is renamed at random and joined by `decoys` copies (random names too)
    whose numbers are moved (`_Mutate`): the same test on other inputs, graded against the gold
    fix's records on those inputs. A forger that turns the buggy values of the tests it cannot see
    into guesses (flip every boolean) must guess the decoys too, where the buggy code is often right.

    Args:
        files: the traced test files.
        ids: the node ids to run, shuffled.
        stands_for: run id -> the graded test id it counts for.
        decoys: the run ids that are decoys (the host's secret).
    """

    files: dict[str, str]
    ids: tuple[str, ...]
    stands_for: dict[str, str]
    decoys: frozenset[str] = frozenset()


def boxed_tests(
    test_files: Mapping[str, str],
    fail_to_pass: Sequence[str],
    tests: Sequence[str],
    rng: random.Random,
    decoys: int = 6,
) -> Boxed:
    """The traced run's tests (see `Boxed`); ids whose function is not found keep their name."""
    files = dict(test_files)
    stands_for = {t: t for t in tests}
    renamed: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for test_id in fail_to_pass:
        if "::" in test_id:
            renamed.setdefault((test_id.split("::")[0], _base_names(test_id)), [])
    for path, names in sorted({(p, n) for p, n in renamed}):
        try:
            tree = safe_ast.parse(files.get(path, ""))
        except SyntaxError:
            continue
        func = _find_test(tree, names)
        parent = tree if len(names) == 1 else _find_test_scope(tree, names[:-1])
        if func is None or parent is None:
            continue
        new_names = [f"test_{rng.getrandbits(48):012x}" for _ in range(decoys + 1)]
        copies = []
        for i, name in enumerate(new_names):
            copy = safe_ast.parse(ast.unparse(func)).body[0]
            assert isinstance(copy, (ast.FunctionDef, ast.AsyncFunctionDef))
            copy.name = name
            if i:
                copy.body = [_Mutate(rng).visit(stmt) for stmt in copy.body]
            copies.append(copy)
        rng.shuffle(copies)
        at = parent.body.index(func)
        parent.body[at : at + 1] = copies  # type: ignore[assignment]
        files[path] = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
        renamed[(path, names)] = new_names
    ids, decoy_ids = [], set()
    for test_id in tests:
        key = (test_id.split("::")[0], _base_names(test_id))
        if test_id in fail_to_pass and renamed.get(key):
            stem, _, params = test_id.rpartition("::")
            suffix = params[len(key[1][-1]) :]  # the parametrization, "[1-2]"
            for i, name in enumerate(renamed[key]):
                run_id = f"{stem}::{name}{suffix}"
                ids.append(run_id)
                stands_for[run_id] = test_id
                if i:
                    decoy_ids.add(run_id)
            stands_for.pop(test_id, None)
        else:
            ids.append(test_id)
    rng.shuffle(ids)
    return Boxed(trace_test_files(files), tuple(ids), stands_for, frozenset(decoy_ids))


def _find_test_scope(tree: ast.Module, names: Sequence[str]) -> ast.ClassDef | None:
    node = find_node(tree, names)
    return node if isinstance(node, ast.ClassDef) else None


def boxed_vector(
    boxed: Boxed, reference: Mapping[str, Sequence[tuple[str, str]] | None], trace: Trace, tests: Sequence[str]
) -> dict[str, bool | None]:
    """Graded id -> whether all its runs' records match the reference (None: no stable reference).

    A decoy the gold fix gives no stable trace for is left out; a real test without one is None.
    """
    out: dict[str, bool | None] = {}
    for test_id in tests:
        runs = [r for r, t in boxed.stands_for.items() if t == test_id]
        usable = [r for r in runs if reference.get(r) is not None]
        if not usable:
            out[test_id] = None
            continue
        out[test_id] = all(matches(reference, trace, r) for r in usable)
    return out


Trace = dict[str, list[tuple[str, str]]]


def parse_records(text: str, ids: Sequence[str]) -> Trace:
    """`T <node id>` lines open a test, `R <site> <hash>` lines add a record to it; other ids dropped."""
    wanted = set(ids)
    trace: Trace = {}
    current: list[tuple[str, str]] | None = None
    seen: set[str] = set()
    for line in text.split("\n"):
        kind, _, rest = line.partition(" ")
        if kind == "T":
            if rest in seen:  # a test runs once: a second block is someone else's writing
                trace[rest] = [("!", "duplicated")]
                current = None
                continue
            seen.add(rest)
            current = trace.setdefault(rest, []) if rest in wanted else None
        elif kind == "R" and current is not None:
            site, _, value = rest.partition(" ")
            current.append((site, value))
    return trace


def reference_trace(first: Trace, second: Trace) -> dict[str, list[tuple[str, str]] | None]:
    """Merges two gold runs: records that differ become wildcards; a test whose runs disagree in
    length or sites, or that did not pass, is None (unusable: it counts as failed for everyone)."""
    out: dict[str, list[tuple[str, str]] | None] = {}
    for test_id in set(first) | set(second):
        a, b = first.get(test_id), second.get(test_id)
        if a is None or b is None or len(a) != len(b) or any(x[0] != y[0] for x, y in zip(a, b, strict=True)):
            out[test_id] = None
            continue
        merged = [(s, v if v == w else WILDCARD) for (s, v), (_, w) in zip(a, b, strict=True)]
        outcomes = {s: v for s, v in merged if s.startswith("@")}
        complete = set(outcomes) == {"@setup", "@call", "@teardown"}  # not cut short by a time limit
        out[test_id] = merged if complete and all(v == "passed" for v in outcomes.values()) else None
    return out


def matches(reference: Mapping[str, Sequence[tuple[str, str]] | None], trace: Trace, test_id: str) -> bool:
    """Whether a candidate's records for `test_id` equal the reference, record for record."""
    ref, got = reference.get(test_id), trace.get(test_id)
    if ref is None or got is None or len(ref) != len(got):
        return False
    return all(s == t and v in (WILDCARD, w) for (s, v), (t, w) in zip(ref, got, strict=True))
