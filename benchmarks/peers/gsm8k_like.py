"""Synthetic GSM8K-like rows, built locally (no hub): three-number word problems with integer answers.

Each row: `question`, `answer` (integer text) and `cot`, a ~450-character chain of thought that
works the problem out and stops before the final answer, so each system can append the answer in
the format it grades (`#### N`, `\\boxed{N}`, a `submit_answer` tool call).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

_NAMES = ("Ava", "Ben", "Chloe", "Diego", "Emma", "Farah", "Gus", "Hana", "Ivan", "Jade", "Kofi", "Lena")
_ITEMS = ("apples", "pencils", "stickers", "marbles", "cookies", "books")
_FILLER = (
    " Let me double-check each step: the multiplication and the addition both use whole numbers, "
    "so no rounding is involved, and the units stay the same throughout."
)


def row(rng: random.Random) -> dict[str, str]:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b, c = rng.randint(5, 60), rng.randint(2, 9), rng.randint(3, 24)
    kind = rng.randrange(3)
    if kind == 0:
        answer = a + b * c
        question = (
            f"{name} has {a} {item}. {name} buys {b} packs with {c} {item} in each pack. "
            f"How many {item} does {name} have now?"
        )
        cot = (
            f"{name} starts with {a} {item}. Each pack holds {c} {item} and {name} buys {b} packs, "
            f"so the packs add {b} * {c} = {b * c} {item}. Together with the {a} {item} from the start, "
            f"{name} has {a} + {b * c} = {answer} {item}."
        )
    elif kind == 1:
        total = a + b * c + rng.randint(1, 30)
        answer = total - b * c
        question = (
            f"{name} had {total} {item} and gave {c} {item} to each of {b} friends. "
            f"How many {item} does {name} have left?"
        )
        cot = (
            f"{name} gives {c} {item} to each of {b} friends, which is {b} * {c} = {b * c} {item} in all. "
            f"{name} started with {total} {item}, so {total} - {b * c} = {answer} {item} are left."
        )
    else:
        answer = (a + c) * b
        question = f"A box holds {a} red {item} and {c} blue {item}. How many {item} are there in {b} such boxes?"
        cot = (
            f"One box holds {a} red and {c} blue {item}, so one box has {a} + {c} = {a + c} {item}. "
            f"There are {b} boxes, so the total is {b} * {a + c} = {answer} {item}."
        )
    cot = "Let's think step by step. " + cot
    while len(cot) < 430:
        cot += _FILLER
    return {"question": question, "answer": str(answer), "cot": cot[:470].rsplit(". ", 1)[0] + "."}


def write(path: Path, n: int = 256, seed: int = 0) -> Path:
    """Write `n` rows as JSONL (`{"question", "answer", "cot"}` per line) and return the path."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(json.dumps(row(rng)) + "\n")
    return path
