"""Learning benchmark: turn-level credit methods against GRPO, each on the env its paper targets.

    python benchmarks/learning/run.py            # SFT warm-ups, the grid of runs, then the report
    python benchmarks/learning/run.py grid       # only the runs (resumable: finished runs are skipped)
    python benchmarks/learning/run.py report     # only the tables and the plot, from the runs on disk

Every run goes through the product's own code path: `rlgym sft` once per env (the warm-up
checkpoint every method and seed on that env starts from, via `sft.init`), then `rlgym train` with
overrides, as a subprocess. Results are read back from each run's `metrics.jsonl` and
`summary.json`. An env's methods share one budget (steps, tasks per step, group size, SFT warm-up,
learning rate); only `credit=` and `seed=` differ between the runs of an env.

Statistics (`rlgym_llm.eval.paired_seed_comparison`): the seed is the unit. Each run is summarised by
one number per metric (training success over the last half of the steps, the area under the training
curve, held-out success after RL, the area under the held-out curve); a method is compared with GRPO
by the paired difference over seeds (same seed = same warm-up and task stream), with a 95 % bootstrap
CI over seeds and the minimum detectable difference for that number of seeds. "Beats GRPO" needs
the CI to lie above 0. A method provably identical to GRPO on an env (equal advantages in every
group, or runs equal step for step) gets no verdict. learning.json stores every run's per-step
numbers, so `report` regenerates the tables without the run folders.

Outputs: benchmarks/results/learning/learning.{md,json,png}; run folders under runs/learning/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
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
    seeds: tuple[int, ...] = SEEDS
    # extra overrides of one method on this env (e.g. IGPO's probe)
    method_overrides: dict[str, list[str]] = field(default_factory=dict)
    # the paper claims tested here: (method, baseline, claim); the verdict reads held-out success after RL
    claims: tuple[tuple[str, str, str], ...] = ()

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


# Sized for 2 CPU cores shared by several jobs (benchmarks/results/learning/archive/learning.md gave the
# CPU seconds per run): 4 RL steps, held-out success before and after them. `rlgym train env=<testbed>` itself runs the
# 8 steps of configs/env_train/<testbed>.yaml.
TESTBED_BUDGET = {
    "steps": 4,
    "tasks_per_step": 4,
    "group_size": 8,
    "eval_tasks": 32,
    "eval_every": 4,
    # configs/env_train/<testbed>.yaml's honest warm-up: the env's oracle on train-pool tasks, successful
    # episodes only (issue 31)
    "sft": ["sft.episodes=256", "sft.steps=80", "sft.batch_size=8", "sft.successful_only=true"],
    "seeds": tuple(range(8)),
}

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
        # configs/env_train/counter.yaml's warm-up: the oracle, successful episodes only (the noisy
        # teacher it cloned before issue 31 planted idle turns for RL to remove)
        sft=["sft.episodes=512", "sft.steps=200", "sft.idle_prob=0.0", "sft.successful_only=true"],
        paper="a toy env: every method on the same footing",
    ),
    "search": EnvSpec(
        "search",
        [
            "env=search",
            # the 40-people world, not configs/env/search.yaml's 4-people tier
            "++env.kwargs.world_people=40",
            "++env.kwargs.max_hops=1",
            "++env.kwargs.snippet_chars=80",
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
        # settings goals of 1 to 3 subgoals, not configs/env/gui.yaml's one-subgoal tier
        ["env=gui", "~env.kwargs.max_subgoals", "env.max_turns=8", "policy.max_context=2048"],
        ("grpo", "spa", "gigpo"),
        # twice the turns of Search and longer screens: a smaller batch keeps the grid inside the hour
        steps=4,
        tasks_per_step=2,
        eval_tasks=4,
        paper="GiGPO (step groups) and SPA-RL (step attribution) target ALFWorld/WebShop-style app navigation",
    ),
    # The testbeds (docs/testbeds.md), each built so that its paper predicts a difference; 8 seeds each.
    # Warm-ups clone the env's oracle (configs/env_train/<env>.yaml); held-out success on 32 test-pool tasks
    # before and after 4 RL steps, sampled at temperature 1.
    "ladder": EnvSpec(
        "ladder",
        ["env=ladder"],
        ("grpo", "gigpo", "spa"),
        **TESTBED_BUDGET,  # type: ignore[arg-type]
        # SPA's exploration: 4 tasks x 8 samples of the warm-up policy (the default 16 would double a run)
        method_overrides={"spa": ["credit.params.explore_tasks=4"]},
        claims=(
            ("gigpo", "grpo", "GiGPO: step-level groups over recurring states beat GRPO on long-horizon tasks"),
            ("spa", "grpo", "SPA-RL: progress-attributed step rewards beat GRPO on long-horizon tasks"),
        ),
        paper="long horizon (8-10 turns), one bad turn near the top fails, states recur: GiGPO and SPA-RL's setting",
    ),
    "twentyq": EnvSpec(
        "twentyq",
        ["env=twentyq"],
        ("grpo", "igpo"),
        **{  # type: ignore[arg-type]
            **TESTBED_BUDGET,
            # 4x the testbed warm-up: 256 demonstrations / 80 steps left test success at 0.020 (the floor,
            # every claim untestable); 1,024 / 320 reach 0.344 on the 31 distinct test tasks (2026-12-07)
            "sft": ["sft.episodes=1024", "sft.steps=320", "sft.batch_size=8", "sft.successful_only=true"],
        },
        # the tiny model answers with a tool call and never saw the authors' <answer> template
        method_overrides={"igpo": ["credit.params.probe=answer.n"]},
        claims=(("igpo", "grpo", "IGPO: information-gain turn rewards beat GRPO on information seeking"),),
        paper="the answer is hidden and each informative question raises its probability: IGPO's setting",
    ),
    "bugfix": EnvSpec(
        "bugfix",
        ["env=bugfix"],
        ("grpo", "dra", "gated"),
        **{  # type: ignore[arg-type]
            **TESTBED_BUDGET,
            # 4x the testbed warm-up: 256 demonstrations / 80 steps left test success at 0.004 (the floor,
            # every claim untestable); 1,024 / 320 reach 0.531 on the 27 distinct test tasks (2026-12-07)
            "sft": ["sft.episodes=1024", "sft.steps=320", "sft.batch_size=8", "sft.successful_only=true"],
        },
        claims=(
            ("gated", "dra", "G-RA: gating the immediate rewards beats accumulating them ungated (D-RA)"),
            ("dra", "grpo", "G-RA's premise: ungated shaping (D-RA) can be farmed, below the outcome alone"),
        ),
        paper="running the tests is a valid call that can be farmed without submitting: G-RA vs D-RA",
    ),
}


def run_dir(env: str, method: str, seed: int) -> Path:
    return RUNS / env / f"{method}_s{seed}"


def sft_dir(env: str) -> Path:
    return RUNS / env / "sft"


_STOP = threading.Event()  # set by SIGTERM/SIGINT: no new run starts, the running ones are ended
_CHILDREN: set[subprocess.Popen] = set()


def stop_on_signal() -> None:
    """On SIGTERM or SIGINT, end the running `rlgym` children and start no more, so that each one's CPU
    seconds are still recorded (they resume from their last checkpoint on the next grid)."""

    def handler(signum: int, frame: object) -> None:
        _STOP.set()
        for proc in list(_CHILDREN):
            proc.terminate()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _run(cmd: list[str], log: Path) -> int:
    """Run `cmd` with its output in `log`; its CPU seconds (user + system, this process tree) are added
    to `<log>.cpu` (a resumed run adds its parts). Returns -1 without running once a stop was asked."""
    if _STOP.is_set():
        return -1
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.time()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _CHILDREN.add(proc)
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage (several grids run at once)
        finally:
            _CHILDREN.discard(proc)
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
    cpu_file = log.with_suffix(".cpu")
    before = float(cpu_file.read_text()) if cpu_file.exists() else 0.0
    cpu_file.write_text(f"{before + usage.ru_utime + usage.ru_stime:.1f}")
    print(f"[{time.strftime('%H:%M:%S')}] rc={rc} {time.time() - t0:6.0f}s {log.parent.relative_to(ROOT)}", flush=True)
    return rc


def sft_cmd(spec: EnvSpec) -> list[str]:
    return [
        "rlgym",
        "sft",
        *spec.env,
        *spec.sft,
        # no held-out measure here: under load its episodes time out (600 s) and bias it; each run's
        # step 0 measures the warm-up (failures counted), and docs/testbeds.md has the calibration
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
        *spec.method_overrides.get(method, []),
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


def heldout_size(summary: dict) -> dict[str, int | None]:
    """A run's held-out measure (its `summary.json`): the distinct tasks its episodes drew (seeds that
    drew the same task count once) and its episodes, failed ones included; None for a run that
    predates the counts (`rlgym_llm.train.loop.evaluate`)."""
    measures = [m for m in (summary.get("before"), summary.get("after")) if m and "tasks" in m]
    if not measures:
        return {"heldout_tasks": None, "heldout_episodes": None}
    m = measures[0]
    return {
        "heldout_tasks": max(int(x["tasks"]) for x in measures),
        "heldout_episodes": int(m["episodes"] + m["failed"]),
    }


def heldout_scope(runs: list[dict]) -> str:
    """'5 distinct tasks, 96 episodes per run': the held-out measure's size over runs (values joined
    by '/' where runs differ), and how many runs predate the counts."""
    counted = [r for r in runs if r.get("heldout_tasks") is not None]
    if not counted:
        return "distinct tasks not recorded (the runs predate the count)"
    tasks = "/".join(str(n) for n in sorted({r["heldout_tasks"] for r in counted}))
    episodes = "/".join(str(n) for n in sorted({r["heldout_episodes"] for r in counted}))
    missing = len(runs) - len(counted)
    return f"{tasks} distinct tasks, {episodes} episodes per run" + (
        f" ({missing} of {len(runs)} runs predate the count)" if missing else ""
    )


def is_complete(path: Path, steps: int) -> bool:
    metrics = path / "metrics.jsonl"
    if not (path / "summary.json").exists() or not metrics.exists():
        return False
    return sum(1 for line in metrics.read_text().splitlines() if line.strip()) >= steps


def grid(envs: list[str], jobs: int, methods: list[str] | None = None) -> None:
    """The warm-ups, then every (env, method, seed) cell not yet finished; `methods`: only these
    methods' cells (a grid split over sessions: the report compares what has finished)."""
    specs = [ENVS[e] for e in envs]
    todo_sft = [s for s in specs if not (sft_dir(s.name) / "sft_model" / "config.json").exists()]
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: _run(sft_cmd(s), sft_dir(s.name).with_suffix(".log")), todo_sft))
    # seed-major order: if time runs out, every method has the same number of finished seeds
    todo = [
        (s, m, seed)
        for seed in sorted({x for s in specs for x in s.seeds})
        for s in specs
        for m in s.methods
        if seed in s.seeds and (methods is None or m in methods) and not is_complete(run_dir(s.name, m, seed), s.steps)
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
#
# The seed is the unit: each run is summarised by one number per metric, and a method is compared with
# GRPO by the paired difference over seeds (same seed = same warm-up and task stream), with a bootstrap
# CI over seeds and the minimum detectable difference for that number of seeds
# (`rlgym_llm.eval.paired_seed_comparison`). Steps of one run are never counted as independent samples.

METRICS = {
    "train_end": "training success, last half of the steps (mean per run)",
    "train_auc": "area under the training-success curve (mean over all steps per run)",
    "heldout_end": "held-out success after RL",
    "heldout_auc": "area under the held-out curve (trapezoid over its evaluations, per step)",
}


def _run_from_disk(spec: EnvSpec, method: str, seed: int) -> dict | None:
    path = run_dir(spec.name, method, seed)
    if not is_complete(path, spec.steps):
        return None
    records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()][: spec.steps]
    summary = json.loads((path / "summary.json").read_text())
    # held-out = the test pool: the summary's before and after. The step records' `eval_success` is
    # the curve, measured on the val pool (DESIGN.md, Splits): kept apart, never mixed into the test
    # points (the report read the last curve point as "after RL" until 2026-12-07)
    heldout = [[0, (summary["before"] or {}).get("success")], [spec.steps, (summary["after"] or {}).get("success")]]
    val_curve = [[r["step"], r["eval_success"]] for r in records if r.get("eval_success") is not None]
    return {
        "seed": seed,
        "success_per_step": [r["success"] for r in records],
        "heldout": [p for p in heldout if p[1] is not None],
        "val_curve": val_curve,
        "grpo_equal_share": [r["grpo_equal_share"] for r in records] if "grpo_equal_share" in records[0] else None,
        "updated": [not r["skipped_update"] for r in records],
        "failed": sum(r["failed"] for r in records),
        "trajectories": sum(r["trajectories"] for r in records),
        "zero_variance_share": [r["zero_variance_share"] for r in records],
        "wall_s": summary["total_wall_s"],
        "cpu_s": float(cpu.read_text()) if (cpu := path.with_suffix(".cpu")).exists() else None,
        # held-out episodes that failed (e.g. past their timeout on a loaded machine): success leaves them out
        "heldout_failed": sum((summary.get(k) or {}).get("failed", 0) for k in ("before", "after")),
        # per test task, 1/0 per episode after RL: the task-unit interval of a claim (runs since 2026-12-07)
        "outcomes_after": (summary.get("after") or {}).get("outcomes"),
        **heldout_size(summary),
    }


def _stored_runs(stored: dict, env: str, method: str) -> list[dict]:
    """The per-run results kept in the last learning.json (this file stores every run's numbers)."""
    entry = (stored.get("envs", {}).get(env, {}).get("methods", {})).get(method)
    if not entry:
        return []
    if "runs" in entry:
        return entry["runs"]
    # the first report stored each run's training-success curve only (held-out means over seeds)
    return [
        {"seed": s, "success_per_step": row, "heldout": [], "grpo_equal_share": None}
        for s, row in zip(entry["seeds"], entry["success_per_step"])
    ]


def _summaries(run: dict) -> dict[str, float | None]:
    x = np.asarray(run["success_per_step"], dtype=np.float64)
    held = np.asarray(run.get("heldout") or [], dtype=np.float64).reshape(-1, 2)
    auc = float(np.trapezoid(held[:, 1], held[:, 0]) / (held[-1, 0] - held[0, 0])) if len(held) > 1 else None
    return {
        "train_end": float(x[len(x) // 2 :].mean()),
        "train_auc": float(x.mean()),
        "heldout_end": float(held[-1, 1]) if len(held) else None,
        "heldout_auc": auc,
    }


def identical_to_grpo(runs: list[dict], grpo: list[dict]) -> str | None:
    """Why a method is provably GRPO on this env, or None.

    Proof, where the runs logged it: the method's advantages equalled GRPO's in every group of every
    step (`grpo_equal_share` 1.0 throughout). For runs that predate that metric: every seed's run equals
    GRPO's step for step (same seed, same warm-up: a deterministic run diverges at its first different
    advantage).
    """
    logged = [r["grpo_equal_share"] for r in runs if r.get("grpo_equal_share") is not None]
    if logged and len(logged) == len(runs):
        if all(share == 1.0 for shares in logged for share in shares):
            return "its advantages equalled GRPO's in every group of every step of every run"
        return None
    by_seed = {r["seed"]: r for r in grpo}
    if (
        runs
        and all(r["seed"] in by_seed for r in runs)
        and all(
            r["success_per_step"] == by_seed[r["seed"]]["success_per_step"]
            and (r.get("heldout") or []) == (by_seed[r["seed"]].get("heldout") or [])
            for r in runs
        )
    ):
        return f"every run equals GRPO's step for step ({len(runs)} seeds: same training success at every step)"
    return None


def report(envs: list[str]) -> dict:
    from rlgym_llm.eval.metrics import paired_seed_comparison, seed_mean_interval

    stored = json.loads((RESULTS / "learning.json").read_text()) if (RESULTS / "learning.json").exists() else {}
    out: dict = {"seeds": list(SEEDS), "statistics": "seed-level", "envs": {}}
    for name in envs:
        spec = ENVS[name]
        old_env = stored.get("envs", {}).get(name, {})
        env_out: dict = {"budget": spec.budget(), "sft": spec.sft, "overrides": spec.env, "paper": spec.paper}
        if spec.method_overrides:
            env_out["method_overrides"] = spec.method_overrides
        env_out["sft_summary"] = old_env.get("sft_summary")
        sft_file = sft_dir(name) / "sft_summary.json"
        if sft_file.exists():
            env_out["sft_summary"] = json.loads(sft_file.read_text())
        # stored runs count only if they had this budget (a changed budget starts the env's seeds afresh)
        same_budget = (
            old_env.get("budget", env_out["budget"]) == env_out["budget"]
            and old_env.get("sft", env_out["sft"]) == env_out["sft"]
        )
        runs: dict[str, list[dict]] = {}
        for method in spec.methods:
            # per seed: the run folder if it is there and finished, else the result stored in learning.json
            kept = {r["seed"]: r for r in _stored_runs(stored, name, method)} if same_budget else {}
            kept.update({seed: r for seed in spec.seeds if (r := _run_from_disk(spec, method, seed)) is not None})
            runs[method] = [kept[s] for s in sorted(kept)]
        env_out["methods"] = {}
        for method, mine in runs.items():
            if not mine:
                continue
            old = old_env.get("methods", {}).get(method, {})
            per_seed = {k: [_summaries(r)[k] for r in mine] for k in METRICS}
            entry: dict = {
                "seeds": [r["seed"] for r in mine],
                "runs": mine,
                "per_seed": per_seed,
                "means": {
                    k: seed_mean_interval(v).to_dict() for k, v in per_seed.items() if all(x is not None for x in v)
                },
                # diagnostics: recomputed from run folders, else kept from the stored report
                "updated_steps_share": _share(mine, "updated", old.get("updated_steps_share")),
                "failed_episode_share": _failed(mine, old.get("failed_episode_share")),
                "zero_variance_share": _share(mine, "zero_variance_share", old.get("zero_variance_share")),
                "heldout_curve": _heldout_curve(mine) or old.get("heldout_curve", []),
            }
            if method != "grpo" and runs.get("grpo"):
                entry["identical_to_grpo"] = identical_to_grpo(mine, runs["grpo"])
                theirs = {r["seed"]: _summaries(r) for r in runs["grpo"]}
                common = [i for i, r in enumerate(mine) if r["seed"] in theirs]
                entry["vs_grpo"] = {}
                for key in METRICS:
                    a = [per_seed[key][i] for i in common]
                    b = [theirs[mine[i]["seed"]][key] for i in common]
                    if common and all(v is not None for v in a + b):
                        c = paired_seed_comparison(a, b)
                        entry["vs_grpo"][key] = {**c.to_dict(), "verdict": c.verdict(method, "GRPO")}
            env_out["methods"][method] = entry
        env_out["claims"] = [claim_verdict(runs, *c, needed=len(spec.seeds)) for c in spec.claims]
        env_out["seeds_wanted"] = len(spec.seeds)
        # compute: CPU seconds (user + system) of the warm-up and of every finished run
        cpu = [r["cpu_s"] for rs in runs.values() for r in rs if r.get("cpu_s") is not None]
        sft_cpu = sft_dir(name).with_suffix(".cpu")
        env_out["cpu_s"] = {
            "runs": float(sum(cpu)),
            "runs_counted": len(cpu),
            "sft": float(sft_cpu.read_text()) if sft_cpu.exists() else (old_env.get("cpu_s") or {}).get("sft"),
        }
        # the warm-up's calibration: held-out success at step 0, before RL (one value per run)
        start = [r["heldout"][0][1] for rs in runs.values() for r in rs if r.get("heldout") and r["heldout"][0][0] == 0]
        env_out["heldout_after_warmup"] = {"mean": float(np.mean(start)), "n": len(start)} if start else None
        finished = [r for rs in runs.values() for r in rs]
        env_out["heldout_scope"] = heldout_scope(finished) if finished else None
        out["envs"][name] = env_out
    # envs not regenerated this time keep their stored results (a report of some envs drops none)
    for name, env_out in stored.get("envs", {}).items():
        if name not in out["envs"] and name in ENVS:
            out["envs"][name] = env_out
    out["envs"] = {name: out["envs"][name] for name in ENVS if name in out["envs"]}
    return out


def collapsed(run: dict) -> bool:
    """A run collapses when its held-out success after RL is below half of where it started (step 0)."""
    held = run.get("heldout") or []
    return len(held) > 1 and held[-1][1] < 0.5 * held[0][1]


FLOOR_SUCCESS = 0.05
FLOOR_TIED = 0.9
"""A claim is untestable on runs whose held-out success never exceeds FLOOR_SUCCESS (start and end, both
methods) while at least FLOOR_TIED of their training groups are tied: no signal for either method."""


def claim_verdict(
    runs: dict[str, list[dict]], method: str, baseline: str, claim: str, needed: int = len(TESTBED_BUDGET["seeds"])
) -> dict:
    """A paper's claim on a testbed: `reproduced` when the method's held-out success after RL beats the
    baseline's (paired over seeds, the bootstrap and the t interval both above 0, and, where the runs
    kept per-task outcomes, the two-way bootstrap over seeds and test tasks too), `reversed` when they
    all lie below 0, else `not reproduced`; with the AUC comparison, collapse shares and compute beside it.
    With fewer than `needed` paired seeds the intervals are reported but no verdict is given."""
    from rlgym_llm.eval.metrics import paired_seed_comparison, run_task_bootstrap, task_outcome_cells

    out: dict = {"method": method, "baseline": baseline, "claim": claim}
    mine = {r["seed"]: r for r in runs.get(method, [])}
    theirs = {r["seed"]: r for r in runs.get(baseline, [])}
    seeds = sorted(set(mine) & set(theirs))
    out["seeds"] = seeds
    for who, rs in ((method, mine), (baseline, theirs)):
        done = [rs[s] for s in seeds]
        cpu = [r["cpu_s"] for r in done if r.get("cpu_s") is not None]
        out[who] = {
            "heldout_failed": sum(r.get("heldout_failed", 0) for r in done),
            "collapse_share": float(np.mean([collapsed(r) for r in done])) if done else None,
            "cpu_s_per_run": float(np.mean(cpu)) if cpu else None,
            "wall_s_per_run": float(np.mean([r["wall_s"] for r in done])) if done else None,
        }
    if len(seeds) < 2:
        out["verdict"] = f"too few paired seeds ({len(seeds)} of {needed}): no verdict"
        return out
    for key in ("heldout_end", "heldout_auc"):
        a = [_summaries(mine[s])[key] for s in seeds]
        b = [_summaries(theirs[s])[key] for s in seeds]
        if all(v is not None for v in a + b):
            out[key] = paired_seed_comparison(a, b).to_dict()
    # the task as the unit: (seed, task) cells of the method's minus the baseline's success after RL,
    # a two-way bootstrap over seeds and tasks (the test tasks are the same in every run)
    pairs = [(mine[s].get("outcomes_after"), theirs[s].get("outcomes_after")) for s in seeds]
    by_task = None
    if all(a and b for a, b in pairs):
        try:
            cells = task_outcome_cells(pairs)
        except ValueError:  # runs measured on different tasks: no task-unit interval
            cells = None
        if cells is not None:
            by_task = run_task_bootstrap(cells).to_dict() | {"runs": cells.shape[0], "tasks": cells.shape[1]}
    out["heldout_end_by_task"] = by_task
    c = out.get("heldout_end")
    above = by_task is None or by_task["low"] > 0  # where the task-unit interval exists, it must agree
    below = by_task is None or by_task["high"] < 0
    # a start at the floor gives neither method a signal (its groups are tied): no test of the claim
    held = [p[1] for s in seeds for r in (mine[s], theirs[s]) for p in (r.get("heldout") or [])]
    tied = [float(v) for s in seeds for r in (mine[s], theirs[s]) for v in (r.get("zero_variance_share") or [])]
    floor = bool(held) and max(held) <= FLOOR_SUCCESS and bool(tied) and float(np.mean(tied)) >= FLOOR_TIED
    if c is None:
        out["verdict"] = "no held-out measure"
    elif floor:
        out["verdict"] = (
            f"untestable here: held-out success at the floor (<= {FLOOR_SUCCESS:.2f} at every measure), "
            f"{np.mean(tied):.0%} of groups tied"
        )
    elif len(seeds) < needed:
        out["verdict"] = f"{len(seeds)} of {needed} paired seeds: not enough for a verdict"
    elif c["low"] > 0 and c["t_low"] > 0 and above:
        out["verdict"] = "reproduced"
    elif c["high"] < 0 and c["t_high"] < 0 and below:
        out["verdict"] = "reversed"
    else:
        out["verdict"] = "not reproduced"
    return out


def _share(runs: list[dict], key: str, fallback: float | None) -> float | None:
    values = [float(v) for r in runs if r.get(key) is not None for v in r[key]]
    return float(np.mean(values)) if values else fallback


def _failed(runs: list[dict], fallback: float | None) -> float | None:
    if not all("failed" in r for r in runs):
        return fallback
    return float(sum(r["failed"] for r in runs) / max(sum(r["trajectories"] for r in runs), 1))


def _heldout_curve(runs: list[dict]) -> list[dict]:
    points: dict[int, list[float]] = {}
    for r in runs:
        for step, success in r.get("heldout") or []:
            points.setdefault(int(step), []).append(success)
    if len(points) < 2:
        return []
    return [{"step": k, "mean": float(np.mean(v)), "n": len(v)} for k, v in sorted(points.items())]


def _ci(d: dict) -> str:
    return f"{d['point']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"


def _vs(c: dict | None) -> str:
    if not c:
        return "-"
    return f"{c['diff']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}] (t [{c['t_low']:+.3f}, {c['t_high']:+.3f}]), MDD {c['mdd']:.3f}"


def _by_task(c: dict | None) -> str:
    if not c:
        return "- (runs without per-task outcomes)"
    return f"{c['point']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}] ({c['tasks']} tasks x {c['runs']} seeds)"


def write(results: dict, command: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    results["command"] = command
    results["generated"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (RESULTS / "learning.json").write_text(json.dumps(results, indent=1))
    lines = [
        "# Learning benchmark: turn-level credit methods vs GRPO",
        "",
        "Regenerate: `python benchmarks/learning/run.py` (= `make bench-learning`: warm-ups, runs, report;"
        " resumable), or the tables alone: `python benchmarks/learning/run.py report` (from the run folders,"
        " else from the per-run results stored in learning.json).",
        f"This file: `{command}`, {results['generated']}; tiny model, 2 CPU cores shared with other jobs.",
        "",
        "Each method starts from the same per-env SFT warm-up checkpoint and gets the same budget as GRPO on",
        "that env; only `credit=` and `seed=` differ. Success = share of episodes with reward > 0.",
        "Held-out = the env's **test** split: tasks whose content (prompt and hidden task) no warm-up or RL",
        "step ever sees (each env's docs say how it splits). Start: each env's warm-up, named in its section.",
        "Statistics (`rlgym_llm.eval.paired_seed_comparison`): the seed is the unit. Each run is summarised by",
        "one number per metric (training success over the last half of the steps; the area under its",
        "training-success curve; held-out success after RL and the area under the held-out curve where the",
        "runs stored them per seed). Means carry a 95 % bootstrap CI over seeds. A method is compared with",
        "GRPO by the paired difference over seeds (same seed = same warm-up and task stream): mean, 95 %",
        "bootstrap CI resampling seeds, and the minimum detectable difference (MDD) for that number of seeds",
        "(paired t, alpha 0.05, power 0.8). With 3 seeds a percentile bootstrap has 10 distinct resamples and",
        "undercovers, so a verdict also needs the paired t interval to exclude 0. A method whose runs are",
        "provably GRPO's on an env gets no verdict.",
        "",
    ]
    lines += ["## Verdicts", ""] + [f"- {v}" for v in verdicts(results)] + [""]
    claims = [(name, c) for name, env in results["envs"].items() for c in env.get("claims", [])]
    if claims:
        lines += [
            "## Paper claims on the testbeds",
            "",
            "Primary metric: held-out success after RL (32 held-out episodes, one per held-out seed, sampled at",
            "temperature 1; seeds that drew the same task are one task: each testbed's section states its distinct tasks), paired over",
            "seeds: diff [bootstrap 95% CI] (paired t 95%); with the task as the unit: (seed, test task) cells, a",
            "two-way bootstrap over seeds and tasks. `reproduced`: every interval above 0; `reversed`: every one",
            "below; else `not reproduced`. Collapse: held-out success after RL below half of its start. CPU:",
            "user + system seconds of one run's process (a warm-up is shared and not counted; SPA's exploration",
            "and IGPO's scoring passes are inside the run). A held-out episode that fails (past the rollout's 600 s",
            "episode timeout, on an overloaded machine) is left out of success; the failed ones are counted.",
            "",
            "| testbed | claim | seeds | held-out after, diff | the same, task as the unit | held-out AUC, diff"
            " | collapse (method / baseline) | CPU s per run (method / baseline)"
            " | held-out episodes failed (method / baseline) | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, c in claims:
            m, b = c[c["method"]], c[c["baseline"]]
            fmt = lambda v, f="{:.2f}": "-" if v is None else f.format(v)  # noqa: E731
            lines.append(
                f"| {name} | {c['claim']} ({c['method']} vs {c['baseline']}) | {len(c['seeds'])} |"
                f" {_vs(c.get('heldout_end'))} | {_by_task(c.get('heldout_end_by_task'))} | {_vs(c.get('heldout_auc'))} |"
                f" {fmt(m['collapse_share'])} / {fmt(b['collapse_share'])} |"
                f" {fmt(m['cpu_s_per_run'], '{:.0f}')} / {fmt(b['cpu_s_per_run'], '{:.0f}')} |"
                f" {m.get('heldout_failed', '-')} / {b.get('heldout_failed', '-')} | **{c['verdict']}** |"
            )
        lines.append("")
    for name, env in results["envs"].items():
        lines += [f"## {name}", "", f"Why this env: {env['paper']}.", ""]
        lines += [f"Overrides: `{' '.join(env['overrides'])}`; budget: `{' '.join(env['budget'])}`;"]
        for method, extra in (env.get("method_overrides") or {}).items():
            lines += [f"{method} only: `{' '.join(extra)}`;"]
        sft = env.get("sft_summary") or {}
        loss = f" (loss {sft['loss_first']:.2f} -> {sft['loss_last']:.2f})" if sft else ""
        lines += [f"warm-up: `{' '.join(env['sft'])}`{loss}.", ""]
        if env.get("heldout_scope"):
            lines += [f"Held-out measure: {env['heldout_scope']} (one sampled episode per held-out seed).", ""]
        if env.get("heldout_after_warmup"):
            w = env["heldout_after_warmup"]
            lines += [
                f"Held-out success after the warm-up (step 0 of every run): {w['mean']:.3f} (mean of {w['n']} runs).",
                "",
            ]
        if env.get("cpu_s") and (env["cpu_s"]["runs_counted"] or env["cpu_s"].get("sft") is not None):
            c = env["cpu_s"]
            sft_cpu = "" if c.get("sft") is None else f"; warm-up {c['sft']:.0f} CPU s"
            lines += [f"Compute: {c['runs']:.0f} CPU s over {c['runs_counted']} finished runs{sft_cpu}.", ""]
        lines += [
            "| method | seeds | training success, last half | training AUC | held-out after | vs GRPO, last half"
            " (diff [bootstrap 95% CI] (paired t 95%), MDD) | vs GRPO, AUC | steps with an update | failed episodes"
            " | tied groups |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for method, e in env["methods"].items():
            m = e["means"]
            vs = e.get("vs_grpo", {})
            same = e.get("identical_to_grpo")
            last = "(baseline)" if method == "grpo" else "identical to GRPO" if same else _vs(vs.get("train_end"))
            auc = "" if method == "grpo" or same else _vs(vs.get("train_auc"))
            held = (
                _ci(m["heldout_end"])
                if "heldout_end" in m
                else (
                    f"{e['heldout_curve'][-1]['mean']:.3f} (mean; per-seed values not stored)"
                    if e["heldout_curve"]
                    else "-"
                )
            )
            fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
            lines.append(
                f"| {method} | {len(e['seeds'])} | {_ci(m['train_end'])} | {_ci(m['train_auc'])} | {held} | {last} |"
                f" {auc} | {fmt(e['updated_steps_share'])} | {fmt(e['failed_episode_share'])} |"
                f" {fmt(e['zero_variance_share'])} |"
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
    lines += ["![training success vs steps, mean over seeds with a 95% bootstrap CI over seeds](learning.png)", ""]
    (RESULTS / "learning.md").write_text("\n".join(lines))
    plot(results)


def verdicts(results: dict) -> list[str]:
    """One plain sentence per env and method: beats GRPO, or not (with what the seeds could detect), or
    no verdict because the method is provably GRPO there, or because nothing ever succeeded."""
    out = []
    for name, env in results["envs"].items():
        methods = env["methods"]
        if not methods:
            out.append(f"{name}: no finished run.")
            continue
        short = [f"{m} {len(methods[m]['seeds']) if m in methods else 0}" for m in ENVS[name].methods]
        seeds = ENVS[name].seeds
        if any(m not in methods or len(methods[m]["seeds"]) < len(seeds) for m in ENVS[name].methods):
            out.append(f"{name}: grid not finished, seeds done per method: {', '.join(short)} (of {len(seeds)}).")
        best = max(max(max(r["success_per_step"]) for r in e["runs"]) for e in methods.values())
        if best == 0 and all(
            not e["heldout_curve"] or max(p["mean"] for p in e["heldout_curve"]) == 0 for e in methods.values()
        ):
            n = sum(len(e["seeds"]) for e in methods.values())
            out.append(
                f"{name}: the tiny model never succeeded after the warm-up ({n} finished runs, every training step and "
                "held-out episode at 0 success). GRPO's groups all tie, so it never updates; no method can beat it "
                "here: no verdict."
            )
            continue
        for method, e in methods.items():
            if method == "grpo" or "vs_grpo" not in e:
                continue
            if e.get("identical_to_grpo"):
                out.append(f"{name}: {method} is identical to GRPO here ({e['identical_to_grpo']}): no verdict.")
                continue
            if "train_end" not in e["vs_grpo"]:
                out.append(f"{name}: {method} has no seed in common with GRPO yet: no comparison.")
                continue
            n = e["vs_grpo"]["train_end"]["n"]
            # a verdict needs every seed the env asks for; fewer give the interval so far, and say so
            enough = n >= len(seeds)
            parts = []
            for key, label in (("train_end", "last half"), ("train_auc", "AUC"), ("heldout_end", "held-out after")):
                c = e["vs_grpo"].get(key)
                if c:
                    parts.append(
                        f"{label} {c['diff']:+.3f}, bootstrap [{c['low']:+.3f}, {c['high']:+.3f}], "
                        f"t [{c['t_low']:+.3f}, {c['t_high']:+.3f}]" + (f": {c['verdict']}" if enough else "")
                    )
            out.append(
                f"{name}: {method} vs GRPO over {n} paired seeds"
                + ("" if enough else f" (of {len(seeds)}: not enough for a verdict, interim intervals)")
                + ": "
                + "; ".join(parts)
                + "."
            )
    return out


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlgym_llm.eval.metrics import seed_mean_interval

    envs = results["envs"]
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.8), squeeze=False)
    for ax, (name, env) in zip(axes[0], envs.items()):
        for method, e in env["methods"].items():
            x = np.array([r["success_per_step"] for r in e["runs"]], dtype=np.float64)
            ivs = [seed_mean_interval(x[:, k]) for k in range(x.shape[1])]
            steps = np.arange(1, x.shape[1] + 1)
            ax.plot(steps, [iv.point for iv in ivs], marker="o", markersize=3, label=f"{method} ({len(x)} seeds)")
            ax.fill_between(steps, [iv.low for iv in ivs], [iv.high for iv in ivs], alpha=0.12)
        ax.set_title(name)
        ax.set_xlabel("RL step")
        ax.set_ylabel("training success (mean over seeds, 95% CI)")
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
    p.add_argument("--methods", nargs="+", default=None, help="grid: only these methods' runs (default: all)")
    args = p.parse_args()
    if args.what in ("all", "grid"):
        stop_on_signal()
        grid(args.envs, args.jobs, args.methods)
    if args.what in ("all", "report"):
        write(report(args.envs), "python benchmarks/learning/run.py " + " ".join(sys.argv[1:] or ["all"]))
        print((RESULTS / "learning.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
