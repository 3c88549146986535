"""`rlgym eval [overrides]`: parse the Hydra overrides, then run `recipes.eval`.

    rlgym eval                                              # the tiny model on Math-v0
    rlgym eval env=gui policy.model=smollm2 tasks=16 samples=4
    rlgym eval checkpoint=runs/demo                         # the newest checkpoint of a training run
    rlgym eval policy=openai policy.base_url=http://127.0.0.1:8000/v1 policy.model=smollm2
    rlgym eval policy=vllm policy.model=smollm2             # starts a vLLM server (`make vllm-env`)

The config is `configs/eval.yaml` (groups env, agent, policy, sandbox as in `rlgym train`). Each
evaluation writes a new folder (`runs/eval/<date>_<time>`); an `out_dir=` that already holds files is
refused, as `rlgym train` does.
Exit codes: 0 done, 1 the evaluation failed (the first error is printed), 2 an invalid config or
an `out_dir` that holds an earlier report.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from rlgym_llm.core.errors import ConfigError, RlgymError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. env=gui policy.model=smollm2 samples=4")
    p.add_argument("--config-dir", help="the config tree (default: the repository's configs/, or the wheel's copy)")
    p.add_argument("--config-path", action="append", metavar="DIR", help="a folder of your own configs (repeatable)")
    p.add_argument("--print-config", action="store_true", help="print the composed config and exit")


def run(args: argparse.Namespace) -> int:
    from rlgym_llm.cli.train import load_or_print
    from rlgym_llm.recipes import eval as evaluation

    cfg, rc = load_or_print("eval", args)
    if cfg is None:
        return rc
    if cfg.checkpoint is None and cfg.policy.model == "tiny":
        print("note: the tiny model untrained scores ~0; pass checkpoint=<a run folder> to evaluate trained weights")
    command = ("rlgym eval " + " ".join(shlex.quote(o) for o in args.overrides)).strip()
    try:
        result, files = evaluation.run(cfg, command=command)
    except ConfigError as e:  # found once the parts are built (the env's own argument checks)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RlgymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    print(f"report: {files['markdown']}  json: {files['json']}  plots: {files['pass_at_k']}, {files['scores']}")
    return 0
