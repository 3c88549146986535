"""Credit-assignment diagnostic suite: which credit method beats GRPO on which property, in minutes.

    python benchmarks/credit/suite.py                 # = make bench-credit: 20 seeds, every task, knob and method (~25 min on 2 cores)
    python benchmarks/credit/suite.py --smoke --out /tmp/credit   # the CI smoke: 2 seeds, 1 knob, 10 steps (~1 min)
    python benchmarks/credit/suite.py --report        # only the report, from the stored runs

bsuite's recipe (Osband et al.) for turn-level credit: small multi-turn tasks (`tasks.py`), each isolating
one property some method claims to exploit, swept over a difficulty knob; a cheap linear softmax policy
trained by the library's own `rlgym_llm.credit.compute_advantages` and `rlgym_llm.train.losses.policy_loss`
(`agent.py`); every registered credit method against GRPO on every task and knob value, the same seeds
(= the same task stream and evaluation draws) for every method.

Measures, per run: test-split success at the end (contents never trained on, temperature 1, 64 episodes,
the same draws for every method of a seed), and sample efficiency: the first step at which test success
(measured every 5 steps) reaches halfway from chance to 1 (censored at steps + 5 when never reached).

Statistics: the seed is the unit. A verdict compares a method with GRPO on one property by the paired
difference over seeds of the knob-averaged measure (`rlgym_llm.eval.paired_seed_comparison`). Every
verdict in the report belongs to one family (methods x properties x 2 measures); Bonferroni: each
verdict's paired t interval is at confidence 1 - 0.05 / m, so the chance of any false "helps" or
"hurts" in the whole file is at most 5 %. Per-knob intervals in the tables are uncorrected (marked).

Outputs: benchmarks/results/credit_diagnostics.{md,json,png} (or --out); per-(task, knob, seed) run
files under runs/credit/<budget>/ make the sweep resumable.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ROOT = HERE.parents[1]

from agent import VERSION as AGENT_VERSION  # noqa: E402
from agent import Budget, Runner  # noqa: E402
from tasks import TASKS, make_task  # noqa: E402
from tasks import VERSION as TASKS_VERSION  # noqa: E402

from rlgym_llm.credit import METHODS  # noqa: E402
from rlgym_llm.eval import paired_seed_comparison  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
RUNS = ROOT / "runs" / "credit"
FULL_SEEDS = 20
FAMILY_ALPHA = 0.05
MIN_SEEDS = 5  # fewer paired seeds give intervals but no verdict (the smoke runs 2)

# The seed papers' claims on their LLM testbeds (benchmarks/results/learning/learning.md): the suite property
# each testbed stands for, the comparison, and the direction the claim predicts (+1: method above baseline).
LLM_CLAIMS = (
    ("twentyq", "igpo", "grpo", "info", +1),
    ("ladder", "gigpo", "grpo", "recurring", +1),
    ("ladder", "spa", "grpo", "progress", +1),
    ("bugfix", "gated", "dra", "subgoals", +1),
    ("bugfix", "dra", "grpo", "subgoals", -1),  # G-RA's premise: ungated shaping does worse than the outcome
)


def budget_for(smoke: bool) -> Budget:
    return Budget(steps=10, eval_every=5, eval_episodes=32, explore_tasks=4) if smoke else Budget()


def budget_key(budget: Budget, methods: list[str]) -> str:
    """The folder of stored runs: the budget and the versions of the tasks and the agent (bump
    `tasks.VERSION` / `agent.VERSION` with any change to what a run does; stored runs of other versions
    are then not reused)."""
    blob = json.dumps(asdict(budget), sort_keys=True) + f"tasks{TASKS_VERSION}agent{AGENT_VERSION}"
    if sorted(methods) != sorted(METHODS):  # a subset of the methods: runs of its own
        blob += ",".join(sorted(methods))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def threshold(chance: float) -> float:
    """The success level of the efficiency measure: halfway from chance to 1."""
    return chance + (1.0 - chance) / 2


def steps_to(curve_steps: list[int], curve: list[float], level: float, censor: int) -> int:
    for s, v in zip(curve_steps, curve):
        if v >= level:
            return s
    return censor


def run_cell(args: tuple[str, int, int, dict[str, Any], list[str], str]) -> dict[str, Any]:
    """Every method on one (task, knob, seed); stored as one file so an interrupted sweep resumes."""
    task_name, knob, seed, budget_d, methods, out = args
    import torch

    torch.set_num_threads(1)
    path = Path(out)
    if path.exists():
        return json.loads(path.read_text())
    budget = Budget(**budget_d)
    task = make_task(task_name, knob)
    t0 = time.process_time()
    runs = {}
    for m in methods:
        r = Runner(task, m, seed, budget).run()
        runs[m] = {
            "test": r.test_success,
            "eval_steps": r.eval_steps,
            "train": r.train_success,
            "skipped": r.skipped_updates,
        }
    cell = {
        "task": task_name,
        "knob": knob,
        "seed": seed,
        "chance": task.blind_success(),
        "runs": runs,
        "cpu_s": time.process_time() - t0,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cell))
    tmp.replace(path)
    return cell


def sweep(
    tasks: list[str], seeds: list[int], jobs: int, budget: Budget, smoke: bool, runs_dir: Path, methods: list[str]
) -> list[dict]:
    folder = runs_dir / budget_key(budget, methods)
    cells = []
    for seed in seeds:  # seed-major: an interrupted sweep has whole seeds for every task
        for name in tasks:
            knobs = TASKS[name].knobs[1:2] if smoke else TASKS[name].knobs
            for knob in knobs:
                cells.append((name, knob, seed, asdict(budget), methods, str(folder / f"{name}_{knob}_s{seed}.json")))
    todo = [c for c in cells if not Path(c[5]).exists()]
    print(
        f"{len(cells)} cells ({len(methods)} methods each), {len(todo)} to run, {jobs} jobs; runs in {folder}",
        flush=True,
    )
    t0 = time.time()
    if jobs <= 1:
        done = [run_cell(c) for c in cells]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(run_cell, cells, chunksize=1))
    print(f"sweep: {time.time() - t0:.0f} s", flush=True)
    return done


def summarise(cells: list[dict], budget: Budget) -> dict[str, Any]:
    """Per (task, knob, method, seed): final test success and steps to the threshold."""
    censor = budget.steps + budget.eval_every
    out: dict[str, Any] = {}
    for c in cells:
        level = threshold(c["chance"])
        for m, r in c["runs"].items():
            key = f"{c['task']}|{c['knob']}|{m}"
            row = out.setdefault(key, {"task": c["task"], "knob": c["knob"], "method": m, "seeds": {}})
            row["chance"] = c["chance"]
            row["seeds"][str(c["seed"])] = {
                "start": r["test"][0],
                "final": r["test"][-1],
                "steps_to": steps_to(r["eval_steps"], r["test"], level, censor),
                "reached": any(v >= level for v in r["test"]),
                "skipped": r["skipped"],
                "test_curve": r["test"],
                "train_curve": r["train"],
                "train_last": float(np.mean(r["train"][len(r["train"]) // 2 :])) if r["train"] else None,
            }
    return out


def _per_seed(rows: dict[str, Any], task: str, knobs: list[int], method: str, measure: str) -> dict[str, float]:
    """seed -> the measure averaged over the knob values (seeds with every knob only)."""
    per: dict[str, list[float]] = {}
    for k in knobs:
        for s, v in rows[f"{task}|{k}|{method}"]["seeds"].items():
            per.setdefault(s, []).append(float(v[measure]))
    return {s: float(np.mean(v)) for s, v in per.items() if len(v) == len(knobs)}


def same_runs(rows: dict[str, Any], task: str, knobs: list[int], method: str, seeds: list[str]) -> bool:
    """The method's runs are GRPO's, curve for curve, on every knob and seed (a method that reduces to
    GRPO on this task: no verdict)."""
    for k in knobs:
        a, b = rows[f"{task}|{k}|{method}"]["seeds"], rows[f"{task}|{k}|grpo"]["seeds"]
        if any(a[s]["test_curve"] != b[s]["test_curve"] or a[s]["train_curve"] != b[s]["train_curve"] for s in seeds):
            return False
    return True


def verdict_word(c: Any, better_if_higher: bool) -> str:
    """helps / hurts when both the paired t and the bootstrap interval exclude 0 (the library's rule:
    the percentile bootstrap alone undercovers at few seeds)."""
    if c.t_low > 0 and c.low > 0:
        return "helps" if better_if_higher else "hurts"
    if c.t_high < 0 and c.high < 0:
        return "hurts" if better_if_higher else "helps"
    return "no difference"


def methods_of(rows: dict[str, Any]) -> list[str]:
    """The methods the runs hold, in registry order."""
    present = {r["method"] for r in rows.values()}
    return [m for m in METHODS if m in present]


def verdicts(rows: dict[str, Any], tasks: list[str], knobs: dict[str, list[int]]) -> tuple[list[dict], int]:
    methods = [m for m in methods_of(rows) if m != "grpo"]
    m_family = len(methods) * len(tasks) * 2
    conf = 1.0 - FAMILY_ALPHA / m_family
    out = []
    for task in tasks:
        for method in methods:
            entry: dict[str, Any] = {"task": task, "method": method}
            for measure, higher in (("final", True), ("steps_to", False)):
                a = _per_seed(rows, task, knobs[task], method, measure)
                b = _per_seed(rows, task, knobs[task], "grpo", measure)
                seeds = sorted(set(a) & set(b), key=int)
                x, y = [a[s] for s in seeds], [b[s] for s in seeds]
                if len(seeds) < MIN_SEEDS:
                    entry[measure] = {"n": len(seeds), "verdict": f"{len(seeds)} seeds: too few for a verdict"}
                    continue
                c = paired_seed_comparison(x, y, confidence=conf)
                if same_runs(rows, task, knobs[task], method, seeds):
                    word = "same runs as GRPO"
                elif np.allclose(x, y, atol=1e-12):
                    word = "no difference (equal on every seed)"
                else:
                    word = verdict_word(c, higher)
                entry[measure] = {
                    "n": c.n,
                    "mean": c.diff,
                    "t_low": c.t_low,
                    "t_high": c.t_high,
                    "boot_low": c.low,
                    "boot_high": c.high,
                    "mdd": c.mdd,
                    "method_mean": float(np.mean(x)),
                    "grpo_mean": float(np.mean(y)),
                    "verdict": word,
                }
            out.append(entry)
    return out, m_family


def _fmt_ci(e: dict, digits: int = 3) -> str:
    f = f"{{:+.{digits}f}}"
    return f"{f.format(e['mean'])} [{f.format(e['t_low'])}, {f.format(e['t_high'])}]"


def claim_word(c: Any, direction: int) -> str:
    """reproduced / reversed when both intervals lie on one side of 0, else not reproduced."""
    if c.t_low > 0 and c.low > 0:
        return "reproduced" if direction > 0 else "reversed"
    if c.t_high < 0 and c.high < 0:
        return "reproduced" if direction < 0 else "reversed"
    return "not reproduced"


def llm_comparison(rows: dict[str, Any], knobs: dict[str, list[int]], m_family: int) -> tuple[list[str], list[dict]]:
    """Each seed paper's claim: its verdict on the LLM testbed next to the suite's on the same property
    (the same comparison, knob-averaged final test success, the family's corrected intervals)."""
    path = RESULTS / "learning" / "learning.json"
    envs = json.loads(path.read_text()).get("envs", {}) if path.exists() else {}
    conf = 1.0 - FAMILY_ALPHA / m_family
    lines = [
        "| claim | LLM testbed: verdict (held-out, 8 seeds) | suite property | suite: diff [corrected t CI] | suite verdict | agree? |",
        "|---|---|---|---|---|---|",
    ]
    out = []
    for env, method, base, prop, direction in LLM_CLAIMS:
        claims = envs.get(env, {}).get("claims") or []
        claim = next((c for c in claims if c.get("method") == method and c.get("baseline") == base), None)
        llm = claim.get("verdict", "-") if claim else "not measured"
        if prop not in knobs:
            continue
        a = _per_seed(rows, prop, knobs[prop], method, "final")
        b = _per_seed(rows, prop, knobs[prop], base, "final")
        seeds = sorted(set(a) & set(b), key=int)
        if len(seeds) < MIN_SEEDS:
            suite_txt, word = f"{len(seeds)} seeds", "too few seeds"
        else:
            c = paired_seed_comparison([a[s] for s in seeds], [b[s] for s in seeds], confidence=conf)
            suite_txt = f"{c.diff:+.3f} [{c.t_low:+.3f}, {c.t_high:+.3f}]"
            word = claim_word(c, direction)
        agree = "-" if not claim or word == "too few seeds" else ("yes" if word == llm else "no")
        sign = ">" if direction > 0 else "<"
        lines.append(f"| {method} {sign} {base} ({env}) | {llm} | {prop} | {suite_txt} | {word} | {agree} |")
        out.append({"env": env, "method": method, "baseline": base, "property": prop, "llm": llm, "suite": word})
    return lines, out


def which_method_table(verdicts_: list[dict]) -> str:
    """docs/credit.md's "Which method when" table, from the verdicts (a test keeps the two equal): per
    property, the methods that help, hurt, show no difference, or reduce to GRPO there (final test success;
    steps to threshold in brackets where it differs)."""
    rows = [
        "| property (task) | helps vs GRPO | hurts vs GRPO | no difference | same runs as GRPO |",
        "|---|---|---|---|---|",
    ]
    for task in TASKS:
        mine = [v for v in verdicts_ if v["task"] == task]
        if not mine:
            continue
        groups: dict[str, list[str]] = {"helps": [], "hurts": [], "no": [], "same": []}
        for v in mine:
            word = v["final"]["verdict"]
            steps = v["steps_to"].get("verdict", "")
            tag = f"`{v['method']}`"
            if steps in ("helps", "hurts") and steps != word:
                tag += f" (steps: {steps})"
            if word == "helps":
                groups["helps"].append(tag)
            elif word == "hurts":
                groups["hurts"].append(tag)
            elif word == "same runs as GRPO":
                groups["same"].append(tag)
            else:
                groups["no"].append(tag)
        cells = [", ".join(groups[k]) or "-" for k in ("helps", "hurts", "no", "same")]
        rows.append(f"| {task}: {TASKS[task].isolates} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plot(rows: dict[str, Any], tasks: list[str], knobs: dict[str, list[int]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 4
    nrows = (len(tasks) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3.2 * nrows), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        ks = knobs[task]
        for m in methods_of(rows):
            ys = [np.mean([v["final"] for v in rows[f"{task}|{k}|{m}"]["seeds"].values()]) for k in ks]
            style = dict(lw=2.5, color="black") if m == "grpo" else dict(lw=1.2)
            ax.plot(ks, ys, marker="o", label=m, **style)
        chance = [rows[f"{task}|{k}|grpo"]["chance"] for k in ks]
        ax.plot(ks, chance, ls=":", color="grey", label="chance")
        ax.set_title(task)
        ax.set_xlabel(TASKS[task].knob_name)
        ax.set_ylabel("test success")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(ks)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def report(out_dir: Path, name: str, budget: Budget, command: str, sweep_s: float | None, cells: list[dict]) -> Path:
    tasks = [t for t in TASKS if any(c["task"] == t for c in cells)]
    knobs = {t: sorted({c["knob"] for c in cells if c["task"] == t}) for t in tasks}
    rows = summarise(cells, budget)
    vs, m_family = verdicts(rows, tasks, knobs)
    claims_lines, claims = llm_comparison(rows, knobs, m_family)
    seeds = sorted({c["seed"] for c in cells})
    cpu = sum(c.get("cpu_s", 0.0) for c in cells)
    data = {
        "command": command,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "budget": asdict(budget),
        "seeds": seeds,
        "family_size": m_family,
        "sweep_wall_s": sweep_s,
        "cpu_s": cpu,
        "verdicts": vs,
        "llm_claims": claims,
        "rows": rows,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=1))
    png = out_dir / f"{name}.png"
    plot(rows, tasks, knobs, png)
    conf = 1 - FAMILY_ALPHA / m_family
    b = budget
    lines = [
        "# Credit-assignment diagnostics: when does each method beat GRPO?",
        "",
        f"Command: `{command}`; generated {data['generated']}; {len(seeds)} seeds; "
        + (f"sweep {sweep_s:.0f} s wall, " if sweep_s is not None else "")
        + f"{cpu:.0f} CPU s in the runs (~{cpu / 120:.0f} min on the 2 cores with --jobs 2; the sweep is resumable,"
        " so its wall time is that of the last invocation); 2 CPU cores shared with other jobs.",
        "",
        f"Budget per run (every method alike): {b.steps} steps of {b.tasks_per_step} train-split contents x "
        f"{b.group_size} episodes, AdamW lr {b.lr}, one optimizer step per batch, the trainer's clipped loss "
        "(clip 0.2 / 0.28, token-mean; Dr. GRPO's own aggregation), zero-advantage groups dropped (counted as "
        f"skipped updates). Test success: {b.eval_episodes} test-split episodes (contents never trained on) at "
        f"temperature 1, every {b.eval_every} steps. Start: the uniform policy (weights 0) for every method. "
        f"Methods run with their registry defaults (SPA: its estimator fitted once on {b.explore_tasks} x "
        f"{b.group_size} exploration episodes of the start, then frozen). Tasks, knobs and the policy: "
        "[benchmarks/credit/tasks.py](../credit/tasks.py), [agent.py](../credit/agent.py); docs/credit.md "
        '("Which method when") reads this file.',
        "",
        f"Verdicts: the paired difference over seeds (method - GRPO) of the knob-averaged measure. The family is "
        f"every verdict below ({m_family}: methods x properties x 2 measures); Bonferroni: each paired t interval "
        f"(shown) and bootstrap interval is at {100 * conf:.3f} % (family-wise error <= 5 %). helps / hurts: both "
        "exclude 0; "
        "no difference: they do not (the MDD says what the seeds could have detected), or the measure is "
        "equal on every seed; same runs as GRPO: the method reduces to GRPO on the task (equal curves on every "
        "seed and knob), no verdict. Steps to threshold: the first step whose test success reaches halfway from "
        f"chance to 1 (never: {b.steps + b.eval_every}); fewer is better.",
        "",
        "## Verdicts",
        "",
        "| property (task) | method | final test success: method - GRPO [corrected t CI] | verdict | steps to threshold: method - GRPO | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for v in vs:
        f, s = v["final"], v["steps_to"]
        fc = _fmt_ci(f) if "mean" in f else "-"
        sc = _fmt_ci(s, 1) if "mean" in s else "-"
        lines.append(f"| {v['task']} | {v['method']} | {fc} | **{f['verdict']}** | {sc} | **{s['verdict']}** |")
    lines += ["", "## Which method when", "", which_method_table(vs)]
    lines += [
        "",
        "## Agreement with the LLM testbeds",
        "",
        "Each seed paper's claim as tested on its LLM testbed (the tiny model, 8 paired seeds, test split;",
        "[learning.md](learning/learning.md)) and in this suite on the property the testbed stands for. Why",
        'they agree or not: docs/credit.md, "Diagnostic suite".',
        "",
    ]
    lines += claims_lines
    lines += [
        "",
        "## Per task and knob",
        "",
        "Mean final test success over seeds (chance: the best blind policy; start: the uniform policy at step 0), and "
        "in brackets method - GRPO with an uncorrected 95 % paired t interval. Skipped: updates with every "
        "group's advantage 0, summed over seeds.",
        "",
        f"![success against the knob]({png.name})",
        "",
    ]
    for task in tasks:
        cls = TASKS[task]
        lines += [f"### {task}: {cls.isolates}", "", (cls.__doc__ or "").strip().replace("\n", " "), ""]
        header = "| method | " + " | ".join(f"{cls.knob_name} = {k}" for k in knobs[task]) + " | skipped |"
        lines += [header, "|---|" + "---|" * (len(knobs[task]) + 1)]
        chance = " | ".join(f"{rows[f'{task}|{k}|grpo']['chance']:.3f}" for k in knobs[task])
        start = " | ".join(
            f"{np.mean([v['start'] for v in rows[f'{task}|{k}|grpo']['seeds'].values()]):.3f}" for k in knobs[task]
        )
        lines += [f"| chance (blind) | {chance} | |", f"| start (step 0) | {start} | |"]
        for m in methods_of(rows):
            cells_txt = []
            skipped = 0
            for k in knobs[task]:
                r = rows[f"{task}|{k}|{m}"]["seeds"]
                g = rows[f"{task}|{k}|grpo"]["seeds"]
                mean = np.mean([v["final"] for v in r.values()])
                skipped += sum(v["skipped"] for v in r.values())
                if m == "grpo":
                    cells_txt.append(f"{mean:.3f}")
                    continue
                common = sorted(set(r) & set(g), key=int)
                if len(common) >= 2:
                    c = paired_seed_comparison([r[s]["final"] for s in common], [g[s]["final"] for s in common])
                    cells_txt.append(f"{mean:.3f} ({c.diff:+.3f} [{c.t_low:+.3f}, {c.t_high:+.3f}])")
                else:
                    cells_txt.append(f"{mean:.3f}")
            lines.append(f"| {m} | " + " | ".join(cells_txt) + f" | {skipped} |")
        lines.append("")
    md = out_dir / f"{name}.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def load_cells(runs_dir: Path, budget: Budget, methods: list[str]) -> list[dict]:
    folder = runs_dir / budget_key(budget, methods)
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="2 seeds, the middle knob, 10 steps (the CI smoke)")
    ap.add_argument("--seeds", type=int, default=None, help=f"seeds 0..N-1 (default {FULL_SEEDS}; smoke 2)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    ap.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS), help="grpo is always run")
    ap.add_argument("--explore-tasks", type=int, default=None, help="SPA's exploration tasks (default: the budget's)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where the report goes")
    ap.add_argument("--name", default=None, help="the report's file name (default credit_diagnostics[_smoke])")
    ap.add_argument("--runs", type=Path, default=RUNS, help="where per-run files go (resumable)")
    ap.add_argument("--report", action="store_true", help="only the report, from stored runs")
    args = ap.parse_args(argv)
    budget = budget_for(args.smoke)
    if args.explore_tasks is not None:
        budget = replace(budget, explore_tasks=args.explore_tasks)
    methods = [m for m in METHODS if m in set(args.methods) | {"grpo"}]
    n = args.seeds if args.seeds is not None else (2 if args.smoke else FULL_SEEDS)
    flags = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report"]
    command = " ".join(["python benchmarks/credit/suite.py", *flags])
    name = args.name or ("credit_diagnostics_smoke" if args.smoke else "credit_diagnostics")
    if args.report:
        cells = [c for c in load_cells(args.runs, budget, methods) if c["seed"] < n and c["task"] in args.tasks]
        if not cells:
            print(f"no stored runs under {args.runs / budget_key(budget, methods)}", file=sys.stderr)
            return 1
        md = report(args.out, name, budget, command, None, cells)
    else:
        t0 = time.time()
        cells = sweep(args.tasks, list(range(n)), args.jobs, budget, args.smoke, args.runs, methods)
        md = report(args.out, name, budget, command, time.time() - t0, cells)
    print(f"report: {md}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
