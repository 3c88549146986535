"""`rlgym train` and `rlgym sft`: parse the Hydra overrides, then run `recipes.train` / `recipes.sft`.

    rlgym train                                   # the demo: SFT warm-up, then turn-level GRPO on Counter
    rlgym train credit=gated env=swe sft.enabled=false trainer.steps=50
    rlgym train +experiment=search_igpo
    rlgym sft env=math sft.steps=200              # only the supervised warm-up
    rlgym train trainer.nproc=2                   # data-parallel: starts 2 processes under torchrun
    rlgym train resume=runs/train/<date>_<time>   # continue a run: its saved config, its newest checkpoint
    rlgym train resume=runs/train/<date>_<time> trainer.steps=40   # ... and extend it to 40 steps

`resume=RUN` reads the run's config.yaml: nothing is retyped. Other overrides may repeat saved values;
`trainer.steps` may be raised (never below the steps done), and `progress`, `trainer.threads`,
`trainer.nproc`, `trainer.sampling_seeds` may change; any other difference is refused in one line
naming the key, the saved value and the given one (`rlgym_llm.recipes.resume`). The summary printed
at the end (and summary.json) covers the whole run, its steps before the resume included.

Ctrl-C during the RL loop checkpoints the state it stopped in (one process, synchronous; with
several processes or rollouts sampled ahead, the newest periodic checkpoint stays the resume point)
and prints one line with the command that continues the run; during the warm-up nothing is saved yet
(a resume warms up again).

Exit codes: 0 done, 1 the run failed (the first error is printed; a missing package is named with the
extra that installs it), 2 an invalid config (a resume's conflicting override), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from rlgym_llm.core.errors import ConfigError, MissingDependencyError, RlgymError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. credit=gated env=math trainer.steps=10")
    p.add_argument("--config-dir", help="the config tree (default: the repository's configs/, or the wheel's copy)")
    p.add_argument(
        "--config-path",
        action="append",
        metavar="DIR",
        help="a folder of your own configs (repeatable; also $RLGYM_CONFIG_PATH): DIR/env/mine.yaml is env=mine",
    )
    p.add_argument("--print-config", action="store_true", help="print the composed config and exit")


def load_or_print(name: str, args: argparse.Namespace) -> tuple[Any, int]:
    """(the validated config of `configs/<name>.yaml`, 0), or (None, exit code) after printing its
    problems (2) or the config itself (`--print-config`: 0; an invalid config is not printed)."""
    from rlgym_llm.recipes import parts, resume

    try:  # `resume=RUN`: the run's saved config
        cfg = resume.load(
            name, args.overrides, getattr(args, "config_dir", None), getattr(args, "config_path", None) or ()
        )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return None, 2
    if args.print_config:
        print(parts.config_yaml(cfg))
        return None, 0
    return cfg, 0


def torchrun_command(args: argparse.Namespace, nproc: int, out_dir: str) -> list[str]:
    """This `rlgym train` command under torchrun: `nproc` processes on this machine (a free
    rendezvous port), the run folder fixed to `out_dir` (its timestamp is resolved once, here)."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    argv += ["-m", "rlgym_llm.cli.main", "train"]
    if getattr(args, "config_dir", None):
        argv += ["--config-dir", args.config_dir]
    for folder in getattr(args, "config_path", None) or ():
        argv += ["--config-path", folder]
    keep = [o for o in args.overrides if o.lstrip("+").partition("=")[0] != "out_dir"]
    return argv + keep + [f"out_dir={out_dir}"]


def run_train(args: argparse.Namespace) -> int:
    """`rlgym train`: SFT warm-up (optional), then the RL loop; prints a before/after summary.
    With `trainer.nproc` > 1 and not yet under torchrun, it starts itself under torchrun."""
    cfg, rc = load_or_print("train", args)
    if cfg is None:
        return rc
    if cfg.trainer.nproc > 1 and "WORLD_SIZE" not in os.environ:
        from rlgym_llm.recipes import parts

        try:  # the run folder's problems here, with exit code 2, not from inside torchrun's workers
            parts.run_folder(cfg, create=False)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        # torchrun sets 1 OpenMP thread per process unless told: the config's count instead
        env = {"OMP_NUM_THREADS": str(cfg.trainer.threads), **os.environ}
        try:
            return subprocess.run(torchrun_command(args, cfg.trainer.nproc, cfg.out_dir), env=env).returncode
        except KeyboardInterrupt:
            print(interrupted(cfg), file=sys.stderr)
            return 130
    from rlgym_llm.recipes import train
    from rlgym_llm.recipes.parts import ProgressReporter

    main_rank = os.environ.get("RANK", "0") == "0"  # the other ranks of a data-parallel run stay quiet
    reporter = ProgressReporter(enabled=cfg.progress and main_rank)
    try:
        summary = train.run(cfg, report=reporter.line, progress=reporter)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RlgymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:  # a package of an extra, imported where no message names it
        print(f"error: {MissingDependencyError.of(e, '`rlgym train`')}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        reporter.close()  # the progress bars end before the line
        if main_rank:
            print(interrupted(cfg), file=sys.stderr)
        return 130
    finally:
        reporter.close()
    if not main_rank:
        return 0
    fmt = lambda d: "n/a" if d is None else f"{d['success']:.3f}"  # noqa: E731
    resumed = f" (resumed after step {summary['resumed_from']})" if summary.get("resumed_from") is not None else ""
    print(f"\nrlgym train: {cfg.env.id}, credit={cfg.credit.method}, {summary['steps']} RL steps{resumed}")
    if summary.get("sft"):
        print(f"  SFT warm-up: {summary['sft']['steps']} steps on {summary['sft']['episodes']} oracle episodes")
    scope = held_out_scope([summary["before"], summary["after"]], cfg.trainer.eval_tasks)
    print(f"  test-pool success ({scope}): before RL {fmt(summary['before'])}, after {fmt(summary['after'])}")
    updates = summary["updates"]
    why = ", ".join(f"{reason}: {n}" for reason, n in updates["skip_reasons"].items())
    print(f"  updates: {updates['done']} done, {updates['skipped']} skipped" + (f" ({why})" if why else ""))
    if summary["steps"] and not updates["done"]:
        print("  no update happened: the weights are those RL started from")
    full = summary.get("prompt_fills_context") or {}
    if full.get("episodes"):
        print(
            f"  {full['episodes']} of {full['of']} training episodes had no turn: the prompt alone filled "
            f"policy.max_context={cfg.policy.max_context} (raise it, or shorten the env's prompt)"
        )
    first, last = summary["train_success_first"], summary["train_success_last"]
    if first is not None:
        print(f"  training success: first step {first:.3f}, mean of the last 3 steps {last:.3f}")
    part = " since the resume" if resumed else ""
    print(f"  wall time{part}: {summary['total_wall_s']:.0f} s (CPU time {summary['cpu_s']:.0f} s)")
    out = Path(summary["out_dir"])
    curve = summary["curve"] or "(no curve)"
    print(f"  outputs: {out / 'metrics.jsonl'}, {out / 'checkpoints'}, {curve}, {out / 'summary.json'}")
    return 0


def held_out_scope(measures: list[dict[str, Any] | None], episodes: int) -> str:
    """'5 distinct tasks, 96 episodes': the held-out measure's size, with the distinct tasks its episodes
    drew (seeds that drew the same task count once) where a measure counted them."""
    tasks = [int(m["tasks"]) for m in measures if m and "tasks" in m]
    counted = f"{max(tasks)} distinct task{'s' * (max(tasks) != 1)}, " if tasks else ""
    return f"{counted}{episodes} episode{'s' * (episodes != 1)}"


def interrupted(cfg: Any) -> str:
    """The one line `rlgym train` prints on Ctrl-C: what is saved, and the command that continues."""
    from rlgym_llm.recipes.resume import newest_checkpoint

    out = Path(cfg.out_dir)
    if not (out / "config.yaml").exists():
        return "rlgym train: interrupted before the run folder was made; nothing to continue"
    again = f"rlgym train resume={shlex.quote(str(out))}"
    found = newest_checkpoint(out)
    if found is None:
        return f"rlgym train: interrupted before its first RL step (no checkpoint yet); start it again with: {again}"
    step = int(found.name.removeprefix("step_"))
    return f"rlgym train: interrupted after {step} of {cfg.trainer.steps} RL steps, saved in {found}; continue with: {again}"


def run_sft(args: argparse.Namespace) -> int:
    """`rlgym sft`: only the supervised warm-up; measures held-out success before and after it."""
    cfg, rc = load_or_print("train", args)
    if cfg is None:
        return rc
    from rlgym_llm.recipes import sft
    from rlgym_llm.recipes.parts import ProgressReporter

    reporter = ProgressReporter(enabled=cfg.progress)
    try:
        result = sft.run(cfg, report=reporter.line, progress=reporter)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RlgymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"error: {MissingDependencyError.of(e, '`rlgym sft`')}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        reporter.close()
        print(f"rlgym sft: interrupted; the warm-up was not saved (run folder: {cfg.out_dir})", file=sys.stderr)
        return 130
    finally:
        reporter.close()
    print(f"rlgym sft: {cfg.env.id}, {result['steps']} steps on {result['episodes']} oracle episodes")
    if result["success_before"] is not None:
        print(
            f"  test-pool success ({held_out_scope([{'tasks': result['held_out_tasks']}], result['held_out_episodes'])}): "
            f"before {result['success_before']:.3f}, after {result['success_after']:.3f}"
        )
    print(f"  model: {result['model']}  ({result['seconds']:.0f} s)")
    return 0
