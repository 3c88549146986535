"""The math answer verifier: equivalent forms accepted, wrong and hedged answers rejected."""

import concurrent.futures
import time
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_envs.math.verify import check, extract_candidates, verify

EQUIVALENT = [
    ("12/36", "1/3"),
    ("0.5", "1/2"),
    (r"\frac{1}{2}", "1/2"),
    (r"\dfrac{3}{4}", "0.75"),
    (r"\tfrac{-3}{4}", "-0.75"),
    ("1,000", "1000"),
    ("-1,234,567", "-1234567"),
    ("x = 3", "3"),
    (r"\boxed{3}", "3"),
    (r"\boxed{\frac{12}{36}}", "1/3"),
    ("$3$", "3"),
    (r"\(7\)", "7"),
    ("-0.25", "-1/4"),
    ("3.", "3"),
    ("3.0", "3"),
    ("  42  ", "42"),
    ("50%", "1/2"),  # a percentage is p/100 (its only reading)
    (r"50\%", "0.5"),
    ("50 percent", "1/2"),
    ("1/2", "50%"),
    ("The answer is 12.", "12"),
    ("Final answer: 5/6", "10/12"),
    ("18 dollars", "18"),
    ("$18", "18"),
    (r"\$18.00", "18"),
    (r"\boxed{3} and \boxed{3}", "3"),  # a repeated answer is one answer
    ("2, 3", "3, 2"),  # a set of roots, in any order
    (r"3\sqrt{2}", "sqrt(18)"),
    (r"\sqrt{2}/2", r"\frac{1}{\sqrt{2}}"),
    ("2pi", r"2\pi"),
    ("2^{10}", "1024"),
    ("x^2+2x+1", "x^2 + 2x + 1"),  # symbolic: math-verify
    ("(x+1)^2", "x^2 + 2x + 1"),
    ("Paris.", r"\text{paris}"),  # text answers compare as normalised text
]

WRONG = [
    ("4", "3"),
    ("1/3", "1/4"),
    ("0.333", "1/3"),  # decimals are exact: a rounded decimal is not the fraction
    ("0.333333", "1/3"),
    (r"\boxed{2} or \boxed{3}", "2"),  # hedges never count, even when one is right
    (r"\boxed{2}, \boxed{3}", "3"),
    ("2, 3", "2"),
    ("2 or 3", "3"),
    ("2 and 3", "3"),
    ("x = 2 or x = 3", "2"),
    ("2", "2, 3"),  # half of a set
    ("", "3"),
    ("   ", "3"),
    ("garbage", "3"),
    ("blah", "x^2 + 1"),
    ("3x", "3"),
    ("x^2+2x", "x^2 + 2x + 1"),
    ("x+1 or x+2", "x+1"),
    ("-3", "3"),
    ("1,000", "100"),
    ("9**9**9**9", "3"),  # too large to be the answer, rejected without computing it
    (r"9^{9^{9^9}}", "3"),
    ("London", "Paris"),
    ("0.5", "5"),
    ("3/0", "3"),
    (r"50\%", "50"),  # p% is p/100, never also p: one answer must not pass for two values
    ("50%", "50"),
    ("50 percent", "50"),
    ("50", "50%"),
]


@pytest.mark.parametrize(("prediction", "reference"), EQUIVALENT)
def test_equivalent_answers_are_accepted(prediction, reference):
    verdict = check(prediction, reference)
    assert verdict.correct, verdict
    assert verdict.parsed


@pytest.mark.parametrize(("prediction", "reference"), WRONG)
def test_wrong_or_conflicting_answers_are_rejected(prediction, reference):
    assert not verify(prediction, reference)


def test_there_are_enough_cases():
    assert len(EQUIVALENT) >= 20 and len(WRONG) >= 20


def test_format_flag_separates_garbage_from_wrong_answers():
    assert check("4", "3").parsed
    assert not check("", "3").parsed
    assert not check("garbage", "3").parsed


def test_candidates_keep_thousands_and_brackets_whole():
    assert extract_candidates("1,000") == ("1000",)
    assert extract_candidates(r"\frac{1}{2}, (1, 2)") == (r"\frac{1}{2}", "(1, 2)")
    assert extract_candidates(r"so \boxed{\frac{a}{b}} is it") == (r"\frac{a}{b}",)


def test_empty_reference_is_a_usage_error():
    with pytest.raises(ValueError, match="reference"):
        verify("3", "")


def test_symbolic_path_works_off_the_main_thread():
    # math-verify's SIGALRM timeouts need a main thread; elsewhere a worker process runs it.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(verify, "(x+1)^2", "x^2 + 2x + 1").result(timeout=120)
        assert not pool.submit(verify, "x^2", "x^2 + 2x + 1").result(timeout=120)
        assert pool.submit(verify, "12/36", "1/3").result(timeout=10)


def test_huge_inputs_are_fast():
    start = time.perf_counter()
    for prediction in ("9" * 5000, "1" + "0" * 300 + "1", "(" * 300 + "1" + ")" * 300, "2^" * 100 + "2"):
        verify(prediction, "3")
    assert time.perf_counter() - start < 10


# --- properties ----------------------------------------------------------------------------------

fractions = st.builds(Fraction, st.integers(-(10**6), 10**6), st.integers(1, 10**4))


def renderings(x: Fraction) -> list[str]:
    p, q = x.numerator, x.denominator
    plain = str(p) if q == 1 else f"{p}/{q}"
    out = [plain, f"\\boxed{{{plain}}}", f"${plain}$", f"x = {plain}", f"{plain}.", f"  {plain} ", f"{2 * p}/{2 * q}"]
    sign = "-" if p < 0 else ""
    out += [f"{sign}\\frac{{{abs(p)}}}{{{q}}}", f"\\dfrac{{{p}}}{{{q}}}", f"({p})/({q})"]
    if q == 1:
        out.append(f"{p:,}")  # thousands separators
        out.append(f"{p}.0")
    twos_fives = q
    for f in (2, 5):
        while twos_fives % f == 0:
            twos_fives //= f
    if twos_fives == 1:  # a terminating decimal, written out exactly
        out.append(format(Decimal(p) / Decimal(q), "f"))
    return out


@settings(max_examples=150, deadline=None)
@given(fractions)
def test_every_rendering_of_a_value_verifies_against_every_other(x):
    forms = renderings(x)
    for pred in forms:
        assert verify(pred, forms[0]), (pred, forms[0])
        assert verify(forms[0], pred), (forms[0], pred)


@settings(max_examples=150, deadline=None)
@given(fractions, fractions)
def test_a_different_value_is_rejected(x, y):
    if x == y:
        return
    for pred in renderings(y):
        assert not verify(pred, str(x)), (pred, x)


@settings(max_examples=100, deadline=None)
@given(fractions, fractions)
def test_a_hedge_between_two_values_is_rejected(x, y):
    if x == y:
        return
    assert not verify(f"\\boxed{{{x}}} or \\boxed{{{y}}}", str(x))
    assert not verify(f"{x}, {y}", str(y))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_never_raises(text):
    verdict = check(text, "7/2")
    assert isinstance(verdict.correct, bool)
