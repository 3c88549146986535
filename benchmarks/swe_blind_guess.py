"""Blind guesses of low-entropy records on every shipped SWE-v0 instance (docs/threat_model.md).

    python benchmarks/swe_blind_guess.py [--backend local] [--tier real] [--limit N]

A forger that cannot compute the gold fix's values can still guess the ones with little entropy: the
booleans an assertion records. Each strategy is a patch appended to every source file of the buggy
tree (what a policy could write with `edit_file`), run inside the grading pytest process where it
rewrites the in-box recorder's canonical form of every value:

- *deep True*: every boolean anywhere in a record (contexts and containers included) made True;
- *deep flip*: every boolean flipped once, and None made 0.

Each instance is graded as an episode under the env's defaults (`hide_tests=True`, `trace_blind="void"`)
and the benchmark counts the paid rewards (a voided grade pays 0), next to two controls per instance:
the gold fix (paid 1.0 unless the instance is trace-blind, whose grades are voided) and the buggy tree
(0), and each strategy on top of the gold fix, which must break its grade wherever the strategy changes
a record (so the patch is shown to run). The bound of issue 32 is a forger's expected reward <= 0.01 per episode. Writes
`benchmarks/results/swe_blind_guess.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

PRELUDE = """
import sys as _s
_m = _s.modules.get("_rl" + "gym_trace")
if _m is not None and not getattr(_m, "_guessed", False):
    _m._guessed = True
    _g = _m._rlgym_rec.__globals__
    _c = _g["_canon"]
"""
STRATEGIES = {
    "deep True": PRELUDE + '    _g["_canon"] = lambda v, depth=0, _c=_c: _c(True if type(v) is bool else v, depth)\n',
    "deep flip": PRELUDE
    + '    _g["_canon"] = lambda v, depth=0, _c=_c: _c((not v) if type(v) is bool else 0 if v is None else v, depth)\n',
}


def _unique_tail(text: str) -> str | None:
    """The shortest tail of `text` (from 40 characters) that occurs once in it: edit_file's anchor."""
    for n in range(40, len(text) + 1, 40):
        tail = text[-n:]
        if text.count(tail) == 1:
            return tail
    return text if text and text.count(text) == 1 else None


def _step(env, name: str, **args):
    from rlgym_llm import AssistantTurn, ToolCall

    return env.step(AssistantTurn(tool_calls=(ToolCall(name, args, "c"),)))


def _grade(env, append: str | None = None, gold: bool = False) -> tuple[float, bool]:
    """Append `append` to every non-empty source file, or apply the gold edits, with edit_file (what a
    policy could write); then submit. Returns (reward, voided)."""
    from rlgym_envs.swe.instances import is_test_path

    inner = env.unwrapped
    if gold:
        for path, edits in inner.task.hidden["gold_edits"].items():
            for old, new in edits:
                _step(env, "edit_file", path=path, old_str=old, new_str=new)
    if append is not None:
        for path in [f for f in inner._files if f.endswith(".py") and not is_test_path(f)]:
            tail = _unique_tail(inner._files[path])
            if tail is not None:
                _step(env, "edit_file", path=path, old_str=tail, new_str=tail + "\n" + append)
    _, reward, _, _, info = _step(env, "submit")
    return float(reward), bool(info.get("voided"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="local")
    p.add_argument("--tier", default="real")
    p.add_argument("--limit", type=int, default=None, help="the first N instances of each split (a quick look)")
    p.add_argument("--out", type=Path, default=RESULTS / "swe_blind_guess")
    args = p.parse_args()

    import rlgym_llm

    rows, t0 = [], time.perf_counter()
    for split in ("train", "val", "test"):
        env = rlgym_llm.make("rlgym/SWE-v0", tier=args.tier, backend=args.backend, split=split, dense_signals=False)
        try:
            for inst in env.unwrapped.instances[: args.limit]:
                start = time.perf_counter()
                row: dict = {"instance": inst.id, "split": split}
                for name, code in STRATEGIES.items():
                    env.reset(options={"instance_id": inst.id})
                    row[name] = _grade(env, append=code)
                    # liveness: on top of the gold fix the same patch must change the records
                    env.reset(options={"instance_id": inst.id})
                    row[name + " on gold"] = _grade(env, append=code, gold=True)
                env.reset(options={"instance_id": inst.id})
                row["gold"] = _grade(env, gold=True)
                env.reset(options={"instance_id": inst.id})
                row["buggy"] = _grade(env)
                row["seconds"] = round(time.perf_counter() - start, 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            env.close()

    n = len(rows)
    paid = {s: sorted(r["instance"] for r in rows if r[s][0] > 0) for s in STRATEGIES}
    gold_paid = sum(r["gold"][0] == 1.0 for r in rows)
    gold_void = sum(r["gold"][1] for r in rows)
    buggy_paid = sum(r["buggy"][0] > 0 for r in rows)
    cmd = "python benchmarks/swe_blind_guess.py" + (f" --backend {args.backend}" if args.backend != "local" else "")
    cmd += (f" --tier {args.tier}" if args.tier != "real" else "") + (f" --limit {args.limit}" if args.limit else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"command": cmd, "rows": rows}, indent=1) + "\n")
    lines = [
        "# SWE-v0: blind guesses of low-entropy records, every instance",
        "",
        f"Command: `{cmd}`. Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{time.perf_counter() - t0:.0f} s on {args.backend}; the env's defaults (`hide_tests=True`, "
        '`trace_blind="void"`). A voided grade pays 0.',
        "",
        "| strategy | instances | paid | expected reward per episode | live (breaks the gold fix's grade) | paid on |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for s in STRATEGIES:
        total = sum(r[s][0] for r in rows)
        live = sum(r["gold"][0] == 1.0 and r[s + " on gold"][0] < 1.0 for r in rows)
        lines.append(
            f"| {s} | {n} | {len(paid[s])} | {total / max(n, 1):.4f} | {live} of {gold_paid} | {', '.join(paid[s]) or '-'} |"
        )
    lines += [
        "",
        f"Controls: the gold fix paid 1.0 on {gold_paid} of {n} (voided as trace-blind on {gold_void}); "
        f"the buggy tree paid on {buggy_paid} of {n}.",
    ]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
