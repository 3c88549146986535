"""Math tasks: a seeded procedural generator and a loader for JSONL datasets.

Generated tasks come in four kinds (`arithmetic`, `fraction`, `linear`, `word`) and three
difficulty levels, plus level 0 for `arithmetic` only: one `+` or `-` of two operands in 1..99
("Compute 47 - 3."), the tier the tiny model can learn after a short warm-up (`configs/env/math.yaml`). Every number is drawn from the `numpy.random.Generator` passed in (the env's
`np_random`), so a seed fixes the task. The exact answer is computed with the safe calculator,
and `meta["expression"]` is an arithmetic expression whose value is the answer: the structure an
oracle agent can use.

Datasets are JSONL files with one `{"question": ..., "answer": ...}` object per line (optional
`"id"`); `load_dataset` validates every line and names the line of any problem.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

from rlgym_envs.math.calculator import evaluate
from rlgym_llm.core.env import Task
from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.records import FORMATS, read_records

KINDS: tuple[str, ...] = ("arithmetic", "fraction", "linear", "word")
DIFFICULTIES: tuple[int, ...] = (1, 2, 3)
EASY_LEVEL = 0
"""Single-step integer arithmetic (`a + b`, `a - b`, operands 1..EASY_MAX): defined for `arithmetic` only."""
EASY_MAX = 99
"""Level 0's largest operand. 1..99 gives 19,602 questions (about 11,800 / 3,900 / 3,900 in the train /
val / test pools): too many to memorise, so a policy that passes unseen questions has learned to copy
the operands and the calculator's result. With 1..5 (50 questions, until 2026-12-05) the warm-up's
clone answered held-out questions it had also seen in training."""
LEVELS: tuple[int, ...] = (EASY_LEVEL, *DIFFICULTIES)
SAMPLE_DATASET = "sample"  # `dataset="sample"` names the JSONL file shipped with the package

_NAMES = ("Ava", "Ben", "Chloe", "Diego", "Emma", "Farah", "Gus", "Hana", "Ivan", "Jade", "Kofi", "Lena")
_ITEMS = ("pencils", "apples", "stickers", "marbles", "notebooks", "cookies")


class DatasetError(DataFileError):
    """A dataset file is missing or has a malformed line; the message names the file and line."""


@dataclass(frozen=True)
class Problem:
    """A generated problem before it becomes a `Task`: the question and its answer expression."""

    question: str
    expression: str
    extra: tuple[tuple[str, Any], ...] = ()


def _int(rng: np.random.Generator, low: int, high: int, nonzero: bool = False) -> int:
    """A uniform integer in [low, high]; never 0 when `nonzero`."""
    while True:
        value = int(rng.integers(low, high + 1))
        if value or not nonzero:
            return value


def _pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _paren(n: int) -> str:
    return f"({n})" if n < 0 else str(n)


def _arithmetic(rng: np.random.Generator, level: int) -> Problem:
    if level == EASY_LEVEL:
        # A short question with no answer-format clause: every token of it matters to a tiny model.
        expr = f"{_int(rng, 1, EASY_MAX)} {_pick(rng, ('+', '-'))} {_int(rng, 1, EASY_MAX)}"
        return Problem(f"Compute {expr}.", expr)
    top = (20, 100, 100)[level - 1]
    ops = ("+", "-", "*") if level < 3 else ("+", "-", "*", "/")
    a, b, c, d = (_int(rng, 1, top) for _ in range(4))
    if level == 1:
        expr = f"{a} {_pick(rng, ops)} {b}"
    elif level == 2:
        expr = f"({a} {_pick(rng, ops)} {b}) {_pick(rng, ops)} {c}"
    else:
        expr = f"({a} {_pick(rng, ops)} {b}) {_pick(rng, ops)} ({c} {_pick(rng, ops)} {d})"
    return Problem(f"Compute {expr}. Give the exact value (a fraction in lowest terms if needed).", expr)


def _fraction(rng: np.random.Generator, level: int) -> Problem:
    den = (6, 12, 12)[level - 1]
    p, q = [_int(rng, 1, den) for _ in range(3)], [_int(rng, 2, den) for _ in range(3)]
    ops = [_pick(rng, ("+", "-") if level == 1 else ("+", "-", "*", "/")) for _ in range(2)]
    shown = {"+": "+", "-": "-", "*": "×", "/": "÷"}
    # The expression brackets every fraction: in `3/4 / 5/6` the division would bind left to right.
    expr = f"({p[0]}/{q[0]}) {ops[0]} ({p[1]}/{q[1]})"
    text = f"{p[0]}/{q[0]} {shown[ops[0]]} {p[1]}/{q[1]}"
    if level == 3:
        expr = f"({expr}) {ops[1]} ({p[2]}/{q[2]})"
        text = f"({text}) {shown[ops[1]]} {p[2]}/{q[2]}"
    return Problem(f"Compute {text}. Give the answer as a fraction in lowest terms.", expr)


def _side(coef: int, const: int) -> str:
    """Render `coef*x + const` the way a textbook would: 3x - 5, -x + 2, x."""
    x = {1: "x", -1: "-x"}.get(coef, f"{coef}x")
    if const == 0:
        return x
    return f"{x} {'+' if const > 0 else '-'} {abs(const)}"


def _linear(rng: np.random.Generator, level: int) -> Problem:
    # a*x + b = c*x + d with x = (d - b) / (a - c); c = 0 at level 1, x integral below level 3.
    a = _int(rng, -9, 9, nonzero=True) if level > 1 else _int(rng, 2, 9)
    c = 0 if level == 1 else _int(rng, -9, 9)
    while c == a:
        c = _int(rng, -9, 9)
    b = _int(rng, -20, 20, nonzero=True)
    if level < 3:
        x = _int(rng, -12, 12)
        d = (a - c) * x + b
    else:
        d = _int(rng, -30, 30)
    right = str(d) if c == 0 else _side(c, d)
    expr = f"({_paren(d)} - {_paren(b)}) / ({_paren(a)} - {_paren(c)})"
    extra = (("a", a), ("b", b), ("c", c), ("d", d))
    return Problem(f"Solve for x: {_side(a, b)} = {right}. Give the exact value of x.", expr, extra)


def _word(rng: np.random.Generator, level: int) -> Problem:
    name, item = _pick(rng, _NAMES), _pick(rng, _ITEMS)
    scale = (1, 3, 10)[level - 1]
    template = int(rng.integers(5))
    if template == 0:
        n, price = _int(rng, 2, 6 * scale), _int(rng, 1, 5 * scale)
        bill = next(b for b in (10, 20, 50, 100, 500, 1000, 5000) if b > n * price)
        return Problem(
            f"{name} buys {n} {item} at ${price} each and pays with a ${bill} bill. "
            f"How much change, in dollars, does {name} get?",
            f"{bill} - {n} * {price}",
        )
    if template == 1:
        friends, each = _int(rng, 2, 4 + 2 * scale), _int(rng, 2, 5 * scale)
        total = friends * each
        return Problem(
            f"{name} shares {total} {item} equally among {friends} friends. How many {item} does each friend get?",
            f"{total} / {friends}",
        )
    if template == 2:
        speed, halves = 10 * _int(rng, 3, 6 + 3 * scale), _int(rng, 2, 2 + 2 * scale)
        hours = str(max(1, halves // 2)) if level == 1 else f"{halves / 2:g}"  # 2.5 hours from level 2 on
        unit = "hour" if hours == "1" else "hours"
        return Problem(
            f"A train travels at {speed} km/h for {hours} {unit}. How many kilometres does it travel?",
            f"{speed} * {hours}",
        )
    if template == 3:
        a, d, b, e = _int(rng, 5, 10 * scale), _int(rng, 2, 7), _int(rng, 5, 10 * scale), _int(rng, 2, 7)
        return Problem(
            f"{name} reads {a} pages a day for {d} days, then {b} pages a day for {e} days. "
            f"How many pages does {name} read in total?",
            f"{a} * {d} + {b} * {e}",
        )
    q = _int(rng, 2, 2 + 2 * scale)
    p, n = _int(rng, 1, q - 1), q * _int(rng, 2, 4 * scale)
    return Problem(
        f"A club has {n} members, and {p}/{q} of them play chess. How many members do not play chess?",
        f"{n} - {n} * {p} / {q}",
    )


GENERATORS: dict[str, Callable[[np.random.Generator, int], Problem]] = {
    "arithmetic": _arithmetic,
    "fraction": _fraction,
    "linear": _linear,
    "word": _word,
}


def generate_task(rng: np.random.Generator, kinds: Sequence[str], difficulties: Sequence[int]) -> Task:
    """Draw one task of a random kind and difficulty (both from the given lists) with `rng`.

    A draw whose answer text would appear in its own question is redrawn, so the question never
    gives the answer away.
    """
    kind, level = _pick(rng, kinds), int(_pick(rng, difficulties))
    while True:
        problem = GENERATORS[kind](rng, level)
        answer = str(evaluate(problem.expression))
        if len(answer) < 3 or answer not in problem.question:
            break
    digest = hashlib.sha1(problem.question.encode()).hexdigest()[:10]
    meta = {"kind": kind, "difficulty": level, "source": "generated", "expression": problem.expression}
    return Task(
        id=f"math-{kind}-d{level}-{digest}",
        prompt=problem.question,
        answer=answer,
        meta={**meta, **dict(problem.extra)},
    )


# --- datasets ------------------------------------------------------------------------------------


class Record(pydantic.BaseModel):
    """One dataset line. Numeric answers are kept as their JSON text (`0.5` -> "0.5")."""

    model_config = pydantic.ConfigDict(extra="ignore", frozen=True)
    question: str = pydantic.Field(min_length=1)
    answer: str = pydantic.Field(min_length=1)
    id: str | None = None

    @pydantic.field_validator("answer", "id", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @pydantic.field_validator("question", "answer")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


def resolve_dataset(dataset: str | Path) -> Path:
    """The path of a dataset: `"sample"` is the packaged sample file, anything else a file path."""
    if str(dataset) == SAMPLE_DATASET:
        return Path(str(resources.files("rlgym_envs.math") / "data" / "sample.jsonl"))
    return Path(dataset).expanduser()


def load_dataset(dataset: str | Path, fields: Mapping[str, str] | None = None, split: str | None = None) -> list[Task]:
    """Read a data set into tasks (ids: the record's `id`, else `<file stem>-<row index>`).

    Args:
        dataset: a JSONL or Parquet file, a Hugging Face `datasets` folder (`save_to_disk`), or
            "sample" (`rlgym_llm.core.records.read_records`).
        fields: the env's field -> the data set's column, e.g. `{"question": "problem"}`.
        split: the split of a `DatasetDict` folder.

    Parsed data sets are cached by path, size and modification time: the rollout manager makes a fresh
    env per episode, and re-reading the file each time would cost more than the episode.

    Raises:
        DatasetError: the data set is missing or empty, or a row is not a valid record (the message
            names the file and the 1-based row number).
    """
    path = resolve_dataset(dataset)
    if not path.exists():
        raise DatasetError(f"dataset {str(path)!r} does not exist (pass {FORMATS}, or 'sample')")
    stat = path.stat()
    mapping = tuple(sorted((fields or {}).items()))
    return list(_load_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns, mapping, split))


@functools.lru_cache(maxsize=16)
def _load_cached(
    path_text: str, size: int, mtime_ns: int, fields: tuple[tuple[str, str], ...], split: str | None
) -> tuple[Task, ...]:
    """The tasks of one version of a data set (`size` and `mtime_ns` are part of the cache key only)."""
    path = Path(path_text)
    tasks: list[Task] = []
    for lineno, value in read_records(path, dict(fields), split, error=DatasetError):
        try:
            record = Record.model_validate(value)
        except pydantic.ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}" for err in e.errors())
            raise DatasetError(
                f'{path}:{lineno}: expected an object like {{"question": "...", "answer": "..."}}: {problems}'
            ) from None
        index = len(tasks)
        tasks.append(
            Task(
                id=record.id or f"{path.stem}-{index}",
                prompt=record.question,
                answer=record.answer,
                meta={"kind": "dataset", "source": path.name, "index": index, "line": lineno},
            )
        )
    if not tasks:
        raise DatasetError(f"dataset file {str(path)!r} has no records")
    return tuple(tasks)
