"""Does an informative question raise the policy's probability of the hidden answer? (TwentyQ-v0, IGPO)

    python benchmarks/learning/info_gain_check.py runs/learning/twentyq/sft/sft_model

Plays the bisection oracle (no mistakes) on held-out tasks through the same agent and tokens as the
model's rollouts, then scores IGPO's answer probability p_t behind every turn with the given model
(the `answer_probs` pass the trainer runs), both with the policy's own answer call
(`credit.params.probe=answer.n`) and with the authors' "answer now" template. Prints the mean p_t per
turn index: IGPO's turn reward is p_{t+1} - p_t, so informative questions must raise it.
"""

from __future__ import annotations

import sys

import numpy as np


def main(model_path: str, tasks: int = 32) -> dict[str, list[float]]:
    from rlgym_llm.config import load_config
    from rlgym_llm.recipes import parts
    from rlgym_llm.train.credit_inputs import AnswerProbs
    from rlgym_llm.train.sft import oracle_trajectories

    cfg = load_config("train", ["env=twentyq", "env.oracle=rlgym_agents.testbeds:TwentyQOracle"])
    model, tokenizer = parts.load_model(model_path)
    make_env = parts.env_factory(cfg.env, cfg.sandbox)
    agent = parts.build_agent(cfg.agent, tokenizer)
    seeds = range(cfg.env.test_seed_start, cfg.env.test_seed_start + tasks)
    trajs = oracle_trajectories(
        make_env, agent, tokenizer, parts.oracle_factory(cfg.env.oracle), seeds, cfg.env.max_turns
    )
    out = {}
    for probe in ("answer.n", "authors"):
        probs = np.array(AnswerProbs(model, tokenizer, make_env, probe=probe)(trajs), dtype=np.float64)
        out[probe] = [float(x) for x in probs.mean(axis=0)]  # bisection: every episode has 5 turns
        print(
            f"probe {probe}: mean p_t behind turns 0..{probs.shape[1] - 1}: " + " ".join(f"{p:.3f}" for p in out[probe])
        )
    return out


if __name__ == "__main__":
    main(sys.argv[1])
