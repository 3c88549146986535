"""The calculator tool: exact results, and hostile input refused quickly with a message."""

import time

import pytest
import sympy

from rlgym_envs.math.calculator import CalculatorError, calculate, evaluate


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", "7"),
        ("(3 + 4) * 2 / 7", "2"),
        ("12/36", "1/3 ≈ 0.333333333333"),
        ("0.1 + 0.2", "3/10 ≈ 0.3"),  # decimal literals are exact
        ("2^10", "1024"),
        ("2**-2", "1/4 ≈ 0.25"),
        ("-(-5) - -5", "10"),
        ("sqrt(8)", "2*sqrt(2) ≈ 2.82842712475"),
        ("8^(1/3)", "2"),
        ("abs(-3/4)", "3/4 ≈ 0.75"),
        ("1e3 / 8", "125"),
        ("6 × 7 ÷ 2", "21"),
    ],
)
def test_exact_results(expression, expected):
    assert calculate(expression) == expected


@pytest.mark.parametrize("literal", ["0", "7", "-12", "+5", "12.50", "-0.125", "123456789012345678901234567890"])
def test_plain_number_fast_path_agrees_with_the_ast_walk(literal):
    # `(x)` is not a plain number, so it takes the AST walk: both paths must give the same exact value.
    fast, walked = evaluate(literal), evaluate(f"({literal})")
    assert fast == walked and type(fast) is type(walked)


def test_leading_zeros_are_not_read_as_plain_numbers():
    with pytest.raises(CalculatorError):
        evaluate("007")


def test_evaluate_returns_exact_sympy_values():
    assert evaluate("1/3 + 1/6") == sympy.Rational(1, 2)
    assert evaluate("sqrt(2) * sqrt(2)") == 2


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9**9", "too large"),
        ("9^9^9^9", "too large"),
        ("2**100000", "too large"),
        ("10**1000 * 10**1000 * 10**1000 * 10**1000 * 10**1000", "too large"),
        ("1e999999", "exponents"),
        ("1" * 500, "too long"),
        ("(" * 150 + "1" + ")" * 150, "too long"),
        ("__import__('os').system('echo hi')", "allowed"),
        ("__import__('os')", "only the functions"),
        ("().__class__.__bases__", "not allowed"),
        ("x.real", "not allowed"),
        ("open('/etc/passwd')", "only the functions"),
        ("os", "unknown name"),
        ("lambda: 1", "not allowed"),
        ("[1, 2]", "not allowed"),
        ("'a' * 10", "not a number"),
        ("1 % 2", "not supported"),
        ("1 / 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("sqrt(-4)", "not a real number"),
        ("(-8) ** (1/3)", "not a real number"),
        ("2 ** sqrt(2)", "rational"),
        ("", "empty"),
        ("1 +", "not valid"),
    ],
)
def test_hostile_or_invalid_input_gives_an_error_message_fast(expression, message):
    start = time.perf_counter()
    result = calculate(expression)
    assert time.perf_counter() - start < 0.5
    assert result.startswith("Error:") and message in result, result


def test_evaluate_raises_the_calculator_error():
    with pytest.raises(CalculatorError):
        evaluate("__import__('os')")
