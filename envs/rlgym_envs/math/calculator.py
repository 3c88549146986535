"""A safe exact calculator: an AST walk over a tiny arithmetic language, evaluated with sympy.

    >>> evaluate("12/36 + 2^3")
    25/3
    >>> calculate("12/36")
    '1/3 ≈ 0.333333333333'

Model text is untrusted, so nothing here calls `eval`: the expression is parsed with `ast.parse`
and only numbers, `+ - * / ** ^`, unary signs, parentheses, `sqrt`, `abs` and `pi` are allowed.
Sizes are bounded before any work is done (input length, node count, exponent and result bit
sizes), so inputs like `9**9**9**9` fail in microseconds instead of hanging the env.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from fractions import Fraction

import sympy

from rlgym_envs import safe_ast
from rlgym_llm.core.errors import RlgymError

MAX_CHARS = 200  # longest expression accepted
MAX_NODES = 120  # most AST nodes in one expression
MAX_BITS = 4096  # largest numerator/denominator of any intermediate result (~1,233 digits)
MAX_ROOT_BITS = 1024  # largest radicand of a root: sympy factors it to pull out squares
MAX_ROOT_DEGREE = 12  # largest q in x**(p/q)
MAX_IRRATIONAL_EXPONENT = 64  # largest |n| in y**n when y is irrational (sqrt(2)**n, pi**n)
MAX_OPS = 60  # largest sympy expression size (count_ops) of an irrational intermediate result
DECIMAL_DIGITS = 12  # significant digits of the decimal approximation shown next to fractions

_FUNCTIONS = {"sqrt": sympy.sqrt, "abs": sympy.Abs}
_CONSTANTS = {"pi": sympy.pi}
_NUMBER_RE = re.compile(r"^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
# A signed integer or decimal with no leading zeros (which Python's parser rejects) and at most 60
# characters: read directly, skipping the AST walk. The common case when checking answers.
PLAIN_NUMBER_RE = re.compile(r"[-+]?(?:0|[1-9]\d*)(?:\.\d+)?")


class CalculatorError(RlgymError, ValueError):
    """The expression is invalid or too large; the message is meant for the model."""


class TooLargeError(CalculatorError):
    """The expression is valid arithmetic, but its value is too large to compute exactly."""


def _bits(value: sympy.Expr) -> int:
    """Bit size of a rational (max of numerator and denominator); 0 for irrational values."""
    if isinstance(value, sympy.Rational):
        return max(int(value.p).bit_length(), int(value.q).bit_length())
    return 0


def _check_size(value: sympy.Expr) -> sympy.Expr:
    if value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        raise CalculatorError("the result is undefined (division by zero?)")
    if isinstance(value, sympy.Rational):
        if _bits(value) > MAX_BITS:
            raise TooLargeError(f"the result is too large (more than {MAX_BITS} bits)")
    elif not value.is_real:
        raise CalculatorError("the result is not a real number")
    elif sympy.count_ops(value) > MAX_OPS:
        raise TooLargeError("the result is too complicated to compute exactly")
    return value


def _number(node: ast.Constant, source: str) -> sympy.Expr:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError(f"{value!r} is not a number")
    # Read the literal's own text so 0.1 stays exactly 1/10 instead of the nearest binary float.
    text = (ast.get_source_segment(source, node) or "").replace("_", "")
    if not _NUMBER_RE.match(text):
        raise CalculatorError(f"cannot read the number {text!r}")
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > 100:
        raise TooLargeError("scientific-notation exponents must be between -100 and 100")
    if len(mantissa) > 100:
        raise TooLargeError("numbers may have at most 100 digits")
    frac = Fraction(text)
    return sympy.Rational(frac.numerator, frac.denominator)


def _power(base: sympy.Expr, exp: sympy.Expr) -> sympy.Expr:
    if not isinstance(exp, sympy.Rational):
        raise CalculatorError("exponents must be rational numbers")
    if base == 0 and exp < 0:
        raise CalculatorError("division by zero (0 to a negative power)")
    if isinstance(base, sympy.Rational):
        if abs(exp.q) > MAX_ROOT_DEGREE or abs(exp.p) > MAX_BITS:
            raise TooLargeError("the exponent is too large")
        if exp.q != 1:
            if base < 0:
                raise CalculatorError("a fractional power of a negative number is not a real number")
            if _bits(base) > MAX_ROOT_BITS:
                raise TooLargeError("the number under the root is too large")
        # Bound the result's size before computing it: bits(b**(p/q)) ~ |p|/q * log2(max(|num|, den)).
        if base not in (0, 1, -1) and abs(exp.p) * math.log2(max(abs(int(base.p)), int(base.q))) / exp.q > MAX_BITS:
            raise TooLargeError(f"the result is too large (more than {MAX_BITS} bits)")
    elif abs(exp.p) > MAX_IRRATIONAL_EXPONENT or exp.q > MAX_ROOT_DEGREE:
        raise TooLargeError("the exponent is too large")
    return base**exp


def _walk(node: ast.AST, source: str) -> sympy.Expr:
    if isinstance(node, ast.Expression):
        return _walk(node.body, source)
    if isinstance(node, ast.Constant):
        return _number(node, source)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _walk(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _walk(node.left, source), _walk(node.right, source)
        if isinstance(node.op, ast.Add):
            return _check_size(left + right)
        if isinstance(node.op, ast.Sub):
            return _check_size(left - right)
        if isinstance(node.op, ast.Mult):
            return _check_size(left * right)
        if isinstance(node.op, ast.Div):
            if right == 0:
                raise CalculatorError("division by zero")
            return _check_size(left / right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        raise CalculatorError(f"the operator {type(node.op).__name__} is not supported; use + - * / ^ and parentheses")
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCTIONS or node.keywords or len(node.args) != 1:
            raise CalculatorError(f"only the functions {', '.join(sorted(_FUNCTIONS))} (one argument each) are allowed")
        arg = _walk(node.args[0], source)
        if name == "sqrt":
            if arg.is_negative:
                raise CalculatorError("the square root of a negative number is not a real number")
            return _check_size(_power(arg, sympy.Rational(1, 2)))
        return _check_size(_FUNCTIONS[name](arg))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id[:40]!r}; only numbers, sqrt, abs and pi are allowed")
    if isinstance(node, ast.Attribute):
        raise CalculatorError("attribute access is not allowed")
    raise CalculatorError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def evaluate(expression: str) -> sympy.Expr:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: e.g. `"(3 + 4) * 2 / 7"`, `"2^10"`, `"sqrt(8)"`. `^` means power.

    Returns:
        The exact value: a sympy `Rational`, or an exact irrational expression such as `2*sqrt(2)`.

    Raises:
        CalculatorError: the expression is malformed, uses anything outside the allowed language,
            or would produce a number too large to compute.
    """
    if not isinstance(expression, str):
        raise CalculatorError("the expression must be a string")
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/").replace("−", "-")
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) <= 60 and PLAIN_NUMBER_RE.fullmatch(text):
        if "." not in text:
            return sympy.Integer(int(text))
        frac = Fraction(text)
        return sympy.Rational(frac.numerator, frac.denominator)
    if len(text) > MAX_CHARS:
        raise CalculatorError(f"the expression is too long ({len(text)} characters; the limit is {MAX_CHARS})")
    try:
        with warnings.catch_warnings():  # "1abc" parses with a SyntaxWarning before it fails
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = safe_ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalculatorError("the expression is not valid arithmetic, e.g. (3 + 4) * 2 / 7") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError(f"the expression has too many parts (the limit is {MAX_NODES})")
    try:
        return _walk(tree, text)
    except RecursionError:
        raise CalculatorError("the expression is nested too deeply") from None


def format_value(value: sympy.Expr) -> str:
    """Exact result first, then a decimal approximation when it is not an integer: `1/3 ≈ 0.333333333333`."""
    if isinstance(value, sympy.Integer):
        return str(value)
    approx = sympy.N(value, DECIMAL_DIGITS)
    decimal = f"{float(approx):.{DECIMAL_DIGITS}g}" if abs(approx) < 1e300 else str(approx)
    return f"{value} ≈ {decimal}"


def calculate(expression: str) -> str:
    """Evaluate for a tool call: the formatted result, or a message starting with `Error:`."""
    try:
        return format_value(evaluate(expression))
    except CalculatorError as e:
        return f"Error: {e}."
