"""Which shipped SWE-v0 instances are trace-blind, as the env finds them (docs/threat_model.md).

    python benchmarks/swe_trace_blind.py [--backend local] [--tier real] [--limit N]

For every instance of every split: the env's reference (two gold runs and one buggy run of the traced
tests, `SWEEnv._reference`) and its trace-blind FAIL_TO_PASS tests, those whose records the buggy
tree already matches or that the gold fix gives no stable trace for. With the default `trace_blind="void"` a paying grade on such an instance is
voided (forging pays nothing there, nor does solving). Writes `benchmarks/results/swe_trace_blind.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="local")
    p.add_argument("--tier", default="real")
    p.add_argument("--limit", type=int, default=None, help="the first N instances of each split (a quick look)")
    p.add_argument("--out", type=Path, default=RESULTS / "swe_trace_blind")
    args = p.parse_args()

    import rlgym_llm

    rows, t0 = [], time.perf_counter()
    for split in ("train", "val", "test"):
        env = rlgym_llm.make("rlgym/SWE-v0", tier=args.tier, backend=args.backend, split=split, dense_signals=False)
        inner = env.unwrapped
        try:
            for inst in inner.instances[: args.limit]:
                env.reset(options={"instance_id": inst.id})
                start = time.perf_counter()
                boxed, reference, blind = inner._reference()
                # a test none of whose runs (itself renamed, its decoys) has a stable gold trace
                unstable = [
                    t for t in blind if all(reference.get(r) is None for r, s in boxed.stands_for.items() if s == t)
                ]
                rows.append(
                    {
                        "instance": inst.id,
                        "split": split,
                        "fail_to_pass": len(inst.fail_to_pass),
                        "blind": list(blind),
                        "no_stable_gold_trace": unstable,
                        "seconds": round(time.perf_counter() - start, 1),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
        finally:
            env.close()
    blind = sorted(r["instance"] for r in rows if r["blind"])
    cmd = "python benchmarks/swe_trace_blind.py" + (f" --backend {args.backend}" if args.backend != "local" else "")
    cmd += (f" --tier {args.tier}" if args.tier != "real" else "") + (f" --limit {args.limit}" if args.limit else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"command": cmd, "rows": rows}, indent=1) + "\n")
    lines = [
        "# SWE-v0: trace-blind instances, as the env finds them",
        "",
        f"Command: `{cmd}`. Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{time.perf_counter() - t0:.0f} s on {args.backend}.",
        "",
        f"**{len(blind)} of {len(rows)} instances** have a FAIL_TO_PASS test whose traced records the buggy tree "
        'already matches, or that the gold fix gives no stable trace for; with the default `trace_blind="void"` their paying grades are voided (forged or solved).',
        "",
        "| instance | split | FAIL_TO_PASS tests | trace-blind | of which the gold fix gives no stable trace |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['instance']} | {r['split']} | {r['fail_to_pass']} | {len(r['blind'])} | {len(r['no_stable_gold_trace'])} |"
        for r in sorted(rows, key=lambda r: r["instance"])
        if r["blind"]
    ]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"{len(blind)} of {len(rows)} trace-blind: {blind}")


if __name__ == "__main__":
    main()
