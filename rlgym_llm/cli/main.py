"""The `rlgym` command line.

    rlgym envs                              # registered env ids, entry points and turn limits
    rlgym check-env rlgym/Math-v0 --fuzz 500
    rlgym check-env my_envs:EchoEnv          # your own env, from a module in the working directory
    rlgym --version

Each subcommand is a `(add_arguments, run)` pair in `COMMANDS`. `run` does its imports inside the
function, so heavy subcommands (training, evaluation) cost nothing until they are used.
Before any subcommand runs (and so before torch is imported), OpenMP's workers are told to sleep
when idle rather than spin (`OMP_WAIT_POLICY=PASSIVE`, unless set; `rlgym_llm.core.threads`).
Exit codes: 0 success, 1 the command ran and found problems, 2 usage errors (bad arguments, unknown id).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence


def _add_envs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--namespace", help="only ids of this namespace, e.g. 'rlgym'")


def _run_envs(args: argparse.Namespace) -> int:
    import gymnasium

    import rlgym_llm
    from rlgym_llm.core import registry

    ids = rlgym_llm.list_envs(args.namespace)
    width = max((len(i) for i in ids), default=0)
    for env_id in ids:
        entry = gymnasium.registry[env_id].entry_point
        target = (
            entry
            if isinstance(entry, str)
            else f"{getattr(entry, '__module__', '?')}:{getattr(entry, '__qualname__', entry)}"
        )
        # The turn limit lives beside Gymnasium's spec (make() applies it), not inside it.
        limit = registry.default_max_turns(env_id)
        print(f"{env_id:<{width}}  {target}  max_turns={limit if limit is not None else 'none'}")
    return 0


def _add_check_env(p: argparse.ArgumentParser) -> None:
    p.add_argument("env_id", help="a registered id (rlgym/Math-v0), or module:Class of your own env (my_envs:EchoEnv)")
    p.add_argument("--module", help="import this module first; it registers its envs (e.g. my_envs)")
    p.add_argument("--fuzz", type=int, default=300, metavar="N", help="hostile actions to send (default: 300)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="first seed (default: 0)")


def _run_check_env(args: argparse.Namespace) -> int:
    from rlgym_llm import UnknownEnvError
    from rlgym_llm.core.checker import run_checks

    if args.fuzz < 0:
        print("error: --fuzz must be >= 0", file=sys.stderr)
        return 2
    from rlgym_llm.core import registry

    try:
        if args.module:
            registry.import_env_module(args.module)
        env_id = registry.resolve(args.env_id)
        report = run_checks(env_id, n_fuzz=args.fuzz, seed=args.seed)
    except (UnknownEnvError, ImportError, AttributeError) as e:
        print(
            f"error: {type(e).__name__}: {e}" if not isinstance(e, UnknownEnvError) else f"error: {e}", file=sys.stderr
        )
        return 2
    print(report.format())
    if not report.ok:
        failed = sorted({c.name for c in report.checks if not c.ok})
        print(f"check-env: {args.env_id} failed {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _add_train(p: argparse.ArgumentParser) -> None:
    from rlgym_llm.cli.train import add_arguments

    add_arguments(p)


def _run_train(args: argparse.Namespace) -> int:
    from rlgym_llm.cli.train import run_train

    return run_train(args)


def _run_sft(args: argparse.Namespace) -> int:
    from rlgym_llm.cli.train import run_sft

    return run_sft(args)


Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: dict[str, Command] = {
    "envs": ("list registered env ids", _add_envs, _run_envs),
    "check-env": ("check that an env keeps the rlgym-llm contract", _add_check_env, _run_check_env),
    "train": ("train a policy with RL (Hydra overrides: credit=gated env=math ...)", _add_train, _run_train),
    "sft": ("supervised warm-up on oracle trajectories (Hydra overrides)", _add_train, _run_sft),
    "serve": (
        "serve a registered env as an OpenEnv environment (`rlgym serve ENV_ID`, docs/interop.md)",
        lambda p: importlib.import_module("rlgym_llm.cli.serve").add_arguments(p),
        lambda a: importlib.import_module("rlgym_llm.cli.serve").run(a),
    ),
    "sandbox": (
        "run a command in a sandbox backend (`rlgym sandbox exec -- CMD`)",
        lambda p: importlib.import_module("rlgym_llm.cli.sandbox").add_arguments(p),
        lambda a: importlib.import_module("rlgym_llm.cli.sandbox").run(a),
    ),
    "export": (
        "write a training run's weights as a Hugging Face folder (LoRA merged, or the adapter)",
        lambda p: importlib.import_module("rlgym_llm.cli.export").add_arguments(p),
        lambda a: importlib.import_module("rlgym_llm.cli.export").run(a),
    ),
    "eval": (
        "evaluate a policy on an env's held-out tasks: pass@k, mean/IQM with CIs, report and plots",
        lambda p: importlib.import_module("rlgym_llm.cli.eval").add_arguments(p),
        lambda a: importlib.import_module("rlgym_llm.cli.eval").run(a),
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The `rlgym` argument parser, one subparser per entry of `COMMANDS`."""
    from rlgym_llm import __version__

    parser = argparse.ArgumentParser(prog="rlgym", description="Train and evaluate LLM agents with RL.")
    parser.add_argument("--version", action="version", version=f"rlgym-llm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, add_arguments, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(p)
        p.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `rlgym` script; returns the exit code."""
    from rlgym_llm.core import threads

    threads.quiet_openmp()  # OpenMP reads it once, when `import torch` loads it: set it before any
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
