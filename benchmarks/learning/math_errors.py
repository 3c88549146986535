"""Where a Math-v0 policy goes wrong: its failed episodes sorted by the first mistake.

    rlgym eval env=math checkpoint=<model> tasks=32 samples=8 out_dir=<dir>   # writes <dir>/trajectories.jsonl
    python benchmarks/learning/math_errors.py <dir>/trajectories.jsonl [<other>/trajectories.jsonl ...]

The tier's oracle calls calculator(<the question's expression>), then submit_answer(<the result>).
Each episode is one of: success; `operator` (the calculator expression has the other operator);
`operand` (same operator, a wrong number copied); `answer` (the expression was right, the submitted
answer is not the calculator's result); `format` (a tool call did not parse, or no answer was
submitted); `recheck` (no answer: the calculator called again instead of submitting until the turns
ran out, whatever it copied; counted as `format` before 2026-11-28); `guess` (an answer submitted
without the calculator; `other` before 2026-11-28); `other`. Per file, also the most frequent
expressions per question (the policy's modes).
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path


def classify(episode: dict) -> tuple[str, str | None]:
    """(kind, the first calculator expression) of one trajectory record."""
    question = episode["opening"][-1]["content"].removeprefix("Compute ").removesuffix(".")
    calls = [c for t in episode["turns"] for c in (t["action"].get("tool_calls") or [])]
    exprs = [c["arguments"].get("expression") for c in calls if c["name"] == "calculator"]
    answers = [c["arguments"].get("answer") for c in calls if c["name"] == "submit_answer"]
    results = [o["content"] for t in episode["turns"] for o in t["observation"] if o.get("name") == "calculator"]
    expr = exprs[0] if exprs else None
    if episode["outcome"].get("reward") == 1:
        return "success", expr
    if any(t["action"].get("parse_errors") for t in episode["turns"]):
        return "format", expr
    if not answers:  # the turns ran out: re-checking (the recheck teacher's noise), or nothing usable
        return ("recheck" if len(exprs) >= 2 else "format"), expr
    if expr is None:
        return "guess", expr
    if expr != question:
        q_op = "-" if " - " in question else "+"
        return ("operator" if f" {q_op} " not in f" {expr} " else "operand"), expr
    if results and answers[0] != results[0]:
        return "answer", expr
    return "other", expr


def summarize(path: Path) -> dict:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    kinds: collections.Counter[str] = collections.Counter()
    modes: dict[str, collections.Counter[str | None]] = collections.defaultdict(collections.Counter)
    for r in rows:
        kind, expr = classify(r)
        kinds[kind] += 1
        modes[r["opening"][-1]["content"]][expr] += 1
    return {"episodes": len(rows), "kinds": dict(kinds), "modes": modes}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--questions", type=int, default=6, help="questions whose modes are printed")
    args = p.parse_args()
    order = ("success", "operator", "operand", "answer", "format", "recheck", "guess", "other")
    print("| file | episodes | " + " | ".join(order) + " |")
    print("|---|---:|" + "---:|" * len(order))
    summaries = [(f, summarize(f)) for f in args.files]
    for f, s in summaries:
        shares = " | ".join(f"{s['kinds'].get(k, 0) / s['episodes']:.3f}" for k in order)
        print(f"| {f} | {s['episodes']} | {shares} |")
    for f, s in summaries:
        print(f"\n{f}: the 3 most frequent calculator expressions per question")
        for question, counter in list(s["modes"].items())[: args.questions]:
            print(f"  {question}  " + ", ".join(f"{e!r} x{n}" for e, n in counter.most_common(3)))


if __name__ == "__main__":
    main()
