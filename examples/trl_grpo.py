"""Train with TRL's GRPOTrainer on an env of this project: the tiny model, on CPU.

    python examples/trl_grpo.py                                   # toy/Counter-v0 in process, 2 steps
    python examples/trl_grpo.py --env rlgym/Search-v0 --steps 20
    rlgym serve rlgym/Search-v0 --port 8000 &                     # ... or an env served elsewhere:
    python examples/trl_grpo.py --env rlgym/Remote-v0 --url ws://127.0.0.1:8000

TRL drives the episode (`GRPOTrainer(environment_factory=...)`): each tool call the model writes is one
env step through `rlgym_llm.serve.trl.trl_environment`, and the env's outcome is the rollout's reward.
How this differs from `rlgym train` (groups, turn-level credit, token ids) is in docs/interop.md.
Prints one JSON line per logged step and, at the end, `trl_grpo: N steps, M rollouts of K tasks`; exits
non-zero unless every step ran and each group of `--group-size` rollouts played one task.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental in trl 1.16


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="toy/Counter-v0")
    parser.add_argument("--url", help="the server, for --env rlgym/Remote-v0")
    parser.add_argument("--model", help="a model folder (default: the tiny model, built in code)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4, help="TRL's num_generations")
    parser.add_argument("--max-turns", type=int, default=4, help="tool calls per rollout (TRL's tool iterations)")
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    import rlgym_llm  # noqa: F401  (registers the shipped envs and the toy ones)
    from rlgym_llm.rollout.tiny_model import build_tiny_model
    from rlgym_llm.serve.trl import seed_dataset, trl_environment

    model_dir = args.model or str(build_tiny_model())
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    if getattr(tokenizer, "response_template", None) is None:
        # The tiny model writes Qwen-style <tool_call>{...}</tool_call>: TRL parses it with Qwen3's template.
        tokenizer.response_template = qwen3_template
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    env_kwargs = {"url": args.url} if args.url else {}
    played: list[int] = []  # the task seed of every rollout, to check that a group shares its task

    class Environment(trl_environment(args.env, max_turns=args.max_turns, **env_kwargs)):  # type: ignore[misc]
        def reset(self, **example):
            opening = super().reset(**example)
            played.append(self.seed)
            return opening

    out = args.out or tempfile.mkdtemp(prefix="trl_grpo-")
    config = GRPOConfig(
        output_dir=out,
        max_steps=args.steps,
        per_device_train_batch_size=args.group_size,
        num_generations=args.group_size,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_turns,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=not sys.stdout.isatty(),  # a bar on a terminal; in a log, only the JSON lines below
    )
    # One task seed per dataset row: TRL repeats each row `num_generations` times, so a group plays one task.
    tasks = seed_dataset(args.steps)
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config, environment_factory=Environment, train_dataset=tasks
    )
    trainer.remove_callback(PrinterCallback)  # it prints each log as a Python dict; the JSON lines below say it
    trainer.train()
    logged = [row for row in trainer.state.log_history if "loss" in row]
    for row in logged:
        print(json.dumps({k: v for k, v in row.items() if isinstance(v, (int, float))}, sort_keys=True))
    steps, tasks_played = trainer.state.global_step, len(set(played))
    print(f"trl_grpo: {steps} steps, {len(played)} rollouts of {tasks_played} tasks on {args.env}", flush=True)
    ok = steps == args.steps and len(played) == args.steps * args.group_size and tasks_played == args.steps
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
