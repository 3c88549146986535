"""How much of a Math-v0 policy's failures at temperature 1 come from its vocabulary's unused tail.

    rlgym eval env=math checkpoint=<model> tasks=200 samples=4 out_dir=<dir>   # <dir>/trajectories.jsonl
    python benchmarks/learning/tail_mass.py <model> <dir>/trajectories.jsonl [--tasks 96] [--out FILE]

Two measures. (1) Teacher-forced on the oracle's episodes of test-pool questions: the probability
mass each position puts on tokens the oracle never emits (the "tail"), per position and over an
episode (the chance that a temperature-1 episode samples none of them), and that mass at lower
temperatures. (2) In the sampled episodes: per kind of first mistake (`math_errors.classify`), how
many contain a sampled token of logprob below `--rare` (a token the policy gives well under 1 in
1,000). Findings: docs/math_env.md ("Why RL does not raise it").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a checkpoint folder (sft_model, final_model)")
    p.add_argument("trajectories", type=Path, help="an eval's trajectories.jsonl of that model")
    p.add_argument("--tasks", type=int, default=96, help="oracle episodes for the teacher-forced measure")
    p.add_argument("--rare", type=float, default=-8.0, help="logprob below which a sampled token counts as rare")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON result here")
    args = p.parse_args()

    import numpy as np
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from math_errors import classify

    from rlgym_llm.config.compose import load_config
    from rlgym_llm.recipes import parts
    from rlgym_llm.train.sft import oracle_trajectories
    from rlgym_llm.train.trainer import TrainBatch

    rows = [json.loads(x) for x in args.trajectories.read_text().splitlines() if x.strip()]
    by_kind: dict[str, list[int]] = {}
    for r in rows:
        kind, _ = classify(r)
        lps = [lp for t in r["turns"] for lp in (t.get("completion_logprobs") or [])]
        counts = by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += bool(lps) and min(lps) < args.rare

    cfg = load_config("train", [f"sft.init={args.model}"])
    tok = parts.load_tokenizer(args.model)
    model, _ = parts.load_model(args.model)
    model.eval()
    demos = oracle_trajectories(
        parts.env_factory(cfg.env, cfg.sandbox, "test"),
        parts.build_agent(cfg.agent, tok),
        tok,
        parts.oracle_factory(cfg.env.oracle),
        range(args.tasks),
        parts.turn_limit(cfg.env)[0],
    )
    b = TrainBatch.from_trajectories(demos, [np.asarray(t.loss_mask, np.float32) for t in demos], tok.pad_token_id or 0)
    with torch.no_grad():
        logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits[:, :-1].float()
    mask = b.loss_mask[:, 1:] > 0
    emitted = torch.zeros(logits.shape[-1], dtype=torch.bool)
    emitted[b.input_ids[b.loss_mask > 0].unique()] = True
    tail = {}
    for temp in (1.0, 0.7, 0.5):
        mass = torch.softmax(logits[mask] / temp, -1)[:, ~emitted].sum(-1)
        tail[str(temp)] = {
            "mean_per_position": float(mass.mean()),
            "p_episode_without": float(torch.exp(torch.log1p(-mass).sum() / len(demos))),
        }
    result = {
        "model": args.model,
        "vocab": int(logits.shape[-1]),
        "oracle_tokens": int(emitted.sum()),
        "oracle_episodes": len(demos),
        "positions_per_episode": float(mask.sum(-1).float().mean()),
        "tail": tail,
        "sampled": {
            "trajectories": str(args.trajectories),
            "rare_logprob": args.rare,
            "by_kind": {k: {"episodes": n, "with_rare_token": r} for k, (n, r) in sorted(by_kind.items())},
        },
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
