"""`rlgym export RUN --out DIR`: a training run's weights as a Hugging Face folder (`recipes.export`).

    rlgym export runs/train --out exported               # the newest checkpoint, LoRA merged
    rlgym export runs/train/checkpoints/step_000010 --out step10
    rlgym export runs/train --out adapter --adapter      # LoRA runs: the adapter alone

Exit codes: 0 written, 2 nothing to export at RUN (or --adapter for a run without LoRA).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlgym_llm.core.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dir",
        metavar="RUN",
        help="a run folder (its newest checkpoint), a step_* checkpoint, or an exported folder",
    )
    p.add_argument("--out", required=True, help="the folder to write (created)")
    p.add_argument("--adapter", action="store_true", help="write the LoRA adapter alone instead of merged weights")


def run(args: argparse.Namespace) -> int:
    from rlgym_llm.recipes.export import export

    try:
        folder = export(Path(args.run_dir), Path(args.out), adapter=args.adapter)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    kind = "LoRA adapter" if args.adapter else "model"
    print(f"rlgym export: {kind} written to {folder} (transformers: from_pretrained({str(folder)!r}))")
    return 0
