"""`rlgym/Math-v0`: math problems solved with a safe exact calculator tool and one `submit_answer`.

Modules: `env` (the env and its tools), `tasks` (seeded generator, JSONL loader), `verify` (answer
equivalence), `calculator` (safe exact arithmetic). Reached through `rlgym_llm.make`.
"""
