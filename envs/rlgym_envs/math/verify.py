"""Answer verification: is a predicted answer the same value as the reference?

    >>> verify(r"\\boxed{\\frac{12}{36}}", "1/3")
    True
    >>> verify("2 or 3", "2")   # conflicting answers never count
    False

The common path is cheap and exact: extract the candidate answers (`\\boxed{}` contents, or the
text after "the answer is", minus `$...$`, `x =`, units and a trailing period), read each with the
safe calculator (LaTeX fractions and roots rewritten first), and compare the *sets* of values with
exact rational arithmetic. Decimals are exact too: `0.5` equals `1/2`, but `0.333` is not `1/3`.
A percentage has one reading: `p%` (or `p percent`) is the number `p/100`, so `50%` equals `1/2` and
not `50`. Reading it as either would let one answer pass for two different values (a hedge).

Only when a side is not plain arithmetic (symbols, intervals, unusual LaTeX) do we call
`math-verify`, then a restricted sympy comparison. Both rely on `signal.alarm` timeouts, which work
only in the main thread; elsewhere the slow path runs in a one-process pool whose worker enforces
them. Text references ("Paris", "yes") are compared as normalised strings.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import logging
import multiprocessing
import re
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sympy

from rlgym_envs.math.calculator import PLAIN_NUMBER_RE, CalculatorError, TooLargeError, evaluate

logger = logging.getLogger(__name__)

MAX_PREDICTION_CHARS = 4000  # longer predictions are cut to their last 4,000 characters
MAX_NESTING = 20  # deeper brackets are not an answer (and make parsers recurse for seconds)
SLOW_TIMEOUT_S = 3  # per math-verify / sympy call, enforced by SIGALRM in a main thread
POOL_TIMEOUT_S = 60.0  # outer guard on the worker process (its first start imports sympy)

_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FRAC_RE = re.compile(r"\\[dt]?frac\s*")
_ANSWER_IS_RE = re.compile(r"(?:final\s+answer|answer)\s*(?:is|:|=)\s*", re.IGNORECASE)
_THOUSANDS_RE = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+)(?![\d,])")
_SEPARATOR_RE = re.compile(r"\s+(?:or|and)\s+|;|\n", re.IGNORECASE)
_LHS_RE = re.compile(r"^\s*[A-Za-z]\w*\s*(?:=|:=)\s*")
_UNITS_RE = re.compile(r"^(.*?\d\.?)\s+(?:[A-Za-z]{2,}\.?\s*)+$")
_PERCENT_WORD_RE = re.compile(r"\s*(?:percent|per\s+cent)\s*$", re.IGNORECASE)
_PERCENT_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*\\?%")
_SMALL_EXPONENT_RE = re.compile(r"^\s*\(?\s*-?\s*(?:\d{1,3}|[A-Za-z])\s*\)?(?!\s*(?:\d|\*\*|\())")
_TOWER_RE = re.compile(r"(?:\^|\*\*)\s*[({]?[^\s{}()^*]*(?:\^|\*\*)")  # 2^2^2, x^{x^{2}}, 9**9**9
_LONG_NUMBER_RE = re.compile(r"^[-+]?\d{100,}(?:\.\d*)?$")
_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_MATH_WORDS = frozenset(
    ("sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "min", "max", "gcd", "lcm", "abs", "mod", "inf")
)
_IMPLICIT_MUL_RE = re.compile(r"(?<=[\d)])\s*(?=pi\b|sqrt\(|\()")
_LATEX_SUBS = (
    (r"\left", ""),
    (r"\right", ""),
    (r"\cdot", "*"),
    (r"\times", "*"),
    (r"\div", "/"),
    (r"\pi", " pi "),
    (r"\!", ""),
    (r"\,", ""),
    (r"\;", ""),
    ("{", "("),
    ("}", ")"),
)


@dataclass(frozen=True)
class Verdict:
    """The details behind a verification.

    Args:
        correct: the prediction is the reference's value (and nothing else).
        parsed: an answer could be extracted from the prediction and read as a value (or as text,
            when the reference is text). This is the env's `format` reward component.
        method: which path decided: `exact` (rational arithmetic), `text`, `symbolic` (math-verify,
            then sympy) or `none` (nothing could be read).
        candidates: the answer strings extracted from the prediction.
        reason: a short explanation for logs and tests, never shown to the model.
    """

    correct: bool
    parsed: bool
    method: str
    candidates: tuple[str, ...] = ()
    reason: str = ""


def verify(prediction: str, reference: str) -> bool:
    """Whether `prediction` states exactly the value(s) of `reference`. See `check` for details."""
    return check(prediction, reference).correct


def check(prediction: Any, reference: Any) -> Verdict:
    """Compare a predicted answer with a reference answer.

    Args:
        prediction: model output: a bare answer, `\\boxed{...}`, `$...$`, `x = 3`, `1,000`, ...
        reference: the reference answer (numbers are converted to text).

    Returns:
        A `Verdict`; `correct` requires every extracted candidate to agree with the reference, so a
        hedge such as `\\boxed{2} or \\boxed{3}` is wrong even when one of them is right.
    """
    pred_text = "" if prediction is None else str(prediction).strip()
    ref_text = "" if reference is None else str(reference).strip()
    if not ref_text:
        raise ValueError("the reference answer is empty")
    candidates = extract_candidates(pred_text[-MAX_PREDICTION_CHARS:])
    if not candidates:
        return Verdict(False, False, "none", (), "no answer found in the prediction")
    refs, ref_vals = _reference(ref_text)
    pred_vals = _values(candidates)
    if pred_vals is _TOO_LARGE and ref_vals is not _TOO_LARGE:
        return Verdict(False, True, "exact", candidates, "a predicted number is too large to be the reference")
    if isinstance(pred_vals, list) and isinstance(ref_vals, tuple):
        ok = _same_sets(pred_vals, ref_vals)
        return Verdict(ok, True, "exact", candidates, "values match" if ok else "values differ")
    if ref_vals is None and not _looks_mathematical(" ".join(refs)):
        ok = {_norm_text(c) for c in candidates} == {_norm_text(r) for r in refs}
        return Verdict(ok, True, "text", candidates, "text matches" if ok else "text differs")

    # Slow path: symbolic answers. Each candidate must match on its own, so hedges still fail.
    # First refuse what could stall sympy: towers of powers (unless the reference has one too)
    # and deep nesting.
    if any(_TOWER_RE.search(c) for c in candidates) and not _TOWER_RE.search(ref_text):
        return Verdict(False, True, "exact", candidates, "a tower of powers is too large to be the reference")
    if any(_depth(c) > MAX_NESTING for c in candidates):
        return Verdict(False, False, "none", candidates, "the answer is nested too deeply to read")
    pairs = [(refs[0], c) for c in candidates] if len(refs) == 1 else [(ref_text, ", ".join(candidates))]
    pairs = [(_percent_as_fraction(r), _percent_as_fraction(c)) for r, c in pairs]  # math-verify reads p% as p
    results = [_slow_equal_guarded(r, c) for r, c in pairs]
    parsed = all(r is not None for r in results)
    ok = all(r is True for r in results)
    return Verdict(ok, parsed, "symbolic" if parsed else "none", candidates, "symbolic match" if ok else "no match")


# --- extraction -----------------------------------------------------------------------------------


def _balanced(text: str, start: int) -> tuple[str, int] | None:
    """The contents of the brace group opening at `text[start] == "{"`, and the index after it."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def _boxed(text: str) -> list[str]:
    out = []
    for m in _BOXED_RE.finditer(text):
        group = _balanced(text, m.end() - 1)
        if group is not None:
            out.append(group[0])
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets, so `(1, 2)` and `\\frac{1}{2}` stay whole."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _clean(text: str) -> str:
    text = text.strip()
    for left, right in (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]")):
        if text.startswith(left) and text.endswith(right) and len(text) >= len(left) + len(right):
            text = text[len(left) : len(text) - len(right)].strip()
    text = text.replace("\\$", "").replace("$", "")
    text = _TEXT_CMD_RE.sub(r"\1", text)
    text = _LHS_RE.sub("", text)
    return text.strip().rstrip(".").strip()


def extract_candidates(text: str) -> tuple[str, ...]:
    """The answer strings stated in `text`, in order, de-duplicated.

    `\\boxed{}` contents win when present; otherwise the text after the last "answer is", or the
    whole text. Answers separated by "or", "and", ";" or commas (not thousands separators) are
    separate candidates.
    """
    if PLAIN_NUMBER_RE.fullmatch(text):  # the common bare answer ("42", "-3.5"): nothing to extract
        return (text,)
    boxed = _boxed(text)
    if boxed:
        pieces = boxed
    else:
        last = list(_ANSWER_IS_RE.finditer(text))[-1:]
        pieces = [text[last[0].end() :] if last else text]
    out: list[str] = []
    for piece in pieces:
        piece = _THOUSANDS_RE.sub(lambda g: g.group(1).replace(",", ""), _clean(piece).replace("\\%", "%"))
        for part in _SEPARATOR_RE.split(piece):
            for sub in _split_top_level(part):
                cand = _clean(sub)
                if cand and cand not in out:
                    out.append(cand)
    return tuple(out)


# --- exact values ---------------------------------------------------------------------------------


def _latex_to_arithmetic(text: str) -> str:
    """Rewrite `\\frac{a}{b}` and `\\sqrt{a}` and friends into the calculator's language."""
    for _ in range(20):  # nested fractions: one level per pass
        m = _FRAC_RE.search(text)
        if not m:
            break
        num = _balanced(text, m.end()) if text[m.end() : m.end() + 1] == "{" else None
        den = _balanced(text, num[1]) if num and text[num[1] : num[1] + 1] == "{" else None
        if num is None or den is None:
            break
        text = f"{text[: m.start()]}(({num[0]})/({den[0]})){text[den[1] :]}"
    text = re.sub(r"\\sqrt\s*\{", "sqrt{", text)
    for old, new in _LATEX_SUBS:
        text = text.replace(old, new)
    return text


_Value = tuple[sympy.Expr, bool]
_TOO_LARGE = "too large"  # a candidate that is arithmetic, but too large to evaluate


def _value(candidate: str) -> _Value | str | None:
    """The exact value of one candidate and whether it carried a `%`; None if it is not arithmetic."""
    text = _PERCENT_WORD_RE.sub("%", candidate.strip())
    percent = text.endswith("%")
    text = text.rstrip("%").strip()
    units = _UNITS_RE.match(text)
    if units and not re.search(r"sqrt|pi|frac", text):
        text = units.group(1)  # "18 dollars", "12 km" -> the number
    if "\\" in text or "{" in text:
        text = _latex_to_arithmetic(text)
    text = _IMPLICIT_MUL_RE.sub("*", text)  # 2pi, 3sqrt(2), 2(3 + 1): implicit products of numbers
    if _LONG_NUMBER_RE.match(text):
        return _TOO_LARGE  # over 100 digits: the calculator refuses it, and so do we, quickly
    try:
        return evaluate(text), percent
    except TooLargeError:
        return _TOO_LARGE
    except CalculatorError:
        return None


@functools.lru_cache(maxsize=4096)
def _reference(ref_text: str) -> tuple[tuple[str, ...], tuple[_Value, ...] | str | None]:
    """The reference's candidates and values, cached: a GRPO group checks many answers against one."""
    refs = extract_candidates(ref_text) or (ref_text,)
    vals = _values(refs)
    return refs, tuple(vals) if isinstance(vals, list) else vals


def _values(candidates: tuple[str, ...]) -> list[_Value] | str | None:
    """The values of all candidates; `_TOO_LARGE` if one is too large, else None if one is not arithmetic."""
    vals = [_value(c) for c in candidates]
    if _TOO_LARGE in vals:
        return _TOO_LARGE
    return None if None in vals else vals  # type: ignore[return-value]


def _number(value: _Value) -> sympy.Expr:
    """The one reading of a value: `p%` is `p/100` (never also `p`, which would accept a hedge)."""
    number, percent = value
    return number / 100 if percent else number


def _percent_as_fraction(text: str) -> str:
    """`p%` written as `(p/100)`, for the slow path's parsers (math-verify reads `50%` as 50)."""
    return _PERCENT_RE.sub(r"(\1/100)", text)


def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    if isinstance(a, sympy.Rational) and isinstance(b, sympy.Rational):
        return a == b
    # Algebraic values of bounded size (the calculator caps them): 50 digits settle equality.
    return bool(abs(sympy.N(a - b, 50)) < sympy.Float("1e-40"))


def _matches(a: _Value, b: _Value) -> bool:
    return _equal(_number(a), _number(b))


def _same_sets(pred: list[_Value], ref: Sequence[_Value]) -> bool:
    """Every predicted value is a reference value and vice versa (repeats of one value are fine)."""
    if len(pred) == 1 and len(ref) == 1:  # the common case, and `_matches` is symmetric
        return _matches(pred[0], ref[0])
    distinct: list[_Value] = []
    for v in pred:
        if not any(_matches(v, d) for d in distinct):
            distinct.append(v)
    if len(distinct) > len(ref):
        return False
    return all(any(_matches(p, r) for r in ref) for p in distinct) and all(
        any(_matches(p, r) for p in distinct) for r in ref
    )


# --- text and symbolic answers --------------------------------------------------------------------


def _looks_mathematical(text: str) -> bool:
    return bool(re.search(r"[\d\\^=+*/()]", text))


def _is_prose(text: str) -> bool:
    """Whether `text` has a word (3+ letters) that is not a LaTeX command or a math function name."""
    words = re.findall(r"(?<![\\A-Za-z])[A-Za-z]{3,}", text)
    return any(w.lower() not in _MATH_WORDS for w in words)


def _depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def _norm_text(text: str) -> str:
    return re.sub(r"[\s.!'\"]+", " ", text.casefold()).strip()


def _math_verify_equal(reference: str, prediction: str) -> bool | None:
    """math-verify's judgement, or None when it extracts nothing. Needs a main thread (SIGALRM)."""
    from math_verify import parse
    from math_verify import verify as mv_verify

    def read(text: str) -> list[Any]:
        # Bare answers read best as LaTeX math (`$3x$` is 3*x; free-text extraction of `3x` finds
        # just the number 3), but prose read as math turns words into products of letters.
        if _is_prose(text):
            return parse(text, parsing_timeout=SLOW_TIMEOUT_S)
        return parse(f"${text}$", parsing_timeout=SLOW_TIMEOUT_S) or parse(text, parsing_timeout=SLOW_TIMEOUT_S)

    gold, pred = read(reference), read(prediction)
    if not gold or not pred:
        return None
    return bool(mv_verify(gold, pred, timeout_seconds=SLOW_TIMEOUT_S))


class _Timeout(Exception):
    pass


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def _raise(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _sympy_equal(reference: str, prediction: str) -> bool | None:
    """Parse both sides with sympy (no builtins, no attribute access) and test `simplify(a - b) == 0`."""
    from sympy.parsing.sympy_parser import (
        convert_xor,
        parse_expr,
        standard_transformations,
    )

    transformations = (*standard_transformations, convert_xor)
    safe_globals = {"__builtins__": {}, **{k: getattr(sympy, k) for k in ("Integer", "Rational", "Float", "Symbol")}}
    safe_locals = {"sqrt": sympy.sqrt, "pi": sympy.pi, "abs": sympy.Abs}

    def parse(text: str) -> sympy.Expr | None:
        text = _latex_to_arithmetic(_clean(text)).replace("^", "**")
        if len(text) > 200 or re.search(r"__|\.\s*[A-Za-z_]|lambda|[\[\]'\";]", text):
            return None
        # A big-integer power runs in C, where no alarm can stop it: allow small exponents only.
        if any(not _SMALL_EXPONENT_RE.match(text[m.end() :]) for m in re.finditer(r"\*\*", text)):
            return None
        return parse_expr(text, local_dict=safe_locals, global_dict=safe_globals, transformations=transformations)

    try:
        with _alarm(SLOW_TIMEOUT_S):
            a, b = parse(reference), parse(prediction)
            # A prediction that brings in symbols the reference lacks is not an answer to the question.
            if not isinstance(a, sympy.Expr) or not isinstance(b, sympy.Expr) or not b.free_symbols <= a.free_symbols:
                return None
            return bool(sympy.simplify(a - b) == 0)
    except Exception as e:  # _Timeout, or any of the many errors sympy raises on odd input: not comparable
        logger.debug("sympy fallback could not compare %r and %r: %s", reference, prediction, e)
        return None


def _slow_equal(reference: str, prediction: str) -> bool | None:
    try:
        result = _math_verify_equal(reference, prediction)
    except Exception as e:  # math-verify is a third-party parser; fall back rather than crash
        logger.debug("math-verify failed on %r vs %r: %s", reference, prediction, e)
        result = None
    return result if result is not None else _sympy_equal(reference, prediction)


_pool: concurrent.futures.ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


@atexit.register
def _shutdown_pool() -> None:
    # Shut the worker down before interpreter teardown, which otherwise trips over the pool's
    # half-destroyed modules and prints a spurious traceback.
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)


def _in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """Run `fn` in the main thread of a worker process, where SIGALRM timeouts work."""
    global _pool
    with _pool_lock:
        if _pool is None:
            # spawn, not fork: forking a process that runs threads can deadlock the child.
            _pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        pool = _pool
    try:
        return pool.submit(fn, *args).result(timeout=POOL_TIMEOUT_S)
    except (concurrent.futures.TimeoutError, concurrent.futures.process.BrokenProcessPool) as e:
        logger.warning("answer verification worker failed (%s); starting a new one", type(e).__name__)
        with _pool_lock:
            if _pool is pool:
                _pool = None
        pool.shutdown(wait=False, cancel_futures=True)
        return None


def _slow_equal_guarded(reference: str, prediction: str) -> bool | None:
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM"):
        return _slow_equal(reference, prediction)
    return _in_worker(_slow_equal, reference, prediction)
