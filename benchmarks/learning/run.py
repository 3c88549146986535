"""Learning benchmark: turn-level credit methods against GRPO, each on the env its paper targets.

    python benchmarks/learning/run.py            # SFT warm-ups, the grid of runs, then the report
    python benchmarks/learning/run.py grid       # only the runs (resumable: finished runs are skipped)
    python benchmarks/learning/run.py report     # only the tables and the plot, from the runs on disk

Every run goes through the product's own code path: `rlgym sft` once per env (the warm-up
checkpoint every method and seed on that env starts from, via `sft.init`), then `rlgym train` with
overrides, as a subprocess. Results are read back from each run's `metrics.jsonl` and
`summary.json`. An env's methods share one budget (steps, tasks per step, group size, SFT warm-up,
learning rate); only `credit=` and `seed=` differ between the runs of an env.

Statistics (`rlgym_llm.eval.metrics`): at each point of the curve, the score matrix is (seeds x
steps in the window), where a cell is the training success of one step of one seed (the share of
its G x tasks episodes that succeeded); IQM with a 95 % stratified-bootstrap CI over that matrix.
"Beats GRPO" needs the 95 % bootstrap CI of IQM(method) - IQM(GRPO) over the last half of the
steps to lie above 0.

Outputs: benchmarks/results/learning/learning.{md,json,png}; run folders under runs/learning/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs" / "learning"
RESULTS = ROOT / "benchmarks" / "results" / "learning"
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class EnvSpec:
    """One env of the benchmark: its overrides, the methods run on it, and its shared budget."""

    name: str
    env: list[str]
    methods: tuple[str, ...]
    steps: int = 6
    tasks_per_step: int = 4
    group_size: int = 4
    eval_tasks: int = 8
    eval_every: int = 0
    sft: list[str] = field(default_factory=lambda: ["sft.episodes=128", "sft.steps=40", "sft.batch_size=8"])
    paper: str = ""

    def budget(self) -> list[str]:
        return [
            f"trainer.steps={self.steps}",
            f"trainer.tasks_per_step={self.tasks_per_step}",
            f"trainer.group_size={self.group_size}",
            f"trainer.eval_tasks={self.eval_tasks}",
            f"trainer.eval_every={self.eval_every}",
            "trainer.save_every=2",
            "trainer.threads=1",
        ]


# Small task sets, short episodes: sized so the whole grid fits in under an hour on 2 shared cores.
ENVS: dict[str, EnvSpec] = {
    "counter": EnvSpec(
        "counter",
        ["env=counter"],
        ("grpo", "turn_grpo", "gated", "igpo", "spa", "gigpo"),
        steps=15,
        tasks_per_step=6,
        group_size=8,
        eval_tasks=64,
        eval_every=5,
        # the main job's warm-up: a noisy teacher (half of its turns idle), cloned as it is
        sft=["sft.episodes=512", "sft.steps=200", "sft.idle_prob=0.5", "sft.successful_only=false"],
        paper="the default demo env, where the tiny model does learn: every method on the same footing",
    ),
    "search": EnvSpec(
        "search",
        [
            "env=search",
            "+env.kwargs.max_hops=1",
            "+env.kwargs.snippet_chars=80",
            "env.max_turns=4",
            "policy.max_context=1536",
        ],
        ("grpo", "turn_grpo", "igpo"),
        paper="IGPO (information gain) targets multi-hop search QA; MT-GRPO (turn-level GRPO) a search tool",
    ),
    "code": EnvSpec(
        "code",
        [
            "env=code",
            "+env.kwargs.difficulty=1",
            "env.oracle=rlgym_agents.code:CodeOracleAgent",
            # configs/env/code.yaml names the kwarg `sandbox`; CodeEnv's is `sandbox_backend`
            "env.sandbox_kwarg=sandbox_backend",
            "env.max_turns=3",
            "policy.max_context=1536",
            "policy.sampling.max_tokens=192",
        ],
        ("grpo", "gated"),
        paper="G-RA (gated rewards) targets SWE-style coding; Code-v0 is its smaller sibling",
    ),
    "gui": EnvSpec(
        "gui",
        ["env=gui", "+env.kwargs.task_apps=[settings]", "env.max_turns=8", "policy.max_context=2048"],
        ("grpo", "spa", "gigpo"),
        # twice the turns of Search and longer screens: a smaller batch keeps the grid inside the hour
        steps=4,
        tasks_per_step=2,
        eval_tasks=4,
        paper="GiGPO (step groups) and SPA-RL (step attribution) target ALFWorld/WebShop-style app navigation",
    ),
}


def run_dir(env: str, method: str, seed: int) -> Path:
    return RUNS / env / f"{method}_s{seed}"


def sft_dir(env: str) -> Path:
    return RUNS / env / "sft"


def _run(cmd: list[str], log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.time()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    print(f"[{time.strftime('%H:%M:%S')}] rc={rc} {time.time() - t0:6.0f}s {log.parent.relative_to(ROOT)}", flush=True)
    return rc


def sft_cmd(spec: EnvSpec) -> list[str]:
    return [
        "rlgym",
        "sft",
        *spec.env,
        *spec.sft,
        "trainer.eval_tasks=0",
        "trainer.threads=1",
        f"out_dir={sft_dir(spec.name)}",
    ]


def train_cmd(spec: EnvSpec, method: str, seed: int) -> list[str]:
    return [
        "rlgym",
        "train",
        *spec.env,
        f"credit={method}",
        f"seed={seed}",
        # each seed trains on its own task seeds, none of them seen in the warm-up
        f"env.train_seed_start={100_000 * (seed + 1)}",
        "sft.enabled=false",
        f"sft.init={sft_dir(spec.name) / 'sft_model'}",
        *spec.budget(),
        "progress=false",
        f"out_dir={run_dir(spec.name, method, seed)}",
        # an interrupted cell continues from its last checkpoint
        *(
            [f"resume={run_dir(spec.name, method, seed)}"]
            if (run_dir(spec.name, method, seed) / "config.yaml").exists()
            else []
        ),
    ]


def is_complete(path: Path, steps: int) -> bool:
    metrics = path / "metrics.jsonl"
    if not (path / "summary.json").exists() or not metrics.exists():
        return False
    return sum(1 for line in metrics.read_text().splitlines() if line.strip()) >= steps


def grid(envs: list[str], jobs: int) -> None:
    specs = [ENVS[e] for e in envs]
    todo_sft = [s for s in specs if not (sft_dir(s.name) / "sft_model" / "config.json").exists()]
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: _run(sft_cmd(s), sft_dir(s.name).with_suffix(".log")), todo_sft))
    # seed-major order: if time runs out, every method has the same number of finished seeds
    todo = [
        (s, m, seed)
        for seed in SEEDS
        for s in specs
        for m in s.methods
        if not is_complete(run_dir(s.name, m, seed), s.steps)
    ]
    print(f"{len(todo)} runs to do", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda job: _locked_run(*job), todo))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _locked_run(spec: EnvSpec, method: str, seed: int) -> None:
    """Run one grid cell unless another grid process holds it (several grids may share an env)."""
    path = run_dir(spec.name, method, seed)
    # the log and the lock sit beside the run folder: `rlgym train` refuses a new run in a folder that holds files
    lock = path.with_suffix(".pid")
    if (lock.exists() and _alive(int(lock.read_text() or 0))) or is_complete(path, spec.steps):
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(str(os.getpid()))
    try:
        _run(train_cmd(spec, method, seed), path.with_suffix(".log"))
    finally:
        lock.unlink(missing_ok=True)


# --- report ---------------------------------------------------------------------------------------


def _load(spec: EnvSpec, method: str) -> tuple[np.ndarray, list[dict], list[int]] | None:
    """(seeds x steps) training success, the summaries, and the seeds of the finished runs."""
    rows, summaries, seeds, extra = [], [], [], []
    for seed in SEEDS:
        path = run_dir(spec.name, method, seed)
        if not is_complete(path, spec.steps):
            continue
        records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()]
        rows.append([r["success"] for r in records[: spec.steps]])
        extra.append(records[: spec.steps])
        summary = json.loads((path / "summary.json").read_text())
        summary["records"] = extra[-1]
        summaries.append(summary)
        seeds.append(seed)
    return (np.array(rows), summaries, seeds) if rows else None


def _heldout_curve(summaries: list[dict]) -> list[dict]:
    points: dict[int, list[float]] = {0: [(s["before"] or {}).get("success", np.nan) for s in summaries]}
    for s in summaries:
        for r in s["records"]:
            if r.get("eval_success") is not None:
                points.setdefault(r["step"], []).append(r["eval_success"])
    return (
        [{"step": k, "mean": float(np.mean(v)), "n": len(v)} for k, v in sorted(points.items())]
        if len(points) > 1
        else []
    )


def _diff_ci(a: np.ndarray, b: np.ndarray, reps: int = 2000) -> tuple[float, float, float]:
    """IQM(a) - IQM(b) with a 95 % CI from independent stratified bootstraps of the two matrices."""
    from rlgym_llm.eval.metrics import iqm, stratified_bootstrap

    ra = stratified_bootstrap(a, iqm, reps=reps, seed=1)
    rb = stratified_bootstrap(b, iqm, reps=reps, seed=2)
    low, high = np.percentile(ra - rb, [2.5, 97.5])
    return float(iqm(a) - iqm(b)), float(low), float(high)


def report(envs: list[str], window: int = 2) -> dict:
    from rlgym_llm.eval.metrics import interval_estimate, iqm, mean

    out: dict = {"seeds": list(SEEDS), "window": window, "envs": {}}
    for name in envs:
        spec = ENVS[name]
        env_out: dict = {"budget": spec.budget(), "sft": spec.sft, "overrides": spec.env, "paper": spec.paper}
        env_out["methods"] = {}
        sft_file = sft_dir(name) / "sft_summary.json"
        env_out["sft_summary"] = json.loads(sft_file.read_text()) if sft_file.exists() else None
        data = {m: _load(spec, m) for m in spec.methods}
        for method, loaded in data.items():
            if loaded is None:
                continue
            x, summaries, seeds = loaded
            curve = []
            for start in range(0, spec.steps, window):
                block = x[:, start : start + window]
                iv = interval_estimate(block, iqm, seed=0)
                curve.append({"step": start + block.shape[1], **iv.to_dict()})
            last = x[:, spec.steps // 2 :]
            before = np.array([[(s["before"] or {}).get("success", np.nan)] for s in summaries])
            after = np.array([[(s["after"] or {}).get("success", np.nan)] for s in summaries])
            entry = {
                "seeds": seeds,
                "success_per_step": x.tolist(),
                "curve_iqm": curve,
                "last_half_iqm": interval_estimate(last, iqm, seed=0).to_dict(),
                "first_step_mean": float(x[:, 0].mean()),
                "heldout_before_mean": interval_estimate(before, mean, seed=0).to_dict(),
                "heldout_after_mean": interval_estimate(after, mean, seed=0).to_dict(),
                # mean held-out success over seeds at each periodic evaluation (eval_every > 0)
                "heldout_curve": _heldout_curve(summaries),
                "wall_s_mean": float(np.mean([s["total_wall_s"] for s in summaries])),
                # why a comparison can be degenerate: no update (all groups tie) or failed episodes
                "updated_steps_share": float(
                    np.mean([not r["skipped_update"] for s in summaries for r in s["records"]])
                ),
                "failed_episode_share": float(
                    np.sum([r["failed"] for s in summaries for r in s["records"]])
                    / max(np.sum([r["trajectories"] for s in summaries for r in s["records"]]), 1)
                ),
                "zero_variance_share": float(
                    np.mean([r["zero_variance_share"] for s in summaries for r in s["records"]])
                ),
            }
            if method != "grpo" and data.get("grpo") is not None:
                grpo_x = data["grpo"][0]  # type: ignore[index]
                # last half: where the runs end up; all steps: how fast they get there (area under the curve)
                for key, mine, theirs in (
                    ("vs_grpo_last_half", last, grpo_x[:, spec.steps // 2 :]),
                    ("vs_grpo_all_steps", x, grpo_x),
                ):
                    d, low, high = _diff_ci(mine, theirs)
                    verdict = (
                        "beats GRPO" if low > 0 else "worse than GRPO" if high < 0 else "no significant difference"
                    )
                    entry[key] = {"diff": d, "low": low, "high": high, "verdict": verdict}
            env_out["methods"][method] = entry
        out["envs"][name] = env_out
    return out


def write(results: dict, command: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    results["command"] = command
    results["generated"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (RESULTS / "learning.json").write_text(json.dumps(results, indent=1))
    f = lambda d: f"{d['point']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"  # noqa: E731
    lines = [
        "# Learning benchmark: turn-level credit methods vs GRPO",
        "",
        "Regenerate: `python benchmarks/learning/run.py` (= `make bench-learning`: warm-ups, runs, report;"
        " resumable), or the tables alone from the runs on disk: `python benchmarks/learning/run.py report`.",
        f"This file: `{command}`, {results['generated']}; tiny model, 2 CPU cores shared with other jobs.",
        "",
        "Each method starts from the same per-env SFT warm-up checkpoint and gets the same budget as GRPO on",
        "that env; only `credit=` and `seed=` differ. Success = share of episodes with reward > 0.",
        "IQM over the (seeds x steps) matrix of per-step training success, 95 % stratified-bootstrap CIs",
        "(`rlgym_llm.eval.metrics`). Held-out: one episode per held-out task (the env config's eval temperature),",
        "before and after RL (mean over seeds). Verdict: the 95 % CI of IQM(method) - IQM(GRPO) over the last half of the steps (where runs end up)",
        "and over all steps (how fast they get there).",
        "",
    ]
    lines += ["## Verdicts", ""] + [f"- {v}" for v in verdicts(results)] + [""]
    for name, env in results["envs"].items():
        lines += [f"## {name}", "", f"Why this env: {env['paper']}.", ""]
        lines += [f"Overrides: `{' '.join(env['overrides'])}`; budget: `{' '.join(env['budget'])}`;"]
        sft = env.get("sft_summary") or {}
        loss = f" (loss {sft['loss_first']:.2f} -> {sft['loss_last']:.2f})" if sft else ""
        lines += [f"warm-up: `{' '.join(env['sft'])}`{loss}.", ""]
        lines += [
            "| method | seeds | success step 1 | IQM success, last half | vs GRPO (diff, 95% CI) | held-out before |"
            " held-out after | steps with an update | failed episodes | tied groups |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for method, e in env["methods"].items():
            vs = e.get("vs_grpo_last_half")
            vs_s = (
                f"{vs['diff']:+.3f} [{vs['low']:+.3f}, {vs['high']:+.3f}]: **{vs['verdict']}**" if vs else "(baseline)"
            )
            lines.append(
                f"| {method} | {len(e['seeds'])} | {e['first_step_mean']:.3f} | {f(e['last_half_iqm'])} | {vs_s} | "
                f"{f(e['heldout_before_mean'])} | {f(e['heldout_after_mean'])} | {e['updated_steps_share']:.2f} | "
                f"{e['failed_episode_share']:.2f} | {e['zero_variance_share']:.2f} |"
            )
        lines.append("")
        curves = {m: e["heldout_curve"] for m, e in env["methods"].items() if e.get("heldout_curve")}
        if curves:
            steps = sorted({p["step"] for c in curves.values() for p in c})
            lines += [
                "Held-out success during training (mean over seeds; same held-out tasks and sampling seeds at every point):",
                "",
                "| method | " + " | ".join(f"step {k}" for k in steps) + " |",
                "|---|" + "---:|" * len(steps),
            ]
            for m, c in curves.items():
                at = {p["step"]: p["mean"] for p in c}
                lines.append(f"| {m} | " + " | ".join(f"{at[k]:.3f}" if k in at else "" for k in steps) + " |")
            lines.append("")
    lines += ["![IQM success vs training steps](learning.png)", ""]
    (RESULTS / "learning.md").write_text("\n".join(lines))
    plot(results)


def verdicts(results: dict) -> list[str]:
    """One plain sentence per env and method: beats GRPO, or not, and why the comparison may be empty."""
    out = []
    for name, env in results["envs"].items():
        methods = env["methods"]
        if not methods:
            out.append(f"{name}: no finished run.")
            continue
        short = [f"{m} {len(methods[m]['seeds']) if m in methods else 0}" for m in ENVS[name].methods]
        if any(m not in methods or len(methods[m]["seeds"]) < len(SEEDS) for m in ENVS[name].methods):
            out.append(f"{name}: grid not finished, seeds done per method: {', '.join(short)} (of {len(SEEDS)}).")
        best = max(max(max(row) for row in e["success_per_step"]) for e in methods.values())
        held = max(e["heldout_after_mean"]["point"] for e in methods.values())
        if best == 0 and held == 0:
            n = sum(len(e["seeds"]) for e in methods.values())
            failed = max(e["failed_episode_share"] for e in methods.values())
            out.append(
                f"{name}: the tiny model never succeeded after the warm-up ({n} finished runs, every training step and "
                f"held-out episode at 0 success"
                + (f"; up to {failed:.0%} of a method's episodes failed on engine timeouts" if failed else "")
                + "). GRPO's "
                "groups all tie, so it never updates; no method can beat it here: no significant difference, by "
                "construction."
            )
            continue
        for method, e in methods.items():
            if "vs_grpo_last_half" in e:
                v, a = e["vs_grpo_last_half"], e["vs_grpo_all_steps"]
                out.append(
                    f"{name}: {method} vs GRPO: {v['verdict']} over the last half (IQM diff {v['diff']:+.3f}, 95% CI "
                    f"[{v['low']:+.3f}, {v['high']:+.3f}]); {a['verdict']} over all steps ({a['diff']:+.3f} "
                    f"[{a['low']:+.3f}, {a['high']:+.3f}]); {len(e['seeds'])} vs {len(methods['grpo']['seeds'])} seeds."
                )
    return out


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = results["envs"]
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.8), squeeze=False)
    for ax, (name, env) in zip(axes[0], envs.items()):
        for method, e in env["methods"].items():
            steps = [c["step"] for c in e["curve_iqm"]]
            pts = [c["point"] for c in e["curve_iqm"]]
            ax.plot(steps, pts, marker="o", label=f"{method} ({len(e['seeds'])} seeds)")
            ax.fill_between(steps, [c["low"] for c in e["curve_iqm"]], [c["high"] for c in e["curve_iqm"]], alpha=0.15)
        ax.set_title(name)
        ax.set_xlabel(f"RL step (window of {results['window']})")
        ax.set_ylabel("IQM training success (95% CI)")
        ax.set_ylim(-0.02, 1.02)
        if env["methods"]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "learning.png", dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="?", default="all", choices=["all", "grid", "report"])
    p.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (each uses one torch thread)")
    args = p.parse_args()
    if args.what in ("all", "grid"):
        grid(args.envs, args.jobs)
    if args.what in ("all", "report"):
        write(report(args.envs), "python benchmarks/learning/run.py " + " ".join(sys.argv[1:] or ["all"]))
        print((RESULTS / "learning.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
